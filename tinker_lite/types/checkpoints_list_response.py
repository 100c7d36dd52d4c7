"""``CheckpointsListResponse`` (official module ``tinker.types.checkpoints_list_response``)."""

from __future__ import annotations

import attrs

from .checkpoint import Checkpoint
from .cursor import Cursor


@attrs.frozen(kw_only=True)
class CheckpointsListResponse:
    """A page of checkpoints (``cursor`` only on the user-wide listing)."""

    checkpoints: list[Checkpoint]
    cursor: Cursor | None = None
