"""HTTP transport: one ``requests.Session`` per pool kind, one attempt per send, the error mapping
(docs/architecture.rst, "The transport"; docs/protocol.rst §2)."""

from __future__ import annotations

import enum
import functools
import ipaddress
import logging
import platform
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import requests
import requests.adapters
import requests.auth
import requests.exceptions
import requests.utils
from requests.cookies import RequestsCookieJar, merge_cookies
from requests.models import PreparedRequest
from requests.sessions import merge_setting
from requests.structures import CaseInsensitiveDict

from tinker_lite._errors import (
    APIConnectionError,
    APITimeoutError,
    ClientClosedError,
    InvalidInputError,
    ResponseTooLargeError,
)
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import CREDENTIAL_HEADERS, redact, redact_url, register_secret
from tinker_lite._transport.adapters import (
    DEADLINES,
    MAX_KEPT_URLS,
    PoolAdapter,
    ServiceAuth,
    check_header,
    header_error,
    pool_session,
)
from tinker_lite._transport.answers import (
    DEFAULT_MAX_ANSWER_BYTES,
    JSON,
    HttpResponse,
    is_urllib3,
    read_capped,
    read_redirect_body,
)
from tinker_lite._transport.failures import TRANSPORT_ERRORS, connection_failure, low_level_cause
from tinker_lite._version import __version__

__all__ = [
    "DEFAULT_POOL_SIZES",
    "DEFAULT_TIMEOUT",
    "HEARTBEAT_TIMEOUT",
    "RETRIEVE_FUTURE_TIMEOUT",
    "TELEMETRY_TIMEOUT",
    "ClientClosedError",
    "PoolKind",
    "Timeout",
    "Transport",
    "is_loopback_url",
    "redact",
    "register_secret",
    "user_agent",
]

logger = logging.getLogger("tinker_lite.http")


class PoolKind(enum.Enum):
    """Which connection pool a request uses (docs/protocol.rst §2.5)."""

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
    """Connect and read timeouts of one HTTP attempt, in seconds (never ``None``), and its
    overall deadline ``total`` (connect, headers and the whole body; default: connect + read)."""

    connect: float = 5.0
    read: float = 60.0
    total: float | None = None

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if name == "total" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InvalidInputError(
                    f"Timeout.{name}", f"must be a positive number of seconds, got {value!r}"
                )

    @property
    def deadline(self) -> float:
        """Seconds one attempt may take in all: a read timeout bounds each read only."""
        return self.connect + self.read if self.total is None else self.total


# docs/protocol.rst §2.4: default 60 s (connect 5 s); retrieve_future 45 s; heartbeat 10 s;
# telemetry 5 s.
DEFAULT_TIMEOUT = Timeout()
RETRIEVE_FUTURE_TIMEOUT = Timeout(connect=5.0, read=45.0)
HEARTBEAT_TIMEOUT = Timeout(connect=5.0, read=10.0)
TELEMETRY_TIMEOUT = Timeout(connect=5.0, read=5.0)


# ---------------------------------------------------------------------------------------------
# URLs and headers


def user_agent() -> str:
    """The ``User-Agent`` of tinker_lite, e.g. ``tinker_lite/0.1.0 (Python 3.11.7; Linux)``."""
    return f"tinker_lite/{__version__} (Python {platform.python_version()}; {platform.system()})"


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


def _validate_base_url(base_url: str) -> str:
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(
            "base_url",
            f"must be an http:// or https:// URL with a host, got {base_url!r}",
            "e.g. https://tinker.thinkingmachines.dev/services/tinker-prod",
        )
    try:
        parts.port  # noqa: B018 - urllib.parse checks the port when it is read
    except ValueError:
        raise InvalidInputError(
            "base_url", f"the port must be a number from 0 to 65535, got {base_url!r}"
        ) from None
    # docs/protocol.rst §2.1: a trailing '/' is forced onto the base path; request paths are
    # appended.
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# ---------------------------------------------------------------------------------------------
# The transport


_Headers = CaseInsensitiveDict[str]


def _as_is(r: PreparedRequest) -> PreparedRequest:
    return r


