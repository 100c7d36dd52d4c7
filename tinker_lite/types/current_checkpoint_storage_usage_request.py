"""``GetCurrentCheckpointStorageUsageRequest``.

Official module ``tinker.types.current_checkpoint_storage_usage_request``.
"""

from __future__ import annotations

import attrs

__all__ = ["GetCurrentCheckpointStorageUsageRequest"]


@attrs.frozen(kw_only=True)
class GetCurrentCheckpointStorageUsageRequest:
    """Checkpoint storage in use now, optionally for one project."""

    project_id: str | None = None
