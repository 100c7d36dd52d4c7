"""``TelemetryBatch`` (official module ``tinker.types.telemetry_batch``)."""

from __future__ import annotations

import attrs

from .telemetry_event import TelemetryEvent

__all__ = ["TelemetryBatch"]


@attrs.frozen(kw_only=True)
class TelemetryBatch:
    """A batch of telemetry events of one process and session."""

    events: list[TelemetryEvent]
    platform: str
    sdk_version: str
    session_id: str
    process_uuid: str
