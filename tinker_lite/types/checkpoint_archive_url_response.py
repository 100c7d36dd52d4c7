"""``CheckpointArchiveUrlResponse`` (tinker_lite only)."""

from __future__ import annotations

from datetime import datetime

import attrs


@attrs.frozen(kw_only=True)
class CheckpointArchiveUrlResponse:
    """A signed URL to download a checkpoint archive, and when it expires."""

    url: str
    expires: datetime
