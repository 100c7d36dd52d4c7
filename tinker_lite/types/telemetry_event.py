"""``TelemetryEvent`` (official module ``tinker.types.telemetry_event``)."""

from __future__ import annotations

from .generic_event import GenericEvent
from .session_end_event import SessionEndEvent
from .session_start_event import SessionStartEvent
from .unhandled_exception_event import UnhandledExceptionEvent

TelemetryEvent = SessionStartEvent | SessionEndEvent | UnhandledExceptionEvent | GenericEvent


_EVENT_TYPES = (SessionStartEvent, SessionEndEvent, UnhandledExceptionEvent, GenericEvent)
