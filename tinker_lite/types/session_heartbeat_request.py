"""``SessionHeartbeatRequest`` (official module ``tinker.types.session_heartbeat_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_str


@attrs.frozen(kw_only=True)
class SessionHeartbeatRequest:
    """POST /api/v1/session_heartbeat."""

    session_id: str
    type: Literal["session_heartbeat"] = attrs.field(default="session_heartbeat", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("session_id", self.session_id)
