"""One HTTP answer: :class:`HttpResponse`, its error (docs/protocol.rst §2.6), and reading its
body within the answer cap (docs/configuration.rst, "Limits")."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import requests
import urllib3.response
from requests.structures import CaseInsensitiveDict

from tinker_lite._errors import (
    ResponseTooLargeError,
    WireFormatError,
    format_status_error,
    status_error_class,
)
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import redact

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "JSON",
    "PROTOBUF",
    "HttpResponse",
    "is_urllib3",
    "raise_for_status",
    "read_capped",
    "read_redirect_body",
]

JSON = "application/json"
PROTOBUF = "application/x-protobuf"

# Longest excerpt of a response body copied into an exception message.
_MAX_BODY_IN_MESSAGE = 2000

DEFAULT_MAX_ANSWER_BYTES = 256 * 1024 * 1024
"""The largest answer read, after decompression (``TINKER_LITE_MAX_ANSWER_BYTES``): ten times
the JSON result of the largest forward_backward chunk (500,000 numbers, docs/protocol.rst §7.4)."""
# A redirect's own body is never used: only this much of it is read.
_MAX_REDIRECT_BODY = 64 * 1024
# Bytes asked of urllib3 per read of an answer of unknown or compressed size.
_READ_CHUNK = 1024 * 1024


class HttpResponse:
    """One HTTP answer: status, case-insensitive headers and the whole body."""

    __slots__ = ("_json", "_json_error", "_json_loads", "body", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        json_loads: Callable[[bytes], Any] | None = None,
    ) -> None:
        self.status = status
        self.headers: Mapping[str, str] = (
            headers if isinstance(headers, CaseInsensitiveDict) else CaseInsensitiveDict(headers)
        )
        self.body = body
        self._json: Any = _UNSET
        self._json_error: Exception | None = None
        self._json_loads = json_loads if json_loads is not None else _stdlib_json_loads

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower case (``""`` when absent)."""
        value = self.headers.get("content-type") or ""
        return value.split(";", 1)[0].strip().lower()

    @property
    def is_protobuf(self) -> bool:
        """Whether the body is a protobuf message (docs/protocol.rst §3.5)."""
        return self.content_type == PROTOBUF

    def json(self) -> Any:
        """The body parsed as JSON (parsed once, then cached); WireFormatError if it is not JSON."""
        if self._json is _UNSET:
            if self._json_error is not None:
                raise self._json_error
            try:
                self._json = self._json_loads(self.body)
            except Exception as e:
                self._json_error = e
                raise
        return self._json

    def text(self, limit: int | None = None) -> str:
        """The body decoded as UTF-8 (invalid bytes replaced), optionally cut to ``limit``."""
        data = self.body if limit is None else self.body[:limit]
        return data.decode("utf-8", errors="replace")

    @tolerant_repr
    def __repr__(self) -> str:
        return (
            f"HttpResponse(status={self.status}, content_type={self.content_type!r}, "
            f"length={len(self.body)})"
        )


_UNSET: Any = object()


def _stdlib_json_loads(body: bytes) -> Any:
    """Parse JSON with the standard library (a transport may be given a faster parser)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:
        raise WireFormatError(f"body is not valid JSON ({e}): {body[:80]!r}") from e


def raise_for_status(
    resp: HttpResponse, *, request_id: str | None = None, what: str | None = None
) -> None:
    """Raise the :class:`~tinker_lite.APIStatusError` subclass of a non-2xx answer, naming the
    request ``what`` and its request id (docs/protocol.rst §2.6)."""
    if 200 <= resp.status < 300:
        return
    body: object
    try:
        body = resp.json()
    except Exception:
        body = redact(resp.text(_MAX_BODY_IN_MESSAGE))
    rid = request_id or resp.headers.get("x-request-id")
    message = format_status_error(resp.status, body, request=what, request_id=rid)
    cls = status_error_class(resp.status)
    error = cls(
        message,
        status_code=resp.status,
        body=body,
        request_id=rid,
        headers=dict(resp.headers),
    )
    error.request = what
    raise error


# ---------------------------------------------------------------------------------------------
# Reading an answer within its cap


def is_urllib3(raw: object) -> bool:
    return isinstance(raw, urllib3.response.BaseHTTPResponse)


def _declared_length(answer: requests.Response) -> int | None:
    value = answer.headers.get("content-length")
    if value is None:
        return None
    try:
        length = int(value.split(",")[0].strip())
    except ValueError:
        return None
    return length if length >= 0 else None


def _too_large(
    answer: requests.Response, limit: int, what: str, size: str
) -> ResponseTooLargeError:
    return ResponseTooLargeError(
        f"The answer to {what} is larger than the client reads ({size}; the cap is {limit} "
        "bytes): it was not read. Raise TINKER_LITE_MAX_ANSWER_BYTES if this answer is "
        "legitimate.",
        status_code=answer.status_code,
        limit=limit,
    )


def read_capped(answer: requests.Response, limit: int, what: str) -> bytes:
    """The whole decoded body of a streamed answer, refused by its ``Content-Length`` or cut off
    at ``limit`` bytes read (an endless or inflating one) with ResponseTooLargeError."""
    length = _declared_length(answer)
    if length is not None and length > limit:
        raise _too_large(answer, limit, what, f"Content-Length: {length}")
    raw = answer.raw
    if not is_urllib3(raw):
        chunks = answer.iter_content(_READ_CHUNK)
    else:
        encoded = answer.headers.get("content-encoding", "identity").strip().lower()
        if length is not None and encoded in ("", "identity"):
            data: bytes = raw.read(decode_content=True)
            return data
        chunks = iter(lambda: raw.read(_READ_CHUNK, decode_content=True), b"")
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise _too_large(answer, limit, what, f"over {limit} bytes read")
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_redirect_body(limit: int, r: requests.Response, **kwargs: Any) -> requests.Response:
    """A response hook (``limit``, the answer cap, bound first): a redirect's body, which requests
    reads before following it, is read here under a small cap, so an endless one ends at once."""
    if r.is_redirect and not r._content_consumed:  # type: ignore[attr-defined]
        try:
            content = read_capped(r, min(limit, _MAX_REDIRECT_BODY), f"{r.request.method} {r.url}")
        except ResponseTooLargeError:
            r.close()
            raise
        # What requests' own ``content`` property stores once it has read a body.
        r._content = content
        r._content_consumed = True  # type: ignore[attr-defined]
    return r
