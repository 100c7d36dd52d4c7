"""The exception hierarchy, with the official SDK's public names; every class pickles.

Foreign exceptions are translated where they are met, the original kept as ``__cause__``. The
errors are also built the way 0.38 builds them, from an ``httpx.Response`` or ``httpx.Request``
(or requests' own), read by their attributes: httpx is never imported.
"""

from __future__ import annotations

import concurrent.futures
import enum
from collections.abc import Mapping
from typing import Any

from tinker_lite._secrets import redact, redact_headers, redact_value

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "BillingError",
    "ClientClosedError",
    "ConflictError",
    "DownloadError",
    "ExperimentalWarning",
    "FutureTimeoutError",
    "InternalServerError",
    "InvalidInputError",
    "NotFoundError",
    "PermissionDeniedError",
    "PromiseExpiredError",
    "RateLimitError",
    "RequestErrorCategory",
    "RequestFailedError",
    "ResponseTooLargeError",
    "TinkerError",
    "TokenizerUnavailableError",
    "UnprocessableEntityError",
    "UnsafeArchiveError",
    "WireFormatError",
    "status_error_class",
]


class RequestErrorCategory(str, enum.Enum):
    """Who is at fault for a failed request: the official names, with upper-case aliases."""

    Unknown = "unknown"
    Server = "server"
    User = "user"
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
    """Base class of every error raised by tinker_lite; text arguments are redacted."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only constructors do not pickle by default: rebuild from args and state.
        return (type(self).__new__, (type(self),), self._pickled_state())

    def _pickled_state(self) -> dict[str, Any]:
        return {**self.__dict__, "args": self.args}

    def __str__(self) -> str:
        # A ``message`` (redacted) when the class keeps one, and built; else Exception's str.
        return getattr(self, "message", None) or super().__str__()


class WireFormatError(TinkerError, ValueError):
    """A body could not be encoded or decoded as the wire format requires."""


class _Answer:
    """What an error reads of a foreign response: any object with ``status_code`` and
    ``headers`` (an ``httpx.Response``, a ``requests.Response``)."""

    def __init__(self, status_code: int, headers: dict[str, str], request: object | None) -> None:
        self.status_code = status_code
        self.headers = headers
        self.request = request
        self.request_id = next(
            (value for name, value in headers.items() if name.lower() == "x-request-id"), None
        )

    @classmethod
    def read(cls, response: Any) -> _Answer:
        headers: Mapping[str, str] = getattr(response, "headers", None) or {}
        try:
            request = getattr(response, "request", None)
        except RuntimeError:  # httpx: a response built without its request
            request = None
        return cls(
            int(response.status_code),
            {str(name): str(value) for name, value in headers.items()},
            request,
        )


class APIError(TinkerError):
    """An error talking to the service: ``message``, plus ``body`` and ``request_id`` when known.

    ``request`` is the request as given to the constructor (0.38's ``APIError(message,
    request, body=...)`` passes an ``httpx.Request``) or, on an error tinker_lite raises,
    ``"METHOD /path"`` when known; else None. ``response`` is the response an error was built
    from (see :class:`APIStatusError`), None on the errors tinker_lite raises. A pickled copy
    keeps neither object (they hold the headers unredacted, the API key among them, and may not
    pickle): its ``response`` is None, its ``request`` the ``"METHOD /path"`` text or None; the
    status, redacted headers, request id, body and message are kept.
    """

    request: object | None = None
    response: object | None = None

    def __init__(
        self,
        message: str,
        request: object | None = None,
        *,
        body: object | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = redact(message)
        self.request = request
        self.body = redact_value(body)
        self.request_id = request_id

    def _pickled_state(self) -> dict[str, Any]:
        state = super()._pickled_state()
        # The objects an error was built from stay behind (the class's None stands in).
        state.pop("response", None)
        if not isinstance(self.request, str):
            state["request"] = None
        return state


class APIConnectionError(APIError):
    """The request could not be sent or its answer not received (DNS, refused, reset, ...).

    Takes :class:`APIError`'s keywords, ``request=`` among them (0.38's
    ``APIConnectionError(request=httpx_request)``).
    """

    def __init__(self, message: str = "Connection error.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class APITimeoutError(APIConnectionError):
    """A deadline passed; ``elapsed`` seconds waited, ``queue_state`` last reported (if any)."""

    def __init__(
        self,
        message: str = "Request timed out.",
        *,
        queue_state: str | None = None,
        elapsed: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.queue_state = queue_state
        self.elapsed = elapsed


class APIResponseValidationError(APIError):
    """The service answered with a body that does not match the expected schema.

    Built from a ``response`` (0.38's ``APIResponseValidationError(response=..., body=...)``),
    it takes the status, request id and request of it, as :class:`APIStatusError` does.
    """

    def __init__(
        self,
        message: str = "The service's answer does not match the expected schema.",
        *,
        response: object | None = None,
        status_code: int | None = None,
        **kwargs: Any,
    ) -> None:
        if response is not None:
            answer = _Answer.read(response)
            status_code = answer.status_code if status_code is None else status_code
            if kwargs.get("request_id") is None:
                kwargs["request_id"] = answer.request_id
            kwargs.setdefault("request", answer.request)
        super().__init__(message, **kwargs)
        self.response = response
        self.status_code = status_code


class ResponseTooLargeError(APIResponseValidationError):
    """An answer exceeded ``TINKER_LITE_MAX_ANSWER_BYTES`` (decompressed); not retried."""

    def __init__(self, message: str, *, limit: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.limit = limit


class APIStatusError(APIError):
    """The service answered with an error status (the final one, after retries).

    tinker_lite raises it with keywords (``status_code``, ``body``, ``request_id``,
    ``headers``). Code written for 0.38 builds it as ``APIStatusError(message, response,
    body)``: the status, headers, request id (``x-request-id``) and request are then read from
    ``response`` (an ``httpx.Response`` or ``requests.Response``), kept as ``response``;
    keywords given win over what the response says. A subclass given neither a status nor a
    response has its own (``BadRequestError`` 400, ...). ``headers`` are redacted: the values of
    credential and cookie headers read ``***``.
    """

    status_code: int

    def __init__(
        self,
        message: str,
        response: object | None = None,
        body: object | None = None,
        *,
        status_code: int | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        request = None
        if response is not None:
            answer = _Answer.read(response)
            status_code = answer.status_code if status_code is None else status_code
            headers = answer.headers if headers is None else headers
            request_id = answer.request_id if request_id is None else request_id
            request = answer.request
        if status_code is None:
            status_code = getattr(type(self), "status_code", None)
            if status_code is None:
                raise TypeError(f"{type(self).__name__}() needs a status_code or a response")
        super().__init__(message, request, body=body, request_id=request_id)
        self.response = response
        self.status_code = status_code
        self.headers: dict[str, str] = redact_headers(headers or {})


class BadRequestError(APIStatusError):
    """HTTP 400: the service rejected the request's content."""

    status_code = 400


class AuthenticationError(APIStatusError):
    """HTTP 401: the API key (or JWT) is missing, wrong or expired."""

    status_code = 401


class BillingError(APIStatusError):
    """HTTP 402: the account has a billing problem (e.g. billing is not set up)."""

    status_code = 402


class ExperimentalWarning(FutureWarning):
    """Emitted by an API that may change or be removed in any release (as in the official SDK)."""


class PermissionDeniedError(APIStatusError):
    """HTTP 403: the credentials do not grant access to this resource."""

    status_code = 403


class NotFoundError(APIStatusError):
    """HTTP 404: no such model, session, run or checkpoint (or not yours)."""

    status_code = 404


class ConflictError(APIStatusError):
    """HTTP 409: the resource is in a conflicting state (e.g. a checkpoint name exists)."""

    status_code = 409


class UnprocessableEntityError(APIStatusError):
    """HTTP 422: the body was well-formed JSON but failed the service's schema."""

    status_code = 422


class RateLimitError(APIStatusError):
    """HTTP 429: too many requests; retried with back-off before this surfaces."""

    status_code = 429


class InternalServerError(APIStatusError):
    """HTTP 5xx: a fault on the service side; retried before this surfaces."""

    status_code = 500


class PromiseExpiredError(APIStatusError):
    """HTTP 410 while polling: the result is gone (docs/protocol.rst §5.3)."""

    status_code = 410

    retryable = True


class InvalidInputError(BadRequestError, ValueError):
    """An argument is invalid (``field``, ``problem``, ``hint``); raised before anything is sent.

    A 400 :class:`BadRequestError` (what the service would answer) and a :class:`ValueError`
    (what the official SDK raises for input it checks itself).
    """

    def __init__(self, field: str, problem: str, hint: str = "") -> None:
        self.field = field
        self.problem = redact(problem)
        self.hint = redact(hint)
        message = f"{field}: {problem}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


_STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    cls.status_code: cls
    for cls in (
        BadRequestError,
        AuthenticationError,
        BillingError,
        PermissionDeniedError,
        NotFoundError,
        ConflictError,
        PromiseExpiredError,
        UnprocessableEntityError,
        RateLimitError,
    )
}


