"""``UnloadModelResponse`` (official module ``tinker.types.unload_model_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class UnloadModelResponse:
    """Result of unload_model."""

    model_id: str
    type: str | None = None
