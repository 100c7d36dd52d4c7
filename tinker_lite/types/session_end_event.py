"""``SessionEndEvent`` (official module ``tinker.types.session_end_event``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import attrs

from ._common import _check_event_common, _check_str
from .severity import Severity


@attrs.frozen(kw_only=True)
class SessionEndEvent:
    """Telemetry: the session ended; ``duration`` is ``str(timedelta)``."""

    duration: str
    event: Literal["SESSION_END"] = attrs.field(default="SESSION_END", init=False)
    event_id: str
    event_session_index: int
    severity: Severity = "INFO"
    timestamp: datetime

    def __attrs_post_init__(self) -> None:
        _check_str("duration", self.duration)
        _check_event_common(self)
