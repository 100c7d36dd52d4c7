"""HTTP transport: a ``requests.Session`` per pool kind, default headers, the error mapping.

A :class:`Transport` sends exactly one HTTP attempt per :meth:`Transport.send` call (retries live
in :mod:`tinker_lite._retry`); it never raises a ``requests``, ``urllib3``, ``http.client`` or
socket exception: those become :class:`~tinker_lite.APIConnectionError` or
:class:`~tinker_lite.APITimeoutError` with the original kept as ``__cause__``. Statuses are not
raised by ``send``; :func:`raise_for_status` is the one mapping from a response to its exception
(WIRE.md §1.8).

Threading: a :class:`Transport` is shared by every thread of one session holder. Each pool kind
has its own ``requests.Session`` whose ``HTTPAdapter`` keeps up to ``pool_sizes[kind]`` connections
(``max_retries=0``), so a burst of sampling requests can never starve heartbeats or training
submits (WIRE.md §P.9). :meth:`Transport.close` aborts requests still in flight (their sockets are
shut down, so blocked threads return at once with :class:`ClientClosedError`) and closes every
pooled connection.

Size: about 700 lines, because translating every ``requests`` / ``urllib3`` / socket failure
into a tinker_lite exception is the transport's one job and is kept in one place.

The API key is read through the ``auth`` callable at each request and is never logged, never put
in a ``repr`` and never copied into an exception message (:func:`redact` removes every registered
credential from texts built from server answers).
"""

from __future__ import annotations

import enum
import http.client
import ipaddress
import json
import logging
import platform
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import requests
import requests.adapters
import requests.exceptions
import urllib3.connectionpool
import urllib3.exceptions
from requests.structures import CaseInsensitiveDict

from tinker_lite._errors import (
    APIConnectionError,
    APITimeoutError,
    ClientClosedError,
    InvalidInputError,
    WireFormatError,
    format_status_error,
    status_error_class,
)
from tinker_lite._proxies import pin_environment, send_pinned
from tinker_lite._version import __version__

__all__ = [
    "DEFAULT_POOL_SIZES",
    "DEFAULT_TIMEOUT",
    "HEARTBEAT_TIMEOUT",
    "JSON",
    "PROTOBUF",
    "RETRIEVE_FUTURE_TIMEOUT",
    "TELEMETRY_TIMEOUT",
    "ClientClosedError",
    "HttpResponse",
    "PoolKind",
    "Timeout",
    "Transport",
    "is_certificate_error",
    "is_loopback_url",
    "new_idempotency_key",
    "path_param",
    "raise_for_status",
    "redact",
    "register_secret",
    "user_agent",
]

logger = logging.getLogger("tinker_lite.http")

JSON = "application/json"
PROTOBUF = "application/x-protobuf"

# Longest excerpt of a response body copied into an exception message.
_MAX_BODY_IN_MESSAGE = 2000


class PoolKind(enum.Enum):
    """Which connection pool a request uses (WIRE.md §1.7, §P.9)."""

    SESSION = "session"
    TRAIN = "train"
    SAMPLE = "sample"
    RETRIEVE_PROMISE = "retrieve_promise"
    TELEMETRY = "telemetry"


# Pools keep connections lazily, so generous caps cost nothing until used; each cap must be at
# least the concurrency of its users (the sampling in-flight cap of the client config is <= 2048).
DEFAULT_POOL_SIZES: Mapping[PoolKind, int] = {
    PoolKind.SESSION: 8,
    PoolKind.TRAIN: 64,
    PoolKind.SAMPLE: 2048,
    PoolKind.RETRIEVE_PROMISE: 2048,
    PoolKind.TELEMETRY: 2,
}


