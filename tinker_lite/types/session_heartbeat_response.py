"""``SessionHeartbeatResponse`` (official module ``tinker.types.session_heartbeat_response``)."""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen(kw_only=True)
class SessionHeartbeatResponse:
    """Heartbeat acknowledgement."""

    type: Literal["session_heartbeat"] = "session_heartbeat"
