"""``UnhandledExceptionEvent`` (official module ``tinker.types.unhandled_exception_event``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import attrs

from ._common import _check_event_common, _check_str
from .severity import Severity


@attrs.frozen(kw_only=True)
class UnhandledExceptionEvent:
    """Telemetry: an exception escaped a public call."""

    error_message: str
    error_type: str
    event: Literal["UNHANDLED_EXCEPTION"] = attrs.field(default="UNHANDLED_EXCEPTION", init=False)
    event_id: str
    event_session_index: int
    severity: Severity = "ERROR"
    timestamp: datetime
    traceback: str | None = None

    def __attrs_post_init__(self) -> None:
        _check_str("error_message", self.error_message, allow_empty=True)
        _check_str("error_type", self.error_type)
        _check_event_common(self)