@dataclass(frozen=True)
class Timeout:
    """Connect and read timeouts of one HTTP attempt, in seconds (never ``None``)."""

    connect: float = 5.0
    read: float = 60.0

    def __post_init__(self) -> None:
        for name in ("connect", "read"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InvalidInputError(
                    f"Timeout.{name}", f"must be a positive number of seconds, got {value!r}"
                )


# WIRE.md §1.6: default 60 s (connect 5 s); retrieve_future 45 s; heartbeat 10 s; telemetry 5 s.
DEFAULT_TIMEOUT = Timeout()
RETRIEVE_FUTURE_TIMEOUT = Timeout(connect=5.0, read=45.0)
HEARTBEAT_TIMEOUT = Timeout(connect=5.0, read=10.0)
TELEMETRY_TIMEOUT = Timeout(connect=5.0, read=5.0)


# ---------------------------------------------------------------------------------------------
# Credentials never reach a message


_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a credential so :func:`redact` removes it from any text shown to users."""
    if value and len(value) >= 4:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """Replace every registered credential in ``text`` by ``***``."""
    if not _SECRETS:
        return text
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text


# ---------------------------------------------------------------------------------------------
# Responses


class HttpResponse:
    """One HTTP answer: status, case-insensitive headers and the whole body."""

    __slots__ = ("_json", "_json_error", "_json_loads", "body", "elapsed", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        elapsed: float = 0.0,
        json_loads: Callable[[bytes], Any] | None = None,
    ) -> None:
        self.status = status
        self.headers: CaseInsensitiveDict[str] = (
            headers if isinstance(headers, CaseInsensitiveDict) else CaseInsensitiveDict(headers)
        )
        self.body = body
        self.elapsed = elapsed
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
        """Whether the body is a protobuf message (WIRE.md §13.4)."""
        return self.content_type == PROTOBUF

    @property
    def request_id(self) -> str | None:
        """The service's ``x-request-id`` header, when it sent one."""
        return self.headers.get("x-request-id")

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


def _body_for_message(resp: HttpResponse) -> object:
    try:
        parsed = resp.json()
    except Exception:
        text = resp.text(_MAX_BODY_IN_MESSAGE)
        return redact(text)
    return parsed


def raise_for_status(
    resp: HttpResponse, *, request_id: str | None = None, what: str | None = None
) -> None:
    """Raise the :class:`~tinker_lite.APIStatusError` subclass for a non-2xx answer (WIRE.md §1.8).

    2xx answers return ``None``. 3xx answers (seen only when redirects are not followed) and every
    other status raise; ``request_id`` (else the ``x-request-id`` header) is attached. ``what``
    (e.g. ``"POST /api/v1/forward_backward"``) names the request in the message.
    """
    if 200 <= resp.status < 300:
        return
    body = _body_for_message(resp)
    rid = request_id or resp.request_id
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
# URLs and headers


def user_agent() -> str:
    """The ``User-Agent`` of tinker_lite, e.g. ``tinker_lite/0.1.0 (Python 3.11.7; Linux)``."""
    return f"tinker_lite/{__version__} (Python {platform.python_version()}; {platform.system()})"


def new_idempotency_key() -> str:
    """A fresh ``X-Idempotency-Key`` value for one logical request (WIRE.md §1.3)."""
    return f"tinker-lite-retry-{uuid.uuid4()}"


# Characters kept as-is in a path parameter: unreserved, sub-delims, ':' and '@' (RFC 3986).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def path_param(value: str, *, keep_slash: bool = True) -> str:
    """Escape a path parameter; ``/`` is kept so checkpoint ids stay two segments (WIRE.md §1.1)."""
    safe = _PATH_SAFE if keep_slash else _PATH_SAFE.replace("/", "")
    return urllib.parse.quote(value, safe=safe)


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` points at this machine (``localhost``, 127.0.0.0/8 or ``::1``)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _validate_base_url(base_url: str) -> str:
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(
            "base_url",
            f"must be an http:// or https:// URL with a host, got {base_url!r}",
            "e.g. https://tinker.thinkingmachines.dev/services/tinker-prod",
        )
    # WIRE.md §1.1: a trailing '/' is forced onto the base path; request paths are appended.
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# ---------------------------------------------------------------------------------------------
# Connection tracking, so close() can abort requests blocked in a read


class _ConnectionTracker:
    """Remembers every connection a pool opened, to shut their sockets down on close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, conn: Any) -> None:
        with self._lock:
            self._connections.add(conn)

    def abort_all(self) -> None:
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            sock = getattr(conn, "sock", None)
            if sock is None:
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _tracked_pool_classes(tracker: _ConnectionTracker) -> dict[str, Any]:
    class TrackedHTTPConnectionPool(urllib3.connectionpool.HTTPConnectionPool):
        def _new_conn(self) -> Any:
            conn = super()._new_conn()
            tracker.add(conn)
            return conn

    class TrackedHTTPSConnectionPool(urllib3.connectionpool.HTTPSConnectionPool):
        def _new_conn(self) -> Any:
            conn = super()._new_conn()
            tracker.add(conn)
            return conn

    return {"http": TrackedHTTPConnectionPool, "https": TrackedHTTPSConnectionPool}


class _TrackingAdapter(requests.adapters.HTTPAdapter):
    """An ``HTTPAdapter`` whose connections can all be aborted from another thread."""

    def __init__(self, tracker: _ConnectionTracker, pool_maxsize: int) -> None:
        self._tracker = tracker
        # WIRE.md §P.4: the only retry layer is tinker_lite's own, so urllib3 never retries.
        super().__init__(pool_connections=4, pool_maxsize=pool_maxsize, max_retries=0)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block=block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = _tracked_pool_classes(self._tracker)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = _tracked_pool_classes(self._tracker)
        return manager


# ---------------------------------------------------------------------------------------------
# The transport


def _nested_errors(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every error nested in it (causes, contexts, exception arguments, reasons).

    ``requests`` wraps urllib3's errors as arguments (``ConnectionError(MaxRetryError(...))``),
    urllib3 keeps the underlying failure as ``MaxRetryError.reason`` and as ``__cause__``.
    """
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


def _unreachable_message(exc: BaseException, where: str, request: str) -> str:
    """A plain sentence for a connect that failed: the OS's reason, never urllib3's chain."""
    errors = list(_nested_errors(exc))
    if any(isinstance(e, socket.gaierror) for e in errors):
        host = where.rsplit(":", 1)[0]
        return (
            f"Cannot resolve the host name {host} ({request}): check the base URL "
            "(--base-url / TINKER_BASE_URL) and the network's DNS."
        )
    reasons = [e.strerror for e in errors if isinstance(e, OSError) and e.strerror]
    reason = reasons[0] if reasons else "no connection could be made"
    return f"Cannot connect to {where} ({request}): {reason}; check the base URL and the network."


FailureKind = Literal["refused", "unreachable", "timeout", "other"]


def classify_failure(exc: BaseException) -> FailureKind:
    """What went wrong in a failed HTTP attempt.

    ``refused``: nothing listens at the address; ``unreachable``: no connection could be made
    for another reason (name resolution, network unreachable); ``timeout``: a connect or read
    timeout expired; ``other``: the connection broke (reset, TLS, protocol error).
    """
    errors = list(_nested_errors(exc))
    if any(isinstance(e, ConnectionRefusedError) for e in errors):
        return "refused"
    # urllib3's NewConnectionError subclasses ConnectTimeoutError although it is raised for
    # every failed connect that did not time out: it must be tested before the timeouts.
    if any(isinstance(e, urllib3.exceptions.NewConnectionError) for e in errors):
        return "unreachable"
    if any(
        isinstance(e, (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError))
        for e in errors
    ):
        return "timeout"
    return "other"


def is_certificate_error(exc: BaseException) -> bool:
    """Whether a failed attempt (or the error it caused) rejected the server's TLS certificate.

    A rejected certificate is a setting to fix (``verify=``), not a service that is starting.
    """
    return any(isinstance(e, ssl.SSLCertVerificationError) for e in _nested_errors(exc))


def _host_port(url: str) -> str:
    """``host:port`` of ``url`` (never its user info)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return f"{host}:{port}"


class Transport:
    """Sends single HTTP attempts to one base URL through per-purpose connection pools.

    ``headers`` are sent on every request, over the defaults (``User-Agent`` of tinker_lite,
    ``Accept: application/json``, ``Accept-Encoding``, ``Connection: keep-alive``); ``auth``
    returns the current credential (API key or JWT) sent as ``X-API-Key`` (omitted when empty).
    When ``reauth`` is given, a 401 answer to a request authenticated through ``auth`` calls
    ``reauth(rejected_credential)``; if it returns true the request is sent once more with the
    new credential (WIRE.md §13.2, JWT refresh). ``json_loads`` parses JSON bodies for
    :meth:`HttpResponse.json` (default: the standard library; it must raise
    :class:`~tinker_lite.WireFormatError` on a bad body).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        auth: Callable[[], str | None],
        pool_sizes: Mapping[PoolKind, int] | None = None,
        verify: bool | str = True,
        reauth: Callable[[str], bool] | None = None,
        json_loads: Callable[[bytes], Any] | None = None,
    ) -> None:
        self.base_url = _validate_base_url(base_url)
        self._json_loads = json_loads
        self._auth = auth
        self._reauth = reauth
        self._verify = verify
        self._closed = False
        self._lock = threading.Lock()
        sizes = dict(DEFAULT_POOL_SIZES)
        sizes.update(pool_sizes or {})
        self._trackers: dict[PoolKind, _ConnectionTracker] = {}
        self._sessions: dict[PoolKind, requests.Session] = {}
        default_headers = CaseInsensitiveDict(
            {
                "User-Agent": user_agent(),
                "Accept-Encoding": "gzip, deflate",
                "Accept": JSON,
                "Connection": "keep-alive",
            }
        )
        default_headers.update(headers)
        for kind in PoolKind:
            size = sizes[kind]
            if size < 1:
                raise InvalidInputError(f"pool_sizes[{kind.name}]", f"must be >= 1, got {size}")
            tracker = _ConnectionTracker()
            session = requests.Session()
            session.headers = CaseInsensitiveDict(default_headers)
            adapter = _TrackingAdapter(tracker, size)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._trackers[kind] = tracker
            self._sessions[kind] = session
            # Proxies, CA bundle and netrc read once per pool, not on every request.
            self._verify = pin_environment(session, self.base_url, verify)

    def __repr__(self) -> str:
        return f"Transport(base_url={self.base_url!r}, closed={self._closed})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (WIRE.md §1.1: the base path prefix is kept)."""
        return self.base_url + path.lstrip("/")

    def send(
        self,
        pool: PoolKind,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str | None = JSON,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        allow_redirects: bool = True,
    ) -> HttpResponse:
        """Send one HTTP attempt and return its answer, whatever the status.

        ``Content-Type`` is sent with a body and on every non-GET request (as the official SDK
        does, WIRE.md §1.3); a non-GET request without an ``X-Idempotency-Key`` in ``headers``
        gets a fresh one. Raises :class:`~tinker_lite.APITimeoutError` on a connect/read
        timeout, :class:`~tinker_lite.APIConnectionError` on any other transport failure and
        :class:`ClientClosedError` after :meth:`close`.
        """
        method = method.upper()
        request_headers: CaseInsensitiveDict[str] = CaseInsensitiveDict()
        if content_type is not None and (body is not None or method not in ("GET", "HEAD")):
            request_headers["Content-Type"] = content_type
        extra = CaseInsensitiveDict(headers or {})
        if method not in ("GET", "HEAD") and "x-idempotency-key" not in extra:
            request_headers["X-Idempotency-Key"] = new_idempotency_key()
        # WIRE.md §1.3: sent for parity with the official SDK (a retry layer sets the count).
        request_headers["x-stainless-retry-count"] = "0"
        request_headers["x-stainless-read-timeout"] = _format_seconds(timeout.read)
        request_headers.update(extra)
        explicit_credential = "x-api-key" in extra
        credential = None
        if not explicit_credential:
            credential = self._auth() or None
            if credential:
                request_headers["X-API-Key"] = credential

        def attempt() -> HttpResponse:
            return self._send_once(
                pool,
                method,
                path,
                body=body,
                query=query,
                headers=request_headers,
                timeout=timeout,
                allow_redirects=allow_redirects,
            )

        resp = attempt()
        # WIRE.md §13.2: a stale JWT is answered 401; refresh it and re-send once.
        if (
            resp.status == 401
            and self._reauth is not None
            and not explicit_credential
            and credential is not None
            and self._reauth(credential)
        ):
            fresh = self._auth() or None
            if fresh and fresh != credential:
                request_headers["X-API-Key"] = fresh
                resp = attempt()
        return resp

    def _send_once(
        self,
        pool: PoolKind,
        method: str,
        path: str,
        *,
        body: bytes | None,
        query: Mapping[str, str] | None,
        headers: Mapping[str, str],
        timeout: Timeout,
        allow_redirects: bool,
    ) -> HttpResponse:
        if self._closed:
            raise ClientClosedError(f"The client is closed; cannot send {method} {path}.")
        session = self._sessions[pool]
        started = time.monotonic()
        try:
            r = send_pinned(
                session,
                method,
                self.url(path),
                data=body,
                params=query,
                headers=headers,
                timeout=(timeout.connect, timeout.read),
                allow_redirects=allow_redirects,
                verify=self._verify,
            )
            try:
                content = r.content
                status = r.status_code
                response_headers = r.headers
            finally:
                r.close()
        except requests.exceptions.InvalidURL as e:
            raise InvalidInputError("path", f"{method} {path!r} is not a valid URL path") from e
        except UnicodeError as e:
            raise InvalidInputError(
                "headers", f"{method} {path}: a header value is not latin-1 text"
            ) from e
        except requests.exceptions.InvalidHeader as e:
            raise InvalidInputError(
                "headers",
                f"{method} {path}: a header name or value is not a string or holds a line break, "
                "leading whitespace or a reserved character",
                "check default_headers and the CLOUDFLARE_ACCESS_* variables for a stray newline",
            ) from e
        except (
            requests.exceptions.RequestException,
            urllib3.exceptions.HTTPError,
            http.client.HTTPException,
            OSError,
        ) as e:
            elapsed = time.monotonic() - started
            detail = redact(f"{type(e).__name__}: {e}")
            if self._closed:
                raise ClientClosedError(
                    f"The client was closed during {method} {path}.", body=None
                ) from e
            kind = classify_failure(e)
            if kind == "timeout":
                raise APITimeoutError(
                    f"Request timed out after {elapsed:.1f}s: {method} {path} "
                    f"(connect timeout {timeout.connect}s, read timeout {timeout.read}s). {detail}",
                    elapsed=elapsed,
                ) from e
            where = _host_port(self.base_url)
            if kind == "refused":
                raise APIConnectionError(
                    f"Connection refused by {where} ({method} {path}): nothing is listening "
                    "there; check the base URL and that the service is running."
                ) from e
            if kind == "unreachable":
                raise APIConnectionError(_unreachable_message(e, where, f"{method} {path}")) from e
            raise APIConnectionError(f"Connection error on {method} {path}: {detail}") from e
        elapsed = time.monotonic() - started
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s -> %s in %.1f ms", method, path, status, elapsed * 1000)
        return HttpResponse(
            status, response_headers, content, elapsed=elapsed, json_loads=self._json_loads
        )

    def abort(self, pools: Collection[PoolKind] | None = None) -> None:
        """Shut down the sockets of ``pools`` (default: all), failing requests in flight."""
        for kind in pools if pools is not None else list(PoolKind):
            self._trackers[kind].abort_all()

    def close(self) -> None:
        """Abort requests in flight, close every pooled connection; later sends fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.abort()
        for session in self._sessions.values():
            session.close()

    def sessions(self) -> Iterator[tuple[PoolKind, requests.Session]]:
        """The ``requests.Session`` of each pool kind (for inspection)."""
        yield from self._sessions.items()