def status_error_class(status_code: int) -> type[APIStatusError]:
    """Return the exception class for a final HTTP status (docs/protocol.rst §2.6)."""
    if status_code >= 500:
        return InternalServerError
    return _STATUS_CLASSES.get(status_code, APIStatusError)


class RequestFailedError(TinkerError):
    """An asynchronous request failed on the service; ``category`` says whose fault it is."""

    def __init__(
        self,
        message: str,
        *,
        request_id: str,
        category: RequestErrorCategory = RequestErrorCategory.UNKNOWN,
        details: object | None = None,
    ) -> None:
        super().__init__(message)
        self.message = redact(message)
        self.request_id = request_id
        self.category = category
        self.details = redact_value(details)


class ClientClosedError(APIConnectionError):
    """The client was closed; nothing more can be sent with it (never retried)."""

    def __init__(self, message: str = "The client is closed.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class FutureTimeoutError(APITimeoutError, concurrent.futures.TimeoutError):
    """``result(timeout=...)`` expired (the request continues); also the standard TimeoutError."""


class TokenizerUnavailableError(TinkerError, LookupError):
    """The tokenizer could not be found locally nor fetched; the message says how to provide it."""

    def __init__(self, tokenizer_id: str, reason: str) -> None:
        self.tokenizer_id = tokenizer_id
        self.reason = reason
        super().__init__(f"tokenizer {tokenizer_id!r} is unavailable: {reason}")


class DownloadError(TinkerError):
    """A download could not be completed or verified (size mismatch, bad archive)."""


class UnsafeArchiveError(DownloadError):
    """An archive member would be written outside the extraction directory."""


# How errors read: one sentence for every error, built from its parts.

_MESSAGE_KEYS = ("detail", "message", "error", "msg", "reason")
# Twice the longest message the service writes; a longer body (an HTML page) is cut.
_MAX_SERVICE_MESSAGE = 4000
_SEPARATORS = (". ", "; ", ", ", " ")

_SERVER_FAULT = "A fault on the service side; try again later."
_STATUS_HINTS: dict[int, str] = {
    400: "Check the arguments of the call.",
    401: "Check the API key (TINKER_API_KEY).",
    403: "Check that the API key grants access to this resource.",
    404: "Check the id or tinker:// path.",
    409: "Check the resource's current state; the call conflicts with it.",
    410: "Retry the call if sending it again is safe.",
    422: "Check the arguments of the call.",
    429: "The service is rate limiting; try again later.",
}


def service_message(body: object) -> str | None:
    """The service's own words in an error body (its message keys, FastAPI's problems), or None."""
    text = _message_of(body, depth=0)
    if not text:
        return None
    text = " ".join(text.split())
    if len(text) <= _MAX_SERVICE_MESSAGE:
        return text
    # Cut after the last separator before the limit, saying how much is left out.
    head = text[:_MAX_SERVICE_MESSAGE]
    for separator in _SEPARATORS:
        at = head.rfind(separator)
        if at > _MAX_SERVICE_MESSAGE // 2:
            head = head[: at + len(separator.rstrip())]
            break
    return f"{head.rstrip()} ... ({len(text) - len(head)} more characters)"


def _message_of(body: object, depth: int) -> str | None:
    if depth > 3 or body is None:
        return None
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str):
        return body.strip() or None
    if isinstance(body, Mapping):
        for key in _MESSAGE_KEYS:
            found = _message_of(body.get(key), depth + 1)
            if found:
                return found
        return None
    if isinstance(body, list | tuple):
        parts = [_problem_of(item, depth + 1) for item in body]
        return "; ".join(p for p in parts if p) or None
    if isinstance(body, bool | int | float):
        return str(body)
    return None


