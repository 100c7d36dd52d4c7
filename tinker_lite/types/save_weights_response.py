"""``SaveWeightsResponse`` (official module ``tinker.types.save_weights_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen
class SaveWeightsResponse:
    """Result of save_weights: the checkpoint's tinker:// path."""

    path: str
    type: str | None = None
