"""``SessionStartEvent`` (official module ``tinker.types.session_start_event``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import attrs

from ._common import _check_event_common
from .severity import Severity


@attrs.frozen(kw_only=True)
class SessionStartEvent:
    """Telemetry: the session started."""

    event: Literal["SESSION_START"] = attrs.field(default="SESSION_START", init=False)
    event_id: str
    event_session_index: int
    severity: Severity = "INFO"
    timestamp: datetime

    def __attrs_post_init__(self) -> None:
        _check_event_common(self)
