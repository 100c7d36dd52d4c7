"""Results of save_weights_external.

Official module ``tinker.types.save_weights_external_response``.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["SaveWeightsExternalResponse", "SaveWeightsExternalResponseInternal"]


@attrs.frozen(kw_only=True)
class SaveWeightsExternalResponse:
    """The exported weights' path."""

    path: str
    type: Literal["save_weights_external"] | None = None


@attrs.frozen(kw_only=True)
class SaveWeightsExternalResponseInternal:
    """Raw result of save_weights_external: path and size."""

    path: str | None = None
    size_bytes: int | None = None
    type: Literal["save_weights_external"] | None = None
