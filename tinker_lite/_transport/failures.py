"""Failures of an HTTP attempt: requests', urllib3's and the socket's errors become tinker_lite's
(docs/protocol.rst §2.6)."""

from __future__ import annotations

import http.client
import socket
import ssl
import urllib.parse
from collections.abc import Iterator
from typing import Literal

import requests.exceptions
import urllib3.exceptions

from tinker_lite._errors import APIConnectionError, APITimeoutError
from tinker_lite._secrets import redact

__all__ = [
    "TRANSPORT_ERRORS",
    "classify_failure",
    "connection_failure",
    "host_port",
    "is_certificate_error",
    "is_connect_timeout",
    "low_level_cause",
    "nested_errors",
]


def nested_errors(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every error nested in it: causes, contexts, arguments (where requests and
    urllib3 keep the underlying failure) and ``MaxRetryError.reason``."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        nested: list[object] = [current.__cause__, current.__context__]
        nested.append(getattr(current, "reason", None))
        nested.extend(getattr(current, "args", ()))
        stack.extend(item for item in nested if isinstance(item, BaseException))


FailureKind = Literal["refused", "unreachable", "tls", "timeout", "other"]


def classify_failure(exc: BaseException) -> FailureKind:
    """What went wrong in a failed HTTP attempt: nothing listens (``refused``), no connection
    for another reason (``unreachable``), ``tls``, a ``timeout``, or a broken connection."""
    errors = list(nested_errors(exc))
    if any(isinstance(e, ConnectionRefusedError) for e in errors):
        return "refused"
    # urllib3's NewConnectionError subclasses ConnectTimeoutError although it is raised for
    # every failed connect that did not time out: it must be tested before the timeouts.
    if any(isinstance(e, urllib3.exceptions.NewConnectionError) for e in errors):
        return "unreachable"
    if any(isinstance(e, (urllib3.exceptions.TimeoutError, TimeoutError)) for e in errors):
        return "timeout"
    if any(isinstance(e, (ssl.SSLError, urllib3.exceptions.SSLError)) for e in errors):
        return "tls"
    return "other"


def is_connect_timeout(exc: BaseException) -> bool:
    """Whether a failed attempt timed out while connecting (nothing was sent)."""
    return any(
        isinstance(e, urllib3.exceptions.ConnectTimeoutError)
        and not isinstance(e, urllib3.exceptions.NewConnectionError)
        for e in nested_errors(exc)
    )


def is_certificate_error(exc: BaseException) -> bool:
    """Whether a failed attempt rejected the server's TLS certificate (a setting to fix, not a
    service that is starting)."""
    return any(isinstance(e, ssl.SSLCertVerificationError) for e in nested_errors(exc))


def host_port(url: str) -> str:
    """``host:port`` of ``url`` (never its user info); the base URL's port was checked."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return f"{host}:{port}"


def _unreachable_message(exc: BaseException, where: str, request: str) -> str:
    """A plain sentence for a connect that failed: the OS's reason, never urllib3's chain."""
    errors = list(nested_errors(exc))
    if any(isinstance(e, socket.gaierror) for e in errors):
        host = where.rsplit(":", 1)[0]
        return (
            f"Cannot resolve the host name {host} ({request}): check the base URL "
            "(--base-url / TINKER_BASE_URL) and the network's DNS."
        )
    reasons = [e.strerror for e in errors if isinstance(e, OSError) and e.strerror]
    reason = reasons[0] if reasons else "no connection could be made"
    return f"Cannot connect to {where} ({request}): {reason}; check the base URL and the network."


def low_level_cause(exc: BaseException) -> BaseException:
    """The failure under requests' wrapping, without its chain and frames: a tinker_lite error's
    cause, so an uncaught one prints a short traceback (docs/protocol.rst §6.8)."""
    current = exc
    while isinstance(
        current, (requests.exceptions.RequestException, urllib3.exceptions.MaxRetryError)
    ):
        inner = getattr(current, "reason", None)
        if not isinstance(inner, BaseException):
            inner = next((a for a in current.args if isinstance(a, BaseException)), None)
        if inner is None:
            inner = current.__cause__ or current.__context__
        if inner is None:
            break
        current = inner
    current.__cause__ = None
    current.__suppress_context__ = True
    return current.with_traceback(None)


# What a send may raise that is a failure of the connection (requests' RequestException is an
# OSError, as are socket errors; a body cut short surfaces as urllib3's or http.client's).
TRANSPORT_ERRORS = (OSError, urllib3.exceptions.HTTPError, http.client.HTTPException)


def connection_failure(
    exc: BaseException, *, what: str, base_url: str, timeouts: tuple[float, float], elapsed: float
) -> APIConnectionError:
    """The tinker_lite error for a failed attempt ``what``: APITimeoutError for a timeout, else
    APIConnectionError saying what happened in a plain sentence."""
    kind = classify_failure(exc)
    detail = redact(f"{type(exc).__name__}: {exc}")
    if kind == "timeout":
        return APITimeoutError(
            f"Request timed out after {elapsed:.1f}s: {what} "
            f"(connect timeout {timeouts[0]}s, read timeout {timeouts[1]}s). {detail}",
            elapsed=elapsed,
        )
    where = host_port(base_url)
    if kind == "refused":
        return APIConnectionError(
            f"Connection refused by {where} ({what}): nothing is listening "
            "there; check the base URL and that the service is running."
        )
    if kind == "unreachable":
        return APIConnectionError(_unreachable_message(exc, where, what))
    return APIConnectionError(f"Connection error on {what}: {detail}")
