"""Checkpoint storage in use.

Official module ``tinker.types.current_checkpoint_storage_usage_response``.
"""

from __future__ import annotations

import attrs

__all__ = ["CurrentCheckpointStorageUsageItem", "CurrentCheckpointStorageUsageResponse"]


@attrs.frozen(kw_only=True)
class CurrentCheckpointStorageUsageItem:
    """Storage of one user or project: checkpoint count, size and estimated monthly cost."""

    project_id: str | None = None
    org_user_urn: str | None = None
    user_email: str | None = None
    user_name: str | None = None
    checkpoint_count: int
    size_bytes: int
    size_gigabytes: float
    estimated_monthly_cost_usd: float | None = None


@attrs.frozen(kw_only=True)
class CurrentCheckpointStorageUsageResponse:
    """Storage per user or project, and the rate it is billed at."""

    effective_rate_usd_per_gigabyte_month: float | None = None
    data: list[CurrentCheckpointStorageUsageItem]
