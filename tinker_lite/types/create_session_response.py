"""``CreateSessionResponse`` (official module ``tinker.types.create_session_response``)."""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen(kw_only=True)
class CreateSessionResponse:
    """The new session's id and optional messages to log."""

    session_id: str
    info_message: str | None = None
    warning_message: str | None = None
    error_message: str | None = None
    type: Literal["create_session"] = "create_session"
