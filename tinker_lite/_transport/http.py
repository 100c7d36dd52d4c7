"""HTTP transport: a urllib3 pool manager per pool kind, default headers, the error mapping.

A :class:`Transport` sends exactly one HTTP attempt per :meth:`Transport.send` call (retries live
in :mod:`tinker_lite._transport.retry`; urllib3's own are off); it never raises a ``urllib3``,
``http.client`` or socket exception: those become :class:`~tinker_lite.APIConnectionError` or
:class:`~tinker_lite.APITimeoutError` with the original kept as ``__cause__``. Statuses are not
raised by ``send``; :func:`raise_for_status` is the one mapping from a response to its exception
(WIRE.md §1.8).

Threading: a :class:`Transport` is shared by every thread of one session holder. Each pool kind has
its own ``PoolManager`` (a ``ProxyManager`` when the environment routes the base URL through a
proxy, :mod:`tinker_lite._transport.proxies`) keeping up to ``pool_sizes[kind]`` connections per
host, so a burst of sampling requests can never starve heartbeats or training submits (WIRE.md
§P.9). :meth:`Transport.close` aborts requests still in flight (their sockets are shut down, so
blocked threads return at once with :class:`ClientClosedError`) and closes every pooled connection.

What the transport does itself, as requests did for it: redirects (up to 30, 301/302/303 turn a
POST into a GET, ``Authorization`` and ``Cookie`` dropped for another origin), a cookie store
per pool kind (the service's load balancer may pin a client with a cookie), header validation,
netrc credentials and ``Content-Length`` on every request that may carry a body.

Size: about 850 lines, because translating every ``urllib3`` / socket failure into a tinker_lite
exception is the transport's one job and is kept in one place.

The API key is read through the ``auth`` callable at each request and is never logged, never put
in a ``repr`` and never copied into an exception message (:func:`redact` removes every registered
credential from texts built from server answers).
"""

from __future__ import annotations

import datetime
import email.utils
import enum
import http.client
import ipaddress
import json
import logging
import platform
import re
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

import urllib3
import urllib3.connectionpool
import urllib3.exceptions
from urllib3 import HTTPHeaderDict
from urllib3.util.retry import Retry