def _problem_of(item: object, depth: int) -> str | None:
    # FastAPI 422: {"loc": ["body", "limit"], "msg": "...", "type": "..."}
    if isinstance(item, Mapping) and isinstance(item.get("loc"), list | tuple):
        where = ".".join(str(part) for part in item["loc"] if part != "body")
        message = _message_of(item, depth)
        return f"{where}: {message}" if where and message else message
    return _message_of(item, depth)


def status_phrase(status_code: int) -> str:
    """``"404 Not Found"``; just the number for a status without a standard reason phrase."""
    import http

    try:
        return f"{status_code} {http.HTTPStatus(status_code).phrase}"
    except ValueError:
        return str(status_code)


def format_status_error(
    status_code: int,
    body: object = None,
    *,
    request: str | None = None,
    request_id: str | None = None,
) -> str:
    """One sentence for an error answer: the request, the status, the service's message, the id."""
    what = f"{request} failed with" if request else "The service answered"
    text = f"{what} HTTP {status_phrase(status_code)}"
    message = service_message(body)
    if message:
        text += f": {message}"
    if request_id:
        text += f" (request id {request_id})"
    text = text.rstrip(".") + "."
    hint = _status_hint(status_code)
    return redact(f"{text} {hint}" if hint else text)


def describe_error(exc: BaseException) -> str:
    """Say what failed, where, and what to try, in plain words (no dict repr, no API key).

    ``tinker-lite`` prints it after ``error:``; docs/cli.rst, "Error messages", shows examples.
    """
    if isinstance(exc, InvalidInputError):
        return redact(" ".join(str(exc).split()))
    # tinker_lite's own answers read anew with their "METHOD /path"; a built error keeps its words.
    label = getattr(exc, "request", None)
    label = label if isinstance(label, str) else None
    if isinstance(exc, APIStatusError) and (label is not None or not exc.message.strip()):
        return format_status_error(
            exc.status_code, exc.body, request=label, request_id=exc.request_id
        )
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, APIStatusError) and str(exc.status_code) not in text:
        text = f"{text.rstrip('.')} (HTTP {status_phrase(exc.status_code)})."
    request_id = getattr(exc, "request_id", None)
    if isinstance(request_id, str) and request_id and request_id not in text:
        text = f"{text.rstrip('.')} (request id {request_id})."
    hint = _hint(exc)
    if hint:
        text = f"{text.rstrip('.')}. {hint}"
    elif not isinstance(exc, TinkerError | OSError):
        text = f"{type(exc).__name__}: {text}"
    return redact(text)


def _status_hint(status_code: int) -> str | None:
    if status_code >= 500:
        return _SERVER_FAULT
    return _STATUS_HINTS.get(status_code)


def _hint(exc: BaseException) -> str | None:
    if isinstance(exc, APIStatusError):
        return _status_hint(exc.status_code)
    if isinstance(exc, RequestFailedError):
        if exc.category == RequestErrorCategory.USER:
            return "Fix the request's input before sending it again."
        if exc.category == RequestErrorCategory.SERVER:
            return _SERVER_FAULT
    if isinstance(exc, APIResponseValidationError):
        return (
            "Check that the base URL points at a Tinker service and that tinker-lite is up to date."
        )
    return None
