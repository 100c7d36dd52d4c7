"""``CopyWeightsResponse`` (official module ``tinker.types.copy_weights_response``)."""

from __future__ import annotations

import attrs

__all__ = ["CopyWeightsResponse"]


@attrs.frozen(kw_only=True)
class CopyWeightsResponse:
    """The copied checkpoint's path."""

    tinker_path: str
