"""Billing usage records (official module ``tinker.types.billing_usage_response``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import attrs

__all__ = [
    "BillingEventInfo",
    "BillingUsageEvent",
    "BillingUsageResponse",
    "BillingUsageSession",
    "CheckpointBillingEvent",
    "SamplingPrefillBillingEvent",
    "SamplingSampleBillingEvent",
    "StorageBillingEvent",
    "TrainingBillingEvent",
]


@attrs.frozen(kw_only=True)
class TrainingBillingEvent:
    """Tokens trained on."""

    type: Literal["training"] = "training"
    token_count: int


@attrs.frozen(kw_only=True)
class SamplingPrefillBillingEvent:
    """Prompt tokens prefilled (``cached``: served from the prefix cache)."""

    type: Literal["sampling_prefill"] = "sampling_prefill"
    cached: bool
    token_count: int


@attrs.frozen(kw_only=True)
class SamplingSampleBillingEvent:
    """Tokens sampled."""

    type: Literal["sampling_sample"] = "sampling_sample"
    token_count: int


@attrs.frozen(kw_only=True)
class CheckpointBillingEvent:
    """Checkpoints saved."""

    type: Literal["checkpoint"] = "checkpoint"
    count: int


@attrs.frozen(kw_only=True)
class StorageBillingEvent:
    """Checkpoint storage used (``free``: not billed)."""

    type: Literal["storage"] = "storage"
    free: bool = False
    gigabyte_hours: float


BillingEventInfo = (
    TrainingBillingEvent
    | SamplingPrefillBillingEvent
    | SamplingSampleBillingEvent
    | CheckpointBillingEvent
    | StorageBillingEvent
)


@attrs.frozen(kw_only=True)
class BillingUsageEvent:
    """Usage of one kind in one time bucket, with its estimated cost."""

    bucket_start: datetime
    bucket_end: datetime
    base_model: str | None = None
    user_id: str | None = None
    user_name: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    estimated_cost_usd: float | None = None
    effective_rate_usd_per_million_tokens: float | None = None
    effective_rate_usd_per_gigabyte_month: float | None = None
    event_info: BillingEventInfo


@attrs.frozen(kw_only=True)
class BillingUsageSession:
    """Metadata of a session the usage belongs to."""

    user_metadata: dict[str, str] | None = None


@attrs.frozen(kw_only=True)
class BillingUsageResponse:
    """Usage events, the sessions they belong to, and how recent the cost data is."""

    data: list[BillingUsageEvent]
    sessions: dict[str, BillingUsageSession] = attrs.field(factory=dict)
    cost_data_through: datetime | None = None
