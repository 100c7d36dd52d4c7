"""Session states a search can filter on (official module ``tinker.types.session_status_query``)."""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = [
    "ActiveSessionStatusQuery",
    "CancelledSessionStatusQuery",
    "ClientFinishedSessionStatusQuery",
    "ClientSessionFinishReasonType",
    "FailedSessionStatusQuery",
    "SessionStatusQuery",
]

ClientSessionFinishReasonType = Literal["success", "errored", "interrupted"]


@attrs.frozen(kw_only=True)
class ActiveSessionStatusQuery:
    """Sessions still running."""

    type: Literal["active"] = "active"


@attrs.frozen(kw_only=True)
class CancelledSessionStatusQuery:
    """Sessions the service cancelled."""

    type: Literal["cancelled"] = "cancelled"


@attrs.frozen(kw_only=True)
class FailedSessionStatusQuery:
    """Sessions that failed."""

    type: Literal["failed"] = "failed"


@attrs.frozen(kw_only=True)
class ClientFinishedSessionStatusQuery:
    """Sessions the client ended, optionally only for some ``reasons``."""

    type: Literal["client_finished"] = "client_finished"
    reasons: list[ClientSessionFinishReasonType] | None = None


SessionStatusQuery = (
    ActiveSessionStatusQuery
    | CancelledSessionStatusQuery
    | FailedSessionStatusQuery
    | ClientFinishedSessionStatusQuery
)
