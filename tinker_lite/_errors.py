"""The exception hierarchy of tinker_lite, with the official SDK's public names.

Every error a public call can raise is a :class:`TinkerError`. Foreign exceptions (requests,
urllib3, json, cattrs, tenacity) are translated at the layer that meets them, with the original
kept as ``__cause__``. Every class here pickles (so errors cross process pools) and carries the
context needed to act on it: HTTP status, request id, response body, failure category.

This module imports only the standard library, so every other layer may import it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "InvalidInputError",
    "NotFoundError",
    "PermissionDeniedError",
    "PromiseExpiredError",
    "RateLimitError",
    "RequestErrorCategory",
    "RequestFailedError",
    "TinkerError",
    "UnprocessableEntityError",
    "WireFormatError",
    "status_error_class",
]


class RequestErrorCategory(str, enum.Enum):
    """Who is at fault for a failed asynchronous request (wire values are lower case)."""

    UNKNOWN = "unknown"
    SERVER = "server"
    USER = "user"

    @classmethod
    def parse(cls, value: object) -> RequestErrorCategory:
        """Read a wire category leniently: any case; anything unknown becomes UNKNOWN."""
        if isinstance(value, str):
            try:
                return cls(value.strip().lower())
            except ValueError:
                pass
        return cls.UNKNOWN

    def __str__(self) -> str:
        return self.value


class TinkerError(Exception):
    """Base class of every error raised by tinker_lite."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions with keyword-only constructors do not pickle by default: rebuild from state.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class InvalidInputError(TinkerError, ValueError):
    """An argument is invalid; raised before anything is sent.

    ``field`` names the offending field (with a datum index where it applies) and ``hint`` says
    how to fix it. It subclasses :class:`ValueError` so code written for the official SDK, which
    raises ``ValueError`` for bad input, keeps working.
    """

    def __init__(self, field: str, problem: str, hint: str = "") -> None:
        self.field = field
        self.problem = problem
        self.hint = hint
        message = f"{field}: {problem}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


class WireFormatError(TinkerError, ValueError):
    """A body could not be encoded or decoded as the wire format requires."""


class APIError(TinkerError):
    """An error talking to the service: ``message``, plus ``body`` and ``request_id`` when known."""

    def __init__(
        self,
        message: str,
        *,
        body: object | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.body = body
        self.request_id = request_id

    def __str__(self) -> str:
        return self.message


class APIConnectionError(APIError):
    """The request could not be sent or its answer not received (DNS, refused, reset, ...)."""

    def __init__(
        self,
        message: str = "Connection error.",
        *,
        body: object | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, body=body, request_id=request_id)


class APITimeoutError(APIConnectionError):
    """A deadline passed: an HTTP read timeout, a stalled future, or the caller's own timeout.

    ``elapsed`` is the seconds waited and ``queue_state`` the last queue state the server
    reported (``None`` when it never said), so a log line tells why the wait ended.
    """

    def __init__(
        self,
        message: str = "Request timed out.",
        *,
        body: object | None = None,
        request_id: str | None = None,
        queue_state: str | None = None,
        elapsed: float | None = None,
    ) -> None:
        super().__init__(message, body=body, request_id=request_id)
        self.queue_state = queue_state
        self.elapsed = elapsed


class APIResponseValidationError(APIError):
    """The service answered with a body that does not match the expected schema."""

    def __init__(
        self,
        message: str,
        *,
        body: object | None = None,
        request_id: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, body=body, request_id=request_id)
        self.status_code = status_code


class APIStatusError(APIError):
    """The service answered with an error status (the final one, after retries)."""

    status_code: int

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: object | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, body=body, request_id=request_id)
        self.status_code = status_code
        # Only response headers are kept; they never hold the caller's credentials.
        self.headers: dict[str, str] = dict(headers or {})


class BadRequestError(APIStatusError):
    """HTTP 400: the service rejected the request's content."""


class AuthenticationError(APIStatusError):
    """HTTP 401: the API key (or JWT) is missing, wrong or expired."""


class PermissionDeniedError(APIStatusError):
    """HTTP 403: the credentials do not grant access to this resource."""


class NotFoundError(APIStatusError):
    """HTTP 404: no such model, session, run or checkpoint (or not yours)."""


class ConflictError(APIStatusError):
    """HTTP 409: the resource is in a conflicting state (e.g. a checkpoint name exists)."""


class UnprocessableEntityError(APIStatusError):
    """HTTP 422: the body was well-formed JSON but failed the service's schema."""


class RateLimitError(APIStatusError):
    """HTTP 429: too many requests; retried with back-off before this surfaces."""


class InternalServerError(APIStatusError):
    """HTTP 5xx: a fault on the service side; retried before this surfaces."""


class PromiseExpiredError(APIStatusError):
    """HTTP 410 while polling: the service no longer holds this request's result.

    Sampling re-submits on its own. A training request is not re-sent automatically (its
    ``seq_id`` may already have been applied); the error names the request so the caller can
    decide. ``retryable`` is always true.
    """

    retryable = True


_STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: PromiseExpiredError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def status_error_class(status_code: int) -> type[APIStatusError]:
    """Return the exception class for a final HTTP status (WIRE.md §1.8)."""
    if status_code >= 500:
        return InternalServerError
    return _STATUS_CLASSES.get(status_code, APIStatusError)


class RequestFailedError(TinkerError):
    """An asynchronous request completed with an error reported by the service.

    ``category`` says whose fault it is (``user``: fix the input; ``server``: retry later).
    """

    def __init__(
        self,
        message: str,
        *,
        request_id: str,
        category: RequestErrorCategory = RequestErrorCategory.UNKNOWN,
        details: object | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.category = category
        self.details = details

    def __str__(self) -> str:
        return self.message
