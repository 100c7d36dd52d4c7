"""``OptimStepResponse`` (official module ``tinker.types.optim_step_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen
class OptimStepResponse:
    """Result of optim_step."""

    metrics: dict[str, float] | None = None
