"""requests' extension points as tinker_lite uses them: the pool adapter and the credentials
(docs/architecture.rst, "The transport")."""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
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
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import CREDENTIAL_HEADERS

__all__ = [
    "DEADLINES",
    "MAX_KEPT_URLS",
    "Attempt",
    "Deadlines",
    "PoolAdapter",
    "ServiceAuth",
    "check_header",
    "header_error",
    "pool_session",
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


def header_error(
    problem: Literal["form", "latin-1"], request: str, name: object = None
) -> InvalidInputError:
    """The error for a header that cannot be sent, naming the header (never its value)."""
    header = f"the header {name!r}" if isinstance(name, str) else "a header"
    if problem == "latin-1":
        return InvalidInputError("headers", f"{request}: {header}'s value is not latin-1 text")
    return InvalidInputError(
        "headers",
        f"{request}: {header} is not a string or holds a line break, leading whitespace or a "
        "reserved character",
        "check default_headers and the CLOUDFLARE_ACCESS_* variables for a stray newline",
    )


def _shut(conn: Any) -> bool:
    """Shut a connection's socket down, so a thread blocked reading it returns at once; False
    when it has no socket (yet)."""
    sock = getattr(conn, "sock", None)
    if sock is None:
        return False
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    return True


# ---------------------------------------------------------------------------------------------
# The overall deadline of one attempt


class Attempt:
    """One HTTP attempt under a deadline for connect, headers and body together (a read timeout
    bounds each read only): the connection it uses, and whether time ran out."""

    __slots__ = ("_conn", "_owner", "cancelled", "deadline", "expired", "outer")

    def __init__(self, owner: Deadlines, seconds: float, outer: Attempt | None) -> None:
        self._owner = owner
        self.deadline = time.monotonic() + seconds
        self.outer = outer  # the attempt this one is nested in (a JWT refreshed after a 401)
        self._conn: Any = None
        self.cancelled = False
        self.expired = False

    def attach(self, conn: Any) -> None:
        """The attempt now reads from ``conn`` (a redirect or a re-sent 401 moves it on)."""
        with self._owner.lock:
            self._conn = conn
            if self.expired and not _shut(conn):
                self._owner.recheck(self)

    def detach(self, conn: Any) -> None:
        """``conn`` went back to its pool: it is no longer this attempt's to shut down."""
        with self._owner.lock:
            if self._conn is conn:
                self._conn = None

    def _expire(self) -> bool:
        """Past the deadline: shut the connection down (False: nothing to shut down yet)."""
        self.expired = True
        return self._conn is not None and _shut(self._conn)


class Deadlines:
    """One thread, shared by every transport, that shuts down the sockets of attempts past their
    deadline; it runs only while attempts are in flight (and a second more)."""

    _LINGER_S = 1.0
    _RETRY_S = 0.05

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._heap: list[tuple[float, int, Attempt]] = []
        self._order = itertools.count()
        self._live = 0
        self._thread: threading.Thread | None = None
        self._local = threading.local()

    def start(self, seconds: float) -> Attempt:
        """An attempt of this thread that must end within ``seconds``."""
        attempt = Attempt(self, seconds, self.current())
        with self.lock:
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (attempt.deadline, next(self._order), attempt))
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tinker-lite-deadline", daemon=True
                )
                self._thread.start()
            elif earliest is None or attempt.deadline < earliest:
                self._wake.notify()
        self._local.attempt = attempt
        return attempt

    def end(self, attempt: Attempt) -> None:
        """The attempt is over (answered or failed): its connection is never shut down now."""
        self._local.attempt = attempt.outer
        with self.lock:
            if not attempt.cancelled:
                attempt.cancelled = True
                attempt._conn = None
                self._live -= 1
                # Keep the heap small when attempts end long before their deadlines.
                if len(self._heap) > 64 and len(self._heap) > 4 * self._live:
                    self._heap = [item for item in self._heap if not item[2].cancelled]
                    heapq.heapify(self._heap)

    def recheck(self, attempt: Attempt) -> None:
        """Look at an expired attempt again shortly (its connection has no socket yet); the
        lock is held."""
        entry = (time.monotonic() + self._RETRY_S, next(self._order), attempt)
        heapq.heappush(self._heap, entry)
        self._wake.notify()

    def current(self) -> Attempt | None:
        """The attempt this thread is making, if any."""
        attempt: Attempt | None = getattr(self._local, "attempt", None)
        return attempt

    def _run(self) -> None:
        with self.lock:
            try:
                self._watch()
            finally:
                self._thread = None

    def _watch(self) -> None:
        """Expire attempts as their deadlines pass; return a second after the last one ended."""
        idle_since: float | None = None
        while True:
            now = time.monotonic()
            heap = self._heap
            while heap and (heap[0][2].cancelled or heap[0][0] <= now):
                _, _, attempt = heapq.heappop(heap)
                if not attempt.cancelled and not attempt._expire():
                    self.recheck(attempt)  # still connecting, or between two connections
            if self._live == 0:
                heap.clear()  # only ended attempts are left
                if idle_since is None:
                    idle_since = now
                elif now - idle_since >= self._LINGER_S:
                    return
                self._wake.wait(self._LINGER_S)
                continue
            idle_since = None
            # Looked at again every second at least: it ends soon after the last attempt.
            until = heap[0][0] - now if heap else self._LINGER_S  # expired ones still live
            self._wake.wait(min(max(0.0, until), self._LINGER_S))


