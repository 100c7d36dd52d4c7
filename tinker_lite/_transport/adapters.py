"""requests' extension points, as tinker_lite uses them: the pool adapter and the credential.

:class:`PoolAdapter` is requests' ``HTTPAdapter`` sized to one pool kind, whose connections
``close()`` can abort; :class:`ServiceAuth` is a requests auth handler that sends the service
credential (``X-API-Key``), re-sends once after a 401 it could refresh (as requests' digest
auth does) and keeps the credential off a redirect to another host.
"""

from __future__ import annotations

import socket
import threading
import urllib.parse
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Literal

import requests
import requests.adapters
import requests.auth
import requests.exceptions
import requests.utils
import urllib3
import urllib3.connectionpool
from requests.models import PreparedRequest

from tinker_lite._errors import InvalidInputError

__all__ = [
    "MAX_KEPT_URLS",
    "PoolAdapter",
    "ServiceAuth",
    "check_header",
    "header_error",
    "pool_session",
    "session_auth",
]

# How many prepared request URLs (and origins) are remembered: a few fixed paths, plus ids.
MAX_KEPT_URLS = 256


def check_header(name: object, value: object) -> Literal["form", "latin-1"] | None:
    """What is wrong with a header for the wire (requests' own check, then latin-1), or None."""
    if not isinstance(name, str) or not isinstance(value, str):
        return "form"
    try:
        requests.utils.check_header_validity((name, value))
    except requests.exceptions.InvalidHeader:
        return "form"
    if name.endswith("\n") or value.endswith("\n"):  # older requests let a final \n pass
        return "form"
    if not value.isascii():
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            return "latin-1"
    return None


def header_error(problem: Literal["form", "latin-1"], request: str) -> InvalidInputError:
    if problem == "latin-1":
        return InvalidInputError("headers", f"{request}: a header value is not latin-1 text")
    return InvalidInputError(
        "headers",
        f"{request}: a header name or value is not a string or holds a line break, "
        "leading whitespace or a reserved character",
        "check default_headers and the CLOUDFLARE_ACCESS_* variables for a stray newline",
    )


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


class PoolAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter sized to one pool kind, whose open connections close() can abort.

    urllib3's own retries stay off (requests' default): tinker_lite's retry layer is the only
    one (docs/protocol.rst §6.1). Without a proxy, the pool of an origin and the path of a URL are
    looked up once and remembered (a transport sends to one origin, on a few paths), as requests
    invites an adapter to do by overriding these two methods.
    """

    def __init__(self, maxsize: int) -> None:
        self.tracker = _ConnectionTracker()
        self._routes: dict[tuple[str, object, object], Any] = {}
        self._paths: dict[str, str] = {}
        super().__init__(pool_connections=4, pool_maxsize=maxsize, pool_block=False)

    def get_connection_with_tls_context(
        self,
        request: PreparedRequest,
        verify: bool | str | None,
        proxies: Mapping[str, str] | None = None,
        cert: Any = None,
    ) -> Any:
        if proxies:
            return super().get_connection_with_tls_context(request, verify, proxies, cert)
        url = str(request.url)
        key = (url[: url.find("/", url.find("//") + 2)], verify, cert)
        pool = self._routes.get(key)
        if pool is None or pool.pool is None:  # not looked up yet, or closed since
            pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
            if len(self._routes) >= MAX_KEPT_URLS:
                self._routes.clear()
            self._routes[key] = pool
        return pool

    def request_url(self, request: PreparedRequest, proxies: Mapping[str, str] | None) -> str:
        if proxies:
            return super().request_url(request, proxies)
        url = str(request.url)
        path = self._paths.get(url)
        if path is None:
            path = super().request_url(request, proxies)
            if len(self._paths) >= MAX_KEPT_URLS:
                self._paths.clear()
            self._paths[url] = path
        return path

    def close(self) -> None:
        super().close()
        self._routes.clear()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        _track_connections(self.poolmanager, self.tracker)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> urllib3.PoolManager:
        known = proxy in self.proxy_manager
        manager: urllib3.PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not known:
            _track_connections(manager, self.tracker)
        return manager


_API_KEY_HEADER = "X-API-Key"


class ServiceAuth(requests.auth.AuthBase):
    """The service credential as a requests auth handler (``X-API-Key``).

    ``current()`` gives the credential of each request (none: the header is left off); a request
    that names its own ``X-API-Key`` keeps it. After a 401 to a request it authenticated,
    ``reauth(rejected)`` may refresh the credential: the request is then sent once more with the
    new one (docs/protocol.rst §8.3, JWT refresh), as requests' own digest auth re-sends after a
    401. A redirect to another host never carries the credential (requests drops ``Authorization``
    there; this does the same for ``X-API-Key``, by the session's ``should_strip_auth``).
    ``inner`` (the session's auth or netrc's Basic credentials) is applied first.
    """

    def __init__(
        self,
        current: Callable[[], str | None],
        reauth: Callable[[str], bool] | None,
        inner: Callable[[PreparedRequest], PreparedRequest] | None,
        strips: Callable[[str, str], bool],
    ) -> None:
        self._current = current
        self._reauth = reauth
        self._inner = inner
        self.strips = strips

    def __call__(self, r: PreparedRequest) -> PreparedRequest:
        if self._inner is not None:
            r = self._inner(r)
        if _API_KEY_HEADER in r.headers:
            credential = None  # the caller's own (e.g. auth/token is sent with the API key)
        else:
            credential = self._current() or None
            if credential:
                problem = check_header(_API_KEY_HEADER, credential)
                if problem is not None:
                    raise header_error(problem, f"{r.method} {r.path_url}")
                r.headers[_API_KEY_HEADER] = credential
        r.register_hook("response", _AnswerHook(self, credential))  # type: ignore[no-untyped-call]
        return r

    def refreshed(self, rejected: str) -> str | None:
        """A new credential after ``rejected`` was answered 401, or None."""
        if self._reauth is None or not self._reauth(rejected):
            return None
        fresh = self._current() or None
        return fresh if fresh and fresh != rejected else None


class _AnswerHook:
    """The response hook of one request authenticated by :class:`ServiceAuth`."""

    __slots__ = ("auth", "credential", "resent")

    def __init__(self, auth: ServiceAuth, credential: str | None) -> None:
        self.auth = auth
        self.credential = credential
        self.resent = False

    def __call__(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        if r.is_redirect:
            sent = r.request
            target = urllib.parse.urljoin(str(r.url), r.headers["location"])
            if self.auth.strips(str(sent.url), target):
                sent.headers.pop(_API_KEY_HEADER, None)
            return r
        if (
            r.status_code != 401
            or self.credential is None
            or self.resent
            or r.request.headers.get(_API_KEY_HEADER) != self.credential
        ):
            return r
        self.resent = True
        fresh = self.auth.refreshed(self.credential)
        if fresh is None:
            return r
        problem = check_header(_API_KEY_HEADER, fresh)
        if problem is not None:
            raise header_error(problem, f"{r.request.method} {r.request.path_url}")
        r.content  # noqa: B018 - read the answer so its connection goes back to the pool
        r.close()
        again = r.request.copy()
        again.headers[_API_KEY_HEADER] = fresh
        resent: requests.Response = r.connection.send(again, **kwargs)
        resent.history.append(r)
        resent.request = again
        return resent


def pool_session(maxsize: int) -> requests.Session:
    """A requests session whose adapters keep up to ``maxsize`` connections per host."""
    session = requests.Session()
    for prefix in ("https://", "http://"):
        session.mount(prefix, PoolAdapter(maxsize))
    return session


def session_auth(auth: Any) -> Callable[[PreparedRequest], PreparedRequest]:
    """A session's ``auth`` as requests applies it: a (user, password) pair is Basic auth."""
    if isinstance(auth, tuple) and len(auth) == 2:
        return requests.auth.HTTPBasicAuth(*auth)
    return auth  # type: ignore[no-any-return]