def _template(session: requests.Session, base_url: str, headers: _Headers) -> PreparedRequest:
    """``headers`` and the session's hooks, prepared once by ``Session.prepare_request``; cookies
    and auth are each request's own (a no-op auth keeps the session's and netrc's out)."""
    wanted: CaseInsensitiveDict[str | None] = CaseInsensitiveDict()
    wanted.update(dict.fromkeys(list(session.headers)))  # requests' merge drops a None
    wanted.update(headers)
    template = session.prepare_request(
        requests.Request("GET", base_url, headers=wanted, auth=_as_is)
    )
    # The session's cookies at this moment are not the template's: each request's own jar,
    # matched to its URL, replaces them (and copy() then has no jar to copy).
    template._cookies = None  # type: ignore[attr-defined]
    if "Cookie" not in headers:
        template.headers.pop("Cookie", None)
    return template


class Transport:
    """Sends single HTTP attempts to one base URL through per-purpose requests sessions
    (docs/architecture.rst, "The transport": its headers, credentials, sessions and limits)."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str | None],
        auth: Callable[[], str | None],
        pool_sizes: Mapping[PoolKind, int] | None = None,
        verify: bool | str = True,
        reauth: Callable[[str], bool] | None = None,
        json_loads: Callable[[bytes], Any] | None = None,
        session: requests.Session | None = None,
        secret_headers: Collection[str] = (),
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.base_url = _validate_base_url(base_url)
        self.max_answer_bytes = max_answer_bytes
        self._redirect_body = functools.partial(read_redirect_body, max_answer_bytes)
        self._json_loads = json_loads
        self._closed = False
        self._lock = threading.Lock()
        # requests' preparation of each URL, made once (bench/README.rst, "Preparing a request").
        self._urls: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, str]] = {}
        sizes = dict(DEFAULT_POOL_SIZES)
        sizes.update(pool_sizes or {})

        self._own_sessions = session is None
        if session is None:
            # The requests session of each pool kind (the caller's own one for all, if given).
            self.sessions = {kind: pool_session(sizes[kind]) for kind in PoolKind}
            first = self.sessions[PoolKind.SESSION]
        else:
            self.sessions = dict.fromkeys(PoolKind, session)
            first = session

        # Connection-wide headers, merged once: requests' defaults < tinker_lite's < what the
        # caller's session set < ``headers``.
        merged: _Headers = CaseInsensitiveDict(
            {
                "User-Agent": user_agent(),
                "Accept-Encoding": "gzip, deflate",
                "Accept": JSON,
                "Connection": "keep-alive",
            }
        )
        stock = requests.utils.default_headers()
        for name, given in first.headers.items():
            if stock.get(name) != given:
                merged[name] = given if isinstance(given, str) else given.decode("latin-1")
        # requests' own merge: a None value removes the header.
        merged = merge_setting(  # type: ignore[no-untyped-call]
            headers, merged, dict_class=CaseInsensitiveDict
        )
        self._base_header_problem = next(
            ((p, n) for n, v in merged.items() if (p := check_header(n, v))), None
        )
        # Credentials are the auth handler's: it keeps them off a redirect to another origin.
        secret_names = CREDENTIAL_HEADERS | {name.lower() for name in secret_headers}
        secrets = {n: v for n, v in merged.items() if n.lower() in secret_names}
        for name in secrets:
            del merged[name]
        self._base_headers = merged

        # docs/protocol.rst §2.5: what requests reads from the environment (proxies, NO_PROXY,
        # the CA bundle; netrc below) is resolved once, with requests' own function, for the
        # base URL.
        settings = first.merge_environment_settings(
            self.base_url, {}, None, None if verify is True else verify, None
        )
        self.proxies: dict[str, str] = dict(settings["proxies"] or {})
        self.verify: bool | str = True if settings["verify"] is None else settings["verify"]
        self._cert: str | tuple[str, str] | None = settings["cert"]
        inner: Callable[[PreparedRequest], PreparedRequest] | None = None
        if isinstance(first.auth, tuple) and len(first.auth) == 2:  # as requests applies it
            inner = requests.auth.HTTPBasicAuth(*first.auth)
        elif first.auth is not None:
            inner = first.auth
        elif first.trust_env:
            netrc = requests.utils.get_netrc_auth(self.base_url)
            if netrc is not None:
                inner = requests.auth.HTTPBasicAuth(*netrc)
        self._auth = ServiceAuth(auth, reauth, inner, first.should_strip_auth, secrets)
        # With a bad header, there is no template: every send names that header.
        self._templates = {
            kind: _template(kind_session, self.base_url, merged)
            for kind, kind_session in self.sessions.items()
            if self._base_header_problem is None
        }
        self._check_proxy()

    def _check_proxy(self) -> None:
        """Build the proxy route of the base URL now, so a SOCKS proxy without PySocks is named
        before anything is sent."""
        proxy = requests.utils.select_proxy(self.base_url, self.proxies)
        if not proxy or not proxy.lower().startswith("socks"):
            return
        adapter = self.sessions[PoolKind.SESSION].get_adapter(self.base_url)
        if not isinstance(adapter, requests.adapters.HTTPAdapter):
            return
        try:
            adapter.proxy_manager_for(proxy)
        except requests.exceptions.InvalidSchema as e:
            where = urllib.parse.urlsplit(proxy).hostname or "?"
            raise InvalidInputError(
                "proxy",
                f"the SOCKS proxy at {where} (from HTTP_PROXY / HTTPS_PROXY / ALL_PROXY) needs "
                "PySocks",
                "pip install pysocks, or unset the variable",
            ) from e

    @tolerant_repr
    def __repr__(self) -> str:
        return f"Transport(base_url={redact_url(self.base_url)!r}, closed={self._closed})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (docs/protocol.rst §2.1: the base path prefix is kept)."""
        return self.base_url + path.lstrip("/")

    def sent_path(self, path: str) -> str:
        """``path`` as it is sent, below the base URL's path: requests' preparation quotes it
        and removes ``.``/``..`` segments, and a message names the path that was sent."""
        return self._prepared_url(path, None)[1]

    def _prepared_url(self, path: str, query: Mapping[str, str] | None) -> tuple[str, str]:
        """requests' preparation of the URL of ``path`` and ``query``, and the path it sends,
        done once per URL."""
        key = (path, tuple(query.items()) if query else ())
        known = self._urls.get(key)
        if known is None:
            prepared = PreparedRequest()
            try:
                prepared.prepare_url(self.url(path), query)
            except (requests.exceptions.RequestException, ValueError) as e:
                raise InvalidInputError("path", f"{path!r} is not a valid URL path") from e
            url = str(prepared.url)
            full = urllib.parse.urlsplit(url).path
            base = urllib.parse.urlsplit(self.base_url).path
            known = (url, "/" + full[len(base) :] if full.startswith(base) else full)
            if len(self._urls) >= MAX_KEPT_URLS:
                self._urls.clear()
            self._urls[key] = known
        return known

    def prepare(
        self,
        pool: PoolKind,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> PreparedRequest:
        """A copy of the pool's template with this request's own parts, for ``Session.send``;
        InvalidInputError names a header that cannot be sent."""
        problem = self._base_header_problem
        if problem is None and headers:
            problem = next(((p, n) for n, v in headers.items() if (p := check_header(n, v))), None)
        if problem is not None:
            raise header_error(problem[0], f"{method} {self.sent_path(path)}", problem[1])
        template = self._templates[pool]
        prepared = template.copy()
        # copy() shares the template's hook lists: a hook registered below must stay this
        # request's.
        prepared.hooks = {event: list(hooks) for event, hooks in template.hooks.items()}
        prepared.prepare_method(method)
        prepared.url = self._prepared_url(path, query)[0]
        if headers:
            prepared.headers.update(headers)
        prepared.prepare_body(body, None)
        cookies = self.sessions[pool].cookies
        if cookies:
            jar = merge_cookies(RequestsCookieJar(), cookies)  # type: ignore[no-untyped-call]
            prepared.prepare_cookies(jar)
        else:  # what prepare_cookies makes of an empty jar, without its cookie lookup
            prepared._cookies = RequestsCookieJar()  # type: ignore[attr-defined]
        prepared.prepare_auth(self._auth)
        return prepared

    def send(
        self,
        pool: PoolKind,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        allow_redirects: bool = True,
    ) -> HttpResponse:
        """Send one HTTP attempt and return its answer, whatever the status; a failure is an
        APITimeoutError, APIConnectionError, InvalidInputError (a header) or ClientClosedError."""
        if self.closed:
            raise ClientClosedError(f"The client is closed; cannot send {method} {path}.")
        what = f"{method} {self.sent_path(path)}"
        session = self.sessions[pool]
        prepared = self.prepare(pool, method, path, body=body, query=query, headers=headers)
        limit = self.max_answer_bytes
        if allow_redirects:
            prepared.register_hook("response", self._redirect_body)  # type: ignore[no-untyped-call]
        started = time.monotonic()
        attempt = DEADLINES.start(timeout.deadline)
        answer: requests.Response | None = None
        try:
            answer = session.send(
                prepared,
                timeout=(timeout.connect, timeout.read),
                allow_redirects=allow_redirects,
                proxies=self.proxies,
                verify=self.verify,
                cert=self._cert,
                stream=True,
            )
            attempt.attach(answer.raw.connection if is_urllib3(answer.raw) else None)
            content = read_capped(answer, limit, what)
            if attempt.expired:  # a body without a length ends when its socket is shut down
                raise _deadline_error(what, timeout, time.monotonic() - started)
        except requests.exceptions.TooManyRedirects as e:
            raise APIConnectionError(
                f"Connection error on {what}: more than {session.max_redirects} redirects"
            ) from e
        except (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema) as e:
            raise APIConnectionError(
                f"Connection error on {what}: a redirect led to an invalid URL"
            ) from e
        except UnicodeEncodeError as e:  # a header the auth handler added after the checks
            raise header_error("latin-1", what) from e
        except ResponseTooLargeError:
            if answer is not None:
                answer.close()
            raise
        except TRANSPORT_ERRORS as e:
            elapsed = time.monotonic() - started
            error: APIConnectionError
            if self._closed:
                error = ClientClosedError(f"The client was closed during {what}.", body=None)
            elif attempt.expired:
                error = _deadline_error(what, timeout, elapsed)
            else:
                error = connection_failure(
                    e,
                    what=what,
                    base_url=self.base_url,
                    timeouts=(timeout.connect, timeout.read),
                    elapsed=elapsed,
                )
            raise error from low_level_cause(e)
        finally:
            DEADLINES.end(attempt)
        if logger.isEnabledFor(logging.DEBUG):
            ms = (time.monotonic() - started) * 1000
            logger.debug("%s -> %s in %.1f ms", what, answer.status_code, ms)
        return HttpResponse(
            answer.status_code, answer.headers, content, json_loads=self._json_loads
        )

    def abort(self, pools: Collection[PoolKind] | None = None) -> None:
        """Shut down the sockets of ``pools`` (default: all) of the own sessions, failing requests
        in flight."""
        if not self._own_sessions:
            return
        for kind in pools if pools is not None else list(PoolKind):
            for adapter in self.sessions[kind].adapters.values():
                if isinstance(adapter, PoolAdapter):
                    adapter.abort_all()

    def close(self) -> None:
        """Abort requests in flight, close the own sessions; later sends fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if not self._own_sessions:
            return
        self.abort()
        for session in self.sessions.values():
            session.close()

    def default_headers(self) -> dict[str, str]:
        """The headers sent on every request (before the per-request ones), for inspection."""
        return dict(self._base_headers)


def _deadline_error(what: str, timeout: Timeout, elapsed: float) -> APITimeoutError:
    return APITimeoutError(
        f"Request timed out after {elapsed:.1f}s: {what} did not get its whole answer within "
        f"the attempt's deadline of {timeout.deadline:g}s (connect, headers and body).",
        elapsed=elapsed,
    )