DEADLINES = Deadlines()
"""The deadlines of every attempt of this process."""


def _track_connections(manager: urllib3.PoolManager, adapter: PoolAdapter) -> None:
    """Make ``manager``'s pools register every connection they open with ``adapter``, and give
    each connection an attempt uses to that attempt's deadline."""

    class Tracked(urllib3.connectionpool.HTTPConnectionPool):
        """A pool whose connections are tracked and given to the attempt that uses them."""

        def _new_conn(self) -> Any:
            conn = super()._new_conn()
            adapter.track(conn)
            return conn

        def _get_conn(self, timeout: float | None = None) -> Any:
            conn = super()._get_conn(timeout)
            attempt = DEADLINES.current()
            if attempt is not None:
                attempt.attach(conn)
            return conn

        def _put_conn(self, conn: Any) -> None:
            attempt = DEADLINES.current()
            if attempt is not None:
                attempt.detach(conn)
            super()._put_conn(conn)

    # HTTPS: urllib3's HTTPS pool, with the same overrides first in its method order.
    class TrackedHTTPS(Tracked, urllib3.connectionpool.HTTPSConnectionPool):
        pass

    # A SOCKS manager has pool classes of its own (its connections are not tracked).
    if type(manager) in (urllib3.PoolManager, urllib3.ProxyManager):
        manager.pool_classes_by_scheme = {
            "http": Tracked,
            "https": TrackedHTTPS,
        }


class PoolAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter sized to one pool kind, whose open connections close() can abort."""

    def __init__(self, maxsize: int) -> None:
        self._lock = threading.Lock()
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()  # every one it opened
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

    def track(self, conn: Any) -> None:
        with self._lock:
            self._connections.add(conn)

    def abort_all(self) -> None:
        """Shut down the sockets of every connection this adapter opened."""
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            _shut(conn)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        _track_connections(self.poolmanager, self)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> urllib3.PoolManager:
        known = proxy in self.proxy_manager
        manager: urllib3.PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not known:
            _track_connections(manager, self)
        return manager


_API_KEY_HEADER = "X-API-Key"


class ServiceAuth(requests.auth.AuthBase):
    """Every credential of the connection (``X-API-Key`` from ``current()``, the ``secrets``
    headers) as one requests auth handler (docs/architecture.rst, "The transport")."""

    def __init__(
        self,
        current: Callable[[], str | None],
        reauth: Callable[[str], bool] | None,
        inner: Callable[[PreparedRequest], PreparedRequest] | None,
        strips: Callable[[str, str], bool],
        secrets: Mapping[str, str] | None = None,
    ) -> None:
        self._current = current
        self._reauth = reauth
        self._inner = inner
        self.strips = strips
        self.secrets = dict(secrets or {})
        self.stripped = CREDENTIAL_HEADERS | {name.lower() for name in self.secrets}
        self._checked: str | None = None  # the last credential found fit to send

    @tolerant_repr
    def __repr__(self) -> str:
        return f"ServiceAuth(headers={sorted(self.secrets)!r})"

    def __call__(self, r: PreparedRequest) -> PreparedRequest:
        if self._inner is not None:
            r = self._inner(r)
        for name, value in self.secrets.items():
            if name not in r.headers:
                r.headers[name] = value
        if _API_KEY_HEADER in r.headers:
            credential = None  # the caller's own (e.g. auth/token is sent with the API key)
        else:
            credential = self._current() or None
            if credential:
                if credential != self._checked:
                    problem = check_header(_API_KEY_HEADER, credential)
                    if problem is not None:
                        raise header_error(problem, f"{r.method} {r.path_url}", _API_KEY_HEADER)
                    self._checked = credential
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
                for name in [n for n in sent.headers if n.lower() in self.auth.stripped]:
                    del sent.headers[name]
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
            raise header_error(problem, f"{r.request.method} {r.request.path_url}", _API_KEY_HEADER)
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
