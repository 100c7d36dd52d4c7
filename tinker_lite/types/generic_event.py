"""``GenericEvent`` (official module ``tinker.types.generic_event``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import attrs

from ._common import _check_event_common, _check_mapping, _check_str, _set
from .severity import Severity


@attrs.frozen(kw_only=True)
class GenericEvent:
    """Telemetry: a named event with free-form data."""

    event: Literal["GENERIC_EVENT"] = attrs.field(default="GENERIC_EVENT", init=False)
    event_id: str
    event_name: str
    event_session_index: int
    severity: Severity = "INFO"
    timestamp: datetime
    event_data: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        _check_str("event_name", self.event_name)
        _set(self, "event_data", _check_mapping("event_data", self.event_data))
        _check_event_common(self)
