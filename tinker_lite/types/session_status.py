"""The status of a session (official module ``tinker.types.session_status``)."""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = [
    "ClientSessionFinishErrored",
    "ClientSessionFinishInterrupted",
    "ClientSessionFinishReason",
    "ClientSessionFinishSuccess",
    "ClientSessionFinished",
    "SessionActive",
    "SessionCancelled",
    "SessionFailed",
    "SessionFailedReason",
    "SessionFailedRequestReason",
    "SessionFailedSamplingSessionReason",
    "SessionFailedTrainingRunReason",
    "SessionStatus",
]


@attrs.frozen(kw_only=True)
class ClientSessionFinishSuccess:
    """The client ended the session after success."""

    type: Literal["success"] = "success"


@attrs.frozen(kw_only=True)
class ClientSessionFinishErrored:
    """The client ended the session after an error."""

    type: Literal["errored"] = "errored"


@attrs.frozen(kw_only=True)
class ClientSessionFinishInterrupted:
    """The client ended the session when interrupted."""

    type: Literal["interrupted"] = "interrupted"


ClientSessionFinishReason = (
    ClientSessionFinishSuccess | ClientSessionFinishErrored | ClientSessionFinishInterrupted
)


@attrs.frozen(kw_only=True)
class ClientSessionFinished:
    """The client ended the session, for ``reason``."""

    type: Literal["client_finished"] = "client_finished"
    reason: ClientSessionFinishReason
    detail: str | None = None


@attrs.frozen(kw_only=True)
class SessionActive:
    """The session is running."""

    type: Literal["active"] = "active"


@attrs.frozen(kw_only=True)
class SessionCancelled:
    """The service cancelled the session."""

    type: Literal["cancelled"] = "cancelled"
    detail: str | None = None


@attrs.frozen(kw_only=True)
class SessionFailedRequestReason:
    """A request of the session failed."""

    type: Literal["request"] = "request"
    request_id: str
    request_type: str


@attrs.frozen(kw_only=True)
class SessionFailedTrainingRunReason:
    """A training run of the session failed."""

    type: Literal["training_run"] = "training_run"
    training_run_id: str


@attrs.frozen(kw_only=True)
class SessionFailedSamplingSessionReason:
    """A sampling session of the session failed."""

    type: Literal["sampling_session"] = "sampling_session"
    sampling_session_id: str


SessionFailedReason = (
    SessionFailedRequestReason | SessionFailedTrainingRunReason | SessionFailedSamplingSessionReason
)


@attrs.frozen(kw_only=True)
class SessionFailed:
    """The session failed: whose fault (``category``), what failed and the message."""

    type: Literal["failed"] = "failed"
    category: Literal["user", "internal"]
    reason: SessionFailedReason
    message: str


SessionStatus = SessionFailed | SessionCancelled | ClientSessionFinished | SessionActive
