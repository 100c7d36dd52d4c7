"""The local server's domain errors: bad user input, and requests it refuses.

The state and the model raise these; only the HTTP layer (``http/app.py``) turns a refusal into a
status code and a ``{"detail": ...}`` body, and the worker threads turn a :class:`UserInputError`
into a failed future of category "user". Checkpoint errors name no status: the store raises them
and :func:`checkpoint_refusal` says how they are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tinker_lite.local.model.errors import UserInputError

__all__ = [
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointNotFound",
    "Conflict",
    "InvalidField",
    "InvalidRequest",
    "NotFound",
    "RequestRefused",
    "SessionFinished",
    "Unavailable",
    "UserInputError",
    "checkpoint_refusal",
    "field_error",
    "refusal",
]


class RequestRefused(Exception):
    """A request the server refuses before queueing it; ``status`` is how HTTP answers it."""

    status: ClassVar[int] = 400

    def __init__(self, detail: Any, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{self.status}: {detail}")
        self.detail = detail
        self.headers = dict(headers or {})


class InvalidRequest(RequestRefused):
    """The request is invalid (a bad path, LoRA config, model name, option...)."""

    status = 400


class NotFound(RequestRefused):
    """What the request names does not exist (session, model, sampler, checkpoint)."""

    status = 404


class Conflict(RequestRefused):
    """The request conflicts with the current state (a model or checkpoint that exists)."""

    status = 409


class SessionFinished(RequestRefused):
    """The session was finished; its heartbeat must stop."""

    status = 410


class InvalidField(RequestRefused):
    """A field of the body has the wrong shape; ``detail`` is a pydantic-style error list."""

    status = 422


class Unavailable(RequestRefused):
    """The server is shutting down."""

    status = 503


_BY_STATUS: dict[int, type[RequestRefused]] = {
    cls.status: cls
    for cls in (InvalidRequest, NotFound, Conflict, SessionFinished, InvalidField, Unavailable)
}


def refusal(status: int, detail: Any) -> RequestRefused:
    """The refusal answered with ``status`` (an earlier answer repeated, a checkpoint error)."""
    cls = _BY_STATUS.get(status)
    if cls is not None:
        return cls(detail)
    error = RequestRefused(detail)
    error.status = status  # type: ignore[misc]
    return error


def field_error(loc: Sequence[str | int], msg: str, kind: str) -> RequestRefused:
    """A 422 whose pydantic-style body names the offending field by its ``loc``."""
    return InvalidField([{"loc": list(loc), "msg": msg, "type": kind}])


class CheckpointError(Exception):
    """A checkpoint operation failed (a bad name, path or file): refused as invalid."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class CheckpointNotFound(CheckpointError):
    """No such checkpoint (or it expired or was deleted)."""


class CheckpointConflict(CheckpointError):
    """The checkpoint already exists, or is already public / private."""


def checkpoint_refusal(error: CheckpointError) -> RequestRefused:
    """The refusal a failed checkpoint operation is answered with (404, 409, else 400)."""
    if isinstance(error, CheckpointNotFound):
        return NotFound(error.detail)
    if isinstance(error, CheckpointConflict):
        return Conflict(error.detail)
    return InvalidRequest(error.detail)
