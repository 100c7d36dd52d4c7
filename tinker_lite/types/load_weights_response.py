"""``LoadWeightsResponse`` (official module ``tinker.types.load_weights_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen
class LoadWeightsResponse:
    """Result of load_weights."""

    path: str | None = None
    model_id: str | None = None
    type: str | None = None