from tinker_lite._errors import (
    APIConnectionError,
    APITimeoutError,
    ClientClosedError,
    InvalidInputError,
    WireFormatError,
    format_status_error,
    status_error_class,
)
from tinker_lite._transport.proxies import (
    basic_auth,
    environment_settings,
    pool_manager,
    select_proxy,
    tls_pool_kwargs,
)
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
        self.headers: HTTPHeaderDict = (
            headers if isinstance(headers, HTTPHeaderDict) else HTTPHeaderDict(headers)
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
    """Whether ``url`` points at this machine (``localhost``, 127.0.0.0/8, ``::1``, or the
    unspecified ``0.0.0.0`` / ``::``, which a connection reaches this machine through)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


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


def _track_connections(manager: urllib3.PoolManager, tracker: _ConnectionTracker) -> None:
    """Make ``manager``'s pools register every connection they open with ``tracker``."""

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

    # A SOCKS manager has pool classes of its own (its connections are not tracked).
    if type(manager) in (urllib3.PoolManager, urllib3.ProxyManager):
        manager.pool_classes_by_scheme = {
            "http": TrackedHTTPConnectionPool,
            "https": TrackedHTTPSConnectionPool,
        }


# ---------------------------------------------------------------------------------------------
# The transport


def _nested_errors(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every error nested in it (causes, contexts, exception arguments, reasons).

    urllib3 keeps the underlying failure as ``__cause__``, as an argument
    (``ProtocolError("Connection aborted.", ConnectionResetError(...))``) or as
    ``MaxRetryError.reason``.
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
    if any(isinstance(e, (urllib3.exceptions.TimeoutError, TimeoutError)) for e in errors):
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


# ---------------------------------------------------------------------------------------------
# Headers, cookies and redirects: what the transport does for itself


# As requests checks them: a name without ':' or whitespace, a value without line breaks that
# does not start with whitespace (or is empty).
_VALID_HEADER_NAME = re.compile(r"^[^:\s][^:\r\n]*\Z")
_VALID_HEADER_VALUE = re.compile(r"^\S[^\r\n]*\Z|^\Z")

# A header kept for the wire: lower-case name -> (name as given, value).
_Headers = dict[str, tuple[str, Any]]


def _header_problem(name: object, value: object) -> Literal["form", "latin-1"] | None:
    """What is wrong with a header for the wire: its form, a non latin-1 value, or nothing."""
    if not isinstance(name, str) or not isinstance(value, str):
        return "form"
    if not _VALID_HEADER_NAME.match(name) or not _VALID_HEADER_VALUE.match(value):
        return "form"
    if not value.isascii():
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            return "latin-1"
    return None


def _header_error(problem: Literal["form", "latin-1"], request: str) -> InvalidInputError:
    if problem == "latin-1":
        return InvalidInputError("headers", f"{request}: a header value is not latin-1 text")
    return InvalidInputError(
        "headers",
        f"{request}: a header name or value is not a string or holds a line break, "
        "leading whitespace or a reserved character",
        "check default_headers and the CLOUDFLARE_ACCESS_* variables for a stray newline",
    )


class _Cookies:
    """The cookies one origin set, sent back on later requests to it (one pool kind's jar).

    Domain and path attributes are not needed (every request goes to the base URL's origin);
    ``Max-Age <= 0`` or an ``Expires`` in the past removes a cookie.
    """

    __slots__ = ("_lock", "_values", "header")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, str] = {}
        self.header: str | None = None

    def update(self, set_cookies: list[str]) -> None:
        """Store what ``Set-Cookie`` answer headers say."""
        with self._lock:
            for line in set_cookies:
                pair, *attributes = line.split(";")
                name, sep, value = pair.partition("=")
                name = name.strip()
                if not sep or not name:
                    continue
                if any(_expires_now(attribute) for attribute in attributes):
                    self._values.pop(name, None)
                else:
                    self._values[name] = value.strip()
            text = "; ".join(f"{k}={v}" for k, v in self._values.items())
            self.header = text or None


def _expires_now(attribute: str) -> bool:
    """Whether a ``Set-Cookie`` attribute ends the cookie now (``Max-Age=0``, a past date)."""
    key, _, value = attribute.partition("=")
    key = key.strip().lower()
    if key == "max-age":
        try:
            return int(value.strip()) <= 0
        except ValueError:
            return False
    if key == "expires":
        try:
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return False
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        return when <= datetime.datetime.now(datetime.timezone.utc)
    return False


_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 30
# Dropped when a redirect turns the request into a GET without a body.
_BODY_HEADERS = ("content-length", "content-type", "transfer-encoding")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname or "", port


def _redirected_method(status: int, method: str) -> str:
    """The method after a redirect, as browsers and requests do it (RFC 9110 §15.4)."""
    if status in (302, 303) and method != "HEAD":
        return "GET"
    if status == 301 and method == "POST":
        return "GET"
    return method


def _keeps_credentials(old: str, new: str) -> bool:
    """Whether a redirect from ``old`` to ``new`` keeps ``Authorization`` (same origin, or the
    upgrade of ``http`` on port 80 to ``https`` on 443 of the same host)."""
    before, after = _origin(old), _origin(new)
    if before == after:
        return True
    return before == ("http", after[1], 80) and after[0] == "https" and after[2] == 443


# WIRE.md §P.4: the only retry layer is tinker_lite's own, so urllib3 never retries (nor
# follows redirects: the transport does, to keep its cookies and credentials rules).
_NO_RETRIES = Retry(total=False)
# How many checked header pairs a transport keeps (emptied when full: per-request values such
# as idempotency keys pass through it).
_MAX_CHECKED_HEADERS = 1024
# How many parsed request URLs a transport keeps (a few fixed paths, plus ids in REST paths).
_MAX_KEPT_TARGETS = 256


class _TooManyRedirects(urllib3.exceptions.HTTPError):
    """More than :data:`_MAX_REDIRECTS` redirects in a row."""


# ---------------------------------------------------------------------------------------------
# The transport


class _Pool:
    """One pool kind's connections: its manager(s), their tracker and its cookie jar."""

    __slots__ = ("cookies", "manager", "managers", "tracker")

    def __init__(self, manager: urllib3.PoolManager, tracker: _ConnectionTracker) -> None:
        self.manager = manager
        self.tracker = tracker
        self.cookies = _Cookies()
        # Managers for redirect targets routed through another proxy, by proxy URL.
        self.managers: dict[str | None, urllib3.PoolManager] = {}


class Transport:
    """Sends single HTTP attempts to one base URL through per-purpose connection pools.

    ``headers`` are sent on every request, over the defaults (``User-Agent`` of tinker_lite,
    ``Accept: application/json``, ``Accept-Encoding``, ``Connection: keep-alive``); ``auth``
    returns the current credential (API key or JWT) sent as ``X-API-Key`` (omitted when empty).
    When ``reauth`` is given, a 401 answer to a request authenticated through ``auth`` calls
    ``reauth(rejected_credential)``; if it returns true the request is sent once more with the
    new credential (WIRE.md §13.2, JWT refresh). ``json_loads`` parses JSON bodies for
    :meth:`HttpResponse.json` (default: the standard library; it must raise
    :class:`~tinker_lite.WireFormatError` on a bad body). ``verify`` is ``True`` (certifi's
    bundle, or ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``), a CA bundle path, or ``False``.
    Proxies, the CA bundle and netrc are read from the environment once, here
    (:mod:`tinker_lite._transport.proxies`).
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
        self._closed = False
        self._lock = threading.Lock()
        self._timeouts: dict[Timeout, urllib3.Timeout] = {}
        # Per-request headers found fit for the wire: most repeat on every request (x-sdk-*,
        # Accept, the request type), so each distinct pair is checked once.
        self._checked_headers: set[tuple[str, str]] = set()
        # URL -> (scheme, host, port, request URI) as urllib3 parses it, for _urlopen.
        self._targets: dict[str, tuple[str, str | None, int | None, str]] = {}
        sizes = dict(DEFAULT_POOL_SIZES)
        sizes.update(pool_sizes or {})
        for kind in PoolKind:
            if sizes[kind] < 1:
                raise InvalidInputError(
                    f"pool_sizes[{kind.name}]", f"must be >= 1, got {sizes[kind]}"
                )

        defaults: dict[str, str] = {
            "User-Agent": user_agent(),
            "Accept-Encoding": "gzip, deflate",
            "Accept": JSON,
            "Connection": "keep-alive",
        }
        self._base_headers: _Headers = {k.lower(): (k, v) for k, v in defaults.items()}
        given: Mapping[str, object] = headers
        for name, value in given.items():
            if value is None:  # as in requests, a None default removes the header
                self._base_headers.pop(name.lower(), None)
            else:
                self._base_headers[name.lower()] = (name, value)
        self._base_header_problem = next(
            (p for n, v in self._base_headers.values() if (p := _header_problem(n, v))), None
        )

        # Proxies, CA bundle and netrc are read once per transport, not on every request.
        settings = environment_settings(self.base_url, verify)
        self._verify = settings.verify
        self._proxies = settings.proxies
        self._netrc_authorization = (
            basic_auth(*settings.netrc_auth) if settings.netrc_auth is not None else None
        )
        self._proxy = select_proxy(self.base_url, self._proxies)
        self._tls: dict[str, Any] | None = None
        self._tls_error: OSError | None = None
        # TLS settings (certifi's bundle, loaded once) only when TLS is used: not for loopback.
        self._primary_tls = (
            self._verify is False
            or self.base_url.startswith("https:")
            or (self._proxy is not None and self._proxy.lower().startswith("https:"))
        )
        self._pools: dict[PoolKind, _Pool] = {}
        for kind in PoolKind:
            tracker = _ConnectionTracker()
            manager = self._new_manager(self._proxy, sizes[kind], tracker, tls=self._primary_tls)
            self._pools[kind] = _Pool(manager, tracker)

    def _tls_kwargs(self) -> dict[str, Any]:
        """The pool arguments for ``verify``, computed once (a missing bundle is kept to raise)."""
        if self._tls is None:
            try:
                self._tls = tls_pool_kwargs(self._verify)
            except OSError as e:
                self._tls_error = e
                self._tls = {}
        return self._tls

    def _new_manager(
        self, proxy: str | None, size: int, tracker: _ConnectionTracker, *, tls: bool
    ) -> urllib3.PoolManager:
        tls_kwargs = self._tls_kwargs() if tls else {}
        try:
            manager = pool_manager(proxy, num_pools=4, maxsize=size, block=False, **tls_kwargs)
        except ImportError as e:
            where = urllib.parse.urlsplit(str(proxy)).hostname or "?"
            raise InvalidInputError(
                "proxy",
                f"the SOCKS proxy at {where} (from HTTP_PROXY / HTTPS_PROXY / ALL_PROXY) needs "
                "PySocks",
                "pip install pysocks, or unset the variable",
            ) from e
        _track_connections(manager, tracker)
        return manager

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
        timeout, :class:`~tinker_lite.APIConnectionError` on any other transport failure,
        :class:`~tinker_lite.InvalidInputError` for a header that cannot be sent and
        :class:`ClientClosedError` after :meth:`close`.
        """
        method = method.upper()
        request_headers = self._base_headers.copy()
        if content_type is not None and (body is not None or method not in ("GET", "HEAD")):
            request_headers["content-type"] = ("Content-Type", content_type)
        extra: _Headers = {k.lower(): (k, v) for k, v in headers.items()} if headers else {}
        if method not in ("GET", "HEAD") and "x-idempotency-key" not in extra:
            request_headers["x-idempotency-key"] = ("X-Idempotency-Key", new_idempotency_key())
        # WIRE.md §1.3: sent for parity with the official SDK (a retry layer sets the count).
        request_headers["x-stainless-retry-count"] = ("x-stainless-retry-count", "0")
        request_headers["x-stainless-read-timeout"] = (
            "x-stainless-read-timeout",
            _format_seconds(timeout.read),
        )
        request_headers.update(extra)
        explicit_credential = "x-api-key" in extra
        credential = None
        if not explicit_credential:
            credential = self._auth() or None
            if credential:
                request_headers["x-api-key"] = ("X-API-Key", credential)
        problem = self._base_header_problem or self._extra_header_problem(extra)
        if problem is None and credential:
            problem = self._checked_header_problem("X-API-Key", credential)
        if problem is not None:
            raise _header_error(problem, f"{method} {path}")

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
                if _header_problem("X-API-Key", fresh) is not None:
                    raise _header_error("form", f"{method} {path}")
                request_headers["x-api-key"] = ("X-API-Key", fresh)
                resp = attempt()
        return resp

    def _extra_header_problem(self, extra: _Headers) -> Literal["form", "latin-1"] | None:
        """What is wrong with the first bad per-request header, or None."""
        for name, value in extra.values():
            problem = self._checked_header_problem(name, value)
            if problem is not None:
                return problem
        return None

    def _checked_header_problem(
        self, name: object, value: object
    ) -> Literal["form", "latin-1"] | None:
        """:func:`_header_problem`, remembering the pairs found fit so each is checked once."""
        checked = self._checked_headers
        if type(name) is str and type(value) is str and (name, value) in checked:
            return None
        problem = _header_problem(name, value)
        if problem is None and type(name) is str and type(value) is str:
            if len(checked) >= _MAX_CHECKED_HEADERS:
                checked.clear()
            checked.add((name, value))
        return problem

    def _urllib3_timeout(self, timeout: Timeout) -> urllib3.Timeout:
        value = self._timeouts.get(timeout)
        if value is None:
            value = self._timeouts[timeout] = urllib3.Timeout(
                connect=timeout.connect, read=timeout.read
            )
        return value

    def _urlopen(
        self,
        pool: _Pool,
        manager: urllib3.PoolManager,
        method: str,
        url: str,
        **kwargs: Any,
    ) -> Any:
        """``manager.urlopen(method, url, ...)``; for a plain manager, straight to its pool.

        Without a proxy, ``PoolManager.urlopen`` parses the URL, finds the connection pool of its
        origin and asks that pool for the URL's path: the same is done here with the parsed URL
        kept (requests go to a handful of paths), which saves a third of urllib3's own work on a
        small request.
        """
        if manager is not pool.manager or type(manager) is not urllib3.PoolManager:
            return manager.urlopen(method, url, **kwargs)
        target = self._targets.get(url)
        if target is None:
            parts = urllib3.util.parse_url(url)
            target = (parts.scheme or "http", parts.host, parts.port, parts.request_uri)
            if len(self._targets) >= _MAX_KEPT_TARGETS:
                self._targets.clear()
            self._targets[url] = target
        scheme, host, port, request_uri = target
        connections = manager.connection_from_host(host, port=port, scheme=scheme)
        return connections.urlopen(method, request_uri, assert_same_host=False, **kwargs)

    def _manager_for(self, pool: _Pool, url: str) -> urllib3.PoolManager:
        """The manager that routes ``url`` (another proxy may apply after a redirect)."""
        proxy = select_proxy(url, self._proxies)
        if proxy == self._proxy and (self._primary_tls or not url.startswith("https:")):
            return pool.manager
        with self._lock:
            manager = pool.managers.get(proxy)
            if manager is None:
                size = pool.manager.connection_pool_kw["maxsize"]
                manager = self._new_manager(proxy, size, pool.tracker, tls=True)
                pool.managers[proxy] = manager
        return manager

    def _send_once(
        self,
        pool_kind: PoolKind,
        method: str,
        path: str,
        *,
        body: bytes | None,
        query: Mapping[str, str] | None,
        headers: _Headers,
        timeout: Timeout,
        allow_redirects: bool,
    ) -> HttpResponse:
        if self._closed:
            raise ClientClosedError(f"The client is closed; cannot send {method} {path}.")
        pool = self._pools[pool_kind]
        url = self.url(path)
        if query:
            url += "?" + urllib.parse.urlencode(query)
        wire = dict(headers.values())
        if pool.cookies.header is not None:
            wire["Cookie"] = pool.cookies.header
        if body is not None:
            wire["Content-Length"] = str(len(body))
        elif method not in ("GET", "HEAD"):
            wire["Content-Length"] = "0"
        if self._netrc_authorization is not None:
            wire["Authorization"] = self._netrc_authorization
        manager = pool.manager
        request_method = method
        redirects = 0
        started = time.monotonic()
        try:
            while True:
                if self._tls_error is not None and url.startswith("https:"):
                    raise self._tls_error
                r = self._urlopen(
                    pool,
                    manager,
                    request_method,
                    url,
                    body=body,
                    headers=wire,
                    timeout=self._urllib3_timeout(timeout),
                    retries=_NO_RETRIES,
                    redirect=False,
                    preload_content=True,
                    decode_content=True,
                )
                status = r.status
                response_headers = r.headers
                content = r.data
                if "set-cookie" in response_headers and (
                    redirects == 0 or _origin(url) == _origin(self.base_url)
                ):
                    pool.cookies.update(response_headers.getlist("set-cookie"))
                location = response_headers.get("location")
                if not allow_redirects or status not in _REDIRECT_STATUSES or not location:
                    break
                if redirects == _MAX_REDIRECTS:
                    raise _TooManyRedirects(f"more than {_MAX_REDIRECTS} redirects")
                redirects += 1
                target = urllib.parse.urljoin(url, location)
                request_method = _redirected_method(status, request_method)
                wire = dict(wire)
                if status not in (307, 308):
                    body = None
                    wire = {k: v for k, v in wire.items() if k.lower() not in _BODY_HEADERS}
                if not _keeps_credentials(url, target):
                    wire = {
                        k: v
                        for k, v in wire.items()
                        if k.lower() not in ("authorization", "cookie")
                    }
                elif pool.cookies.header is not None:
                    wire["Cookie"] = pool.cookies.header
                manager = self._manager_for(pool, target)
                url = target
        except urllib3.exceptions.LocationValueError as e:
            if redirects == 0:
                raise InvalidInputError("path", f"{method} {path!r} is not a valid URL path") from e
            raise APIConnectionError(
                f"Connection error on {method} {path}: a redirect led to an invalid URL"
            ) from e
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as e:
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
            self._pools[kind].tracker.abort_all()

    def close(self) -> None:
        """Abort requests in flight, close every pooled connection; later sends fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.abort()
        for pool in self._pools.values():
            pool.manager.clear()
            with self._lock:
                others = list(pool.managers.values())
            for manager in others:
                manager.clear()

    def pool_managers(self) -> Iterator[tuple[PoolKind, urllib3.PoolManager]]:
        """The urllib3 manager of each pool kind (for inspection)."""
        for kind, pool in self._pools.items():
            yield kind, pool.manager

    def default_headers(self) -> dict[str, str]:
        """The headers sent on every request (before the per-request ones), for inspection."""
        return dict(self._base_headers.values())
