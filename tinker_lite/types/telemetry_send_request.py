"""``TelemetrySendRequest`` (official module ``tinker.types.telemetry_send_request``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_str, _set
from .telemetry_event import _EVENT_TYPES, TelemetryEvent


@attrs.frozen(kw_only=True)
class TelemetrySendRequest:
    """POST /api/v1/telemetry: a batch of events (``process_uuid`` is always sent,
    docs/protocol.rst §3.1)."""

    events: list[TelemetryEvent]
    platform: str
    sdk_version: str
    session_id: str
    process_uuid: str

    def __attrs_post_init__(self) -> None:
        raw: Any = self.events
        if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
            raise InvalidInputError(
                "events", f"must be a list of telemetry events, got {type(raw).__name__}"
            )
        events = list(raw)
        for index, event in enumerate(events):
            if not isinstance(event, _EVENT_TYPES):
                raise InvalidInputError(f"events[{index}]", "must be a telemetry event")
        _set(self, "events", events)
        _check_str("platform", self.platform)
        _check_str("sdk_version", self.sdk_version)
        _check_str("session_id", self.session_id)
        _check_str("process_uuid", self.process_uuid)
