"""The session holder shared by every client of one ServiceClient.

A :class:`SessionHolder` resolves the settings (explicit arguments > environment > defaults;
WIRE.md §P.3: ``api_key=`` wins over ``TINKER_API_KEY``), owns the HTTP transport, the poller,
the heartbeat thread and the telemetry, and runs the start-up sequence (WIRE.md §P.10, golden-0.38):

1. ``POST /api/v1/client/config {"sdk_version"}`` (404 or any error: built-in defaults);
2. when ``pjwt_auth_enabled``: ``POST /api/v1/auth/token {}`` with the API key; the JWT is then
   sent in the same ``X-API-Key`` header, refreshed before its ``exp`` and once after a 401;
3. unless session-less: ``POST /api/v1/create_session`` and a heartbeat every 10 s.

``close()`` (also ``with`` and interpreter exit, WIRE.md §P.12) stops the heartbeat, flushes
telemetry, finishes the session (``POST /api/v1/sessions/{id}/finish``; 404 ignored) and joins
every thread it started.

Threading: every public method is safe to call from many threads at once (e.g. 400 concurrent
samples). Background threads (heartbeat, telemetry, polling) hold no reference to the holder, so
an unclosed holder can still be garbage-collected; its threads are then stopped without sending
anything.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import logging
import math
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, TypeVar

from tinker_lite import _wire, types
from tinker_lite._errors import (
    APIResponseValidationError,
    InvalidInputError,
    NotFoundError,
    TinkerError,
    WireFormatError,
)
from tinker_lite._futures import Poller
from tinker_lite._http import (
    DEFAULT_POOL_SIZES,
    DEFAULT_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    JSON,
    RETRIEVE_FUTURE_TIMEOUT,
    ClientClosedError,
    HttpResponse,
    PoolKind,
    Timeout,
    Transport,
    decode_json_body,
    is_loopback_url,
    redact,
    register_secret,
)
from tinker_lite._retry import (
    DEFAULT_RETRY_POLICY,
    NO_RETRIES,
    RetryPolicy,
    parse_retry_after,
    send_with_retries,
    with_operation_retries,
)
from tinker_lite._version import WIRE_SDK_VERSION
from tinker_lite.telemetry import Telemetry, is_telemetry_enabled

__all__ = [
    "DEFAULT_BASE_URL",
    "FinishReason",
    "SampleGate",
    "SessionHolder",
    "Settings",
    "WireMode",
    "jwt_expiry",
    "resolve_settings",
    "sample_gate_for",
]

logger = logging.getLogger("tinker_lite.session")

T = TypeVar("T")

DEFAULT_BASE_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod"

ENV_API_KEY = "TINKER_API_KEY"
ENV_BASE_URL = "TINKER_BASE_URL"
ENV_CF_CLIENT_ID = "CLOUDFLARE_ACCESS_CLIENT_ID"
ENV_CF_CLIENT_SECRET = "CLOUDFLARE_ACCESS_CLIENT_SECRET"
ENV_TAGS = "TINKER_TAGS"
ENV_PROJECT_ID = "TINKER_PROJECT_ID"
ENV_SDK_VERSION = "TINKER_LITE_SDK_VERSION"
ENV_STALL_TIMEOUT = "TINKER_LITE_STALL_TIMEOUT"

DEFAULT_STALL_TIMEOUT = 300.0
HEARTBEAT_INTERVAL = 10.0
HEARTBEAT_WARN_AFTER = 120.0

CLIENT_CONFIG_PATH = "/api/v1/client/config"
AUTH_TOKEN_PATH = "/api/v1/auth/token"
CREATE_SESSION_PATH = "/api/v1/create_session"
HEARTBEAT_PATH = "/api/v1/session_heartbeat"

WireMode = Literal["auto", "protobuf", "json"]
FinishReason = Literal["success", "errored", "interrupted"]

# Start-up requests (client config, auth token) are retried at most twice.
_STARTUP_MAX_RETRIES = 2
# WIRE.md §5.2: the operation-level (Layer B) retry budget of a submit.
OPERATION_BUDGET_S = 300.0

_warned_insecure_urls: set[str] = set()
_warned_lock = threading.Lock()


# ---------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True, repr=False)
class Settings:
    """Resolved connection settings of one holder (the API key never shows in ``repr``)."""

    base_url: str
    api_key: str | None
    cloudflare_headers: Mapping[str, str] = field(default_factory=dict)
    project_id: str | None = None
    tags: tuple[str, ...] = ()
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    wire: WireMode = "auto"
    sdk_version: str = WIRE_SDK_VERSION
    telemetry: bool = True
    verify: bool | str = True

    def __repr__(self) -> str:
        return (
            f"Settings(base_url={self.base_url!r}, api_key={'***' if self.api_key else None}, "
            f"project_id={self.project_id!r}, tags={self.tags!r}, "
            f"stall_timeout={self.stall_timeout!r}, wire={self.wire!r}, "
            f"sdk_version={self.sdk_version!r}, telemetry={self.telemetry!r}, "
            f"verify={self.verify!r})"
        )


def _nonempty(value: str | None) -> str | None:
    return value if value else None


def _parse_stall_timeout(value: object, source: str) -> float:
    if isinstance(value, bool):
        raise InvalidInputError(source, f"must be a positive number of seconds, got {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidInputError(
            source, f"must be a positive number of seconds, got {value!r}"
        ) from None
    if math.isnan(number) or number <= 0:
        raise InvalidInputError(source, f"must be a positive number of seconds, got {value!r}")
    return number


def _parse_tags(raw: str) -> tuple[str, ...]:
    # WIRE.md §1.2: comma-separated and de-duplicated (kept in first-seen order; empty dropped).
    seen: dict[str, None] = {}
    for tag in raw.split(","):
        tag = tag.strip()
        if tag:
            seen.setdefault(tag, None)
    return tuple(seen)


def resolve_settings(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    project_id: str | None = None,
    tags: Sequence[str] | None = None,
    stall_timeout: float | None = None,
    wire: str = "auto",
    verify: bool | str = True,
    telemetry: bool | None = None,
    sdk_version: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting: explicit argument > environment variable > default.

    Raises :class:`~tinker_lite.InvalidInputError` naming the argument or environment variable
    at fault (an API key with whitespace, a missing key for a remote service, a bad stall
    timeout, an unknown ``wire`` mode, a base URL that is not http(s)).
    """
    env = os.environ if environ is None else environ

    if _nonempty(base_url) is not None:
        url, url_source = str(base_url), "base_url"
    elif _nonempty(env.get(ENV_BASE_URL)) is not None:
        url, url_source = env[ENV_BASE_URL], ENV_BASE_URL
    else:
        url, url_source = DEFAULT_BASE_URL, "base_url"
    url = url.strip()
    if not url.lower().startswith(("http://", "https://")):
        raise InvalidInputError(
            url_source,
            f"must be an http:// or https:// URL, got {url!r}",
            "base_url='local://' is resolved by ServiceClient",
        )
    loopback = is_loopback_url(url)
    if url.lower().startswith("http://") and not loopback:
        with _warned_lock:
            first = url not in _warned_insecure_urls
            _warned_insecure_urls.add(url)
        if first:
            logger.warning(
                "Connecting to %s over plain http://: the API key travels unencrypted", url
            )

    if api_key is not None:
        key, key_source = api_key, "api_key"
    else:
        key, key_source = env.get(ENV_API_KEY, ""), ENV_API_KEY
    key_or_none = _nonempty(key)
    if key_or_none is not None and any(ch.isspace() for ch in key_or_none):
        raise InvalidInputError(
            key_source, "the API key contains whitespace", "check for a stray newline or space"
        )
    if key_or_none is None and not loopback:
        raise InvalidInputError(
            "api_key",
            f"no API key for {url}",
            f"pass api_key=... or set {ENV_API_KEY}",
        )
    register_secret(key_or_none)

    cf_headers: dict[str, str] = {}
    cf_id = _nonempty(env.get(ENV_CF_CLIENT_ID))
    cf_secret = _nonempty(env.get(ENV_CF_CLIENT_SECRET))
    if cf_id:
        cf_headers["CF-Access-Client-Id"] = cf_id
    if cf_secret:
        register_secret(cf_secret)
        cf_headers["CF-Access-Client-Secret"] = cf_secret

    if stall_timeout is not None:
        stall = _parse_stall_timeout(stall_timeout, "stall_timeout")
    elif _nonempty(env.get(ENV_STALL_TIMEOUT)) is not None:
        stall = _parse_stall_timeout(env[ENV_STALL_TIMEOUT], ENV_STALL_TIMEOUT)
    else:
        stall = DEFAULT_STALL_TIMEOUT

    if wire not in ("auto", "protobuf", "json"):
        raise InvalidInputError("wire", f"must be 'auto', 'protobuf' or 'json', got {wire!r}")

    if tags is not None:
        if isinstance(tags, str):
            raise InvalidInputError("tags", "must be a list of strings, not a string")
        resolved_tags = tuple(dict.fromkeys(str(t) for t in tags))
    elif ENV_TAGS in env:
        resolved_tags = _parse_tags(env[ENV_TAGS])
    else:
        resolved_tags = ()

    # requests treats any false value (0, "") as "do not verify": only False may say so.
    if not isinstance(verify, (bool, str)) or (isinstance(verify, str) and not verify.strip()):
        raise InvalidInputError(
            "verify",
            f"must be True, False or the path of a CA bundle, got {verify!r}",
            "keep the default (True); verify=False turns TLS verification off, with a warning",
        )
    if verify is False:
        logger.warning("TLS certificate verification is disabled (verify=False) for %s", url)

    return Settings(
        base_url=url,
        api_key=key_or_none,
        cloudflare_headers=cf_headers,
        project_id=project_id if project_id is not None else _nonempty(env.get(ENV_PROJECT_ID)),
        tags=resolved_tags,
        stall_timeout=stall,
        wire=wire,  # type: ignore[arg-type]
        sdk_version=sdk_version or _nonempty(env.get(ENV_SDK_VERSION)) or WIRE_SDK_VERSION,
        telemetry=is_telemetry_enabled(env) if telemetry is None else telemetry,
        verify=verify,
    )


# ---------------------------------------------------------------------------------------------
# Credentials (API key, or a JWT obtained with it; WIRE.md §13.2)


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT in epoch seconds (the signature is not checked), or ``None``."""
    parts = token.split(".")
    if len(parts) < 2:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = _wire.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, TinkerError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, (int, float)) and not isinstance(exp, bool):
        return float(exp)
    return None


class _Credentials:
    """The credential sent as ``X-API-Key``: the API key, or a JWT refreshed before it expires."""

    def __init__(
        self,
        api_key: str | None,
        *,
        wall_clock: Callable[[], float],
        refresh_margin: float = 300.0,
        retry_pause: float = 60.0,
    ) -> None:
        self.api_key = api_key
        self._wall_clock = wall_clock
        self._refresh_margin = refresh_margin
        self._retry_pause = retry_pause
        self._lock = threading.Lock()
        self._jwt: str | None = None
        self._exp: float | None = None
        self._fetch: Callable[[], str] | None = None
        self._next_attempt = 0.0
        self._fetching = threading.local()

    def __repr__(self) -> str:
        return f"_Credentials(jwt={'***' if self._jwt else None})"

    @property
    def uses_jwt(self) -> bool:
        return self._jwt is not None

    def enable_jwt(self, fetch: Callable[[], str]) -> None:
        """Exchange the API key for a JWT now; later requests carry the JWT."""
        token = self._fetch_token(fetch)
        with self._lock:
            self._fetch = fetch
            self._install(token)

    def _fetch_token(self, fetch: Callable[[], str]) -> str:
        """Call ``fetch``; requests this thread sends meanwhile carry the API key, not the JWT."""
        self._fetching.active = True
        try:
            return fetch()
        finally:
            self._fetching.active = False

    def _install(self, token: str) -> None:
        register_secret(token)
        self._jwt = token
        self._exp = jwt_expiry(token)

    def current(self) -> str | None:
        """The credential to send now: the API key, or the JWT (refreshed before it expires)."""
        token = self._jwt
        # WIRE.md §13.2: auth/token itself is authenticated with the API key, never the JWT.
        if token is None or getattr(self._fetching, "active", False):
            return self.api_key
        exp = self._exp
        if exp is not None:
            now = self._wall_clock()
            # WIRE.md §13.2: refresh ahead of expiry (a stale JWT is answered 401).
            if exp - now <= self._refresh_margin and now >= self._next_attempt:
                self._refresh(token, force=False)
        return self._jwt

    def reauth(self, rejected: str) -> bool:
        """After a 401: fetch a new JWT (once per rejected token); True if one is available."""
        if self._fetch is None:
            return False
        self._refresh(rejected, force=True)
        return self._jwt is not None and self._jwt != rejected

    def _refresh(self, stale: str, *, force: bool) -> None:
        with self._lock:
            if self._jwt != stale or self._fetch is None:
                return
            if not force and self._wall_clock() < self._next_attempt:
                return
            try:
                token = self._fetch_token(self._fetch)
            except TinkerError as e:
                self._next_attempt = self._wall_clock() + self._retry_pause
                logger.warning("Could not refresh the access token: %s", redact(str(e)))
                return
            self._install(token)


# ---------------------------------------------------------------------------------------------
# Sampling backpressure shared by the process (WIRE.md §P.8)


THROTTLE_WARNING_INTERVAL_S = 60.0
"""How often a sampler held back by 429s logs a warning (WIRE.md §P.7)."""


class SampleGate:
    """The in-flight cap and the shared 429 back-off window of one ``(base_url, api_key)``.

    Every SamplingClient of the process talking to the same service with the same key shares
    one gate: :meth:`slot` holds one of ``limit`` in-flight places from submit until the result
    arrives; after a 429, :meth:`note_429` opens a back-off window (``Retry-After`` when given
    and <= 60 s, else 1 s) that :meth:`wait_backoff` makes every sampler respect.
    """

    def __init__(
        self,
        limit: int = 400,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if limit < 1:
            raise InvalidInputError("limit", f"must be >= 1, got {limit}")
        self._limit = limit
        self._clock = clock
        self._wall_clock = wall_clock
        self._cond = threading.Condition()
        self._in_flight = 0
        self._backoff_until = 0.0
        self._throttled_since: float | None = None
        self._last_throttle_warning: float | None = None

    def __repr__(self) -> str:
        return f"SampleGate(limit={self._limit}, in_flight={self._in_flight})"

    @property
    def limit(self) -> int:
        """The most sample requests in flight at once."""
        return self._limit

    def set_limit(self, limit: int) -> None:
        """Change the cap (e.g. from the service's ``sample_max_concurrent_requests``)."""
        if limit < 1:
            raise InvalidInputError("limit", f"must be >= 1, got {limit}")
        with self._cond:
            self._limit = limit
            self._cond.notify_all()

    @property
    def in_flight(self) -> int:
        """Sample requests holding a place now."""
        return self._in_flight

    def acquire(self, timeout: float | None = None) -> bool:
        """Take an in-flight place, waiting up to ``timeout`` s (``None``: until one frees)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._in_flight < self._limit, timeout=timeout):
                return False
            self._in_flight += 1
            return True

    def release(self) -> None:
        """Give back a place taken with :meth:`acquire`."""
        with self._cond:
            self._in_flight = max(0, self._in_flight - 1)
            self._cond.notify()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one in-flight place for the duration of the ``with`` block."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def note_429(self, headers: Mapping[str, str] | None = None) -> float:
        """Open (or extend) the back-off window after a 429; returns its length in seconds."""
        asked = parse_retry_after(headers, now=self._wall_clock())
        delay = asked if asked is not None and 0 < asked <= 60 else 1.0
        now = self._clock()
        with self._cond:
            self._backoff_until = max(self._backoff_until, now + delay)
            if self._throttled_since is None:
                self._throttled_since = now
            # WIRE.md §P.7: a wait says why it waits, at most once a minute.
            warn = now - self._throttled_since >= THROTTLE_WARNING_INTERVAL_S and (
                self._last_throttle_warning is None
                or now - self._last_throttle_warning >= THROTTLE_WARNING_INTERVAL_S
            )
            if warn:
                self._last_throttle_warning = now
                throttled_for = now - self._throttled_since
        if warn:
            logger.warning(
                "Sampling has been held back by the service (HTTP 429) for %.0f s; "
                "%d sample requests in flight. Waiting and re-sending.",
                throttled_for,
                self._in_flight,
            )
        return delay

    def note_accepted(self) -> None:
        """Record that the service accepted a sample request: any 429 episode is over."""
        with self._cond:
            self._throttled_since = None
            self._last_throttle_warning = None

    def backoff_remaining(self) -> float:
        """Seconds left in the back-off window (0 when sampling may proceed)."""
        return max(0.0, self._backoff_until - self._clock())

    def wait_backoff(self, sleep: Callable[[float], object] = time.sleep) -> float:
        """Sleep until the back-off window has passed; returns the seconds waited."""
        waited = 0.0
        while True:
            remaining = self.backoff_remaining()
            if remaining <= 0:
                return waited
            sleep(remaining)
            waited += remaining


_GATES: weakref.WeakValueDictionary[tuple[str, str], SampleGate] = weakref.WeakValueDictionary()
_GATES_LOCK = threading.Lock()


def sample_gate_for(base_url: str, api_key: str | None, *, limit: int = 400) -> SampleGate:
    """The process-wide :class:`SampleGate` of ``(base_url, api_key)`` (created on first use)."""
    digest = hashlib.sha256((api_key or "").encode("utf-8")).hexdigest()
    key = (base_url.rstrip("/"), digest)
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = SampleGate(limit)
            _GATES[key] = gate
        return gate


# ---------------------------------------------------------------------------------------------
# Heartbeat


class _Heartbeat:
    """Sends ``session_heartbeat`` every ``interval`` s on its own thread (WIRE.md §10)."""

    def __init__(
        self,
        transport: Transport,
        session_id: str,
        *,
        interval: float = HEARTBEAT_INTERVAL,
        warn_after: float = HEARTBEAT_WARN_AFTER,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self._transport = transport
        self._session_id = session_id
        self._interval = interval
        self._warn_after = warn_after
        self._clock = clock
        self._stop = threading.Event()
        self._wait = wait if wait is not None else self._stop.wait
        self._body = _wire.dumps(types.SessionHeartbeatRequest(session_id=session_id))
        self.beats = 0
        self.failures = 0
        self.expired = False
        self._thread = threading.Thread(target=self._run, name="tinker-lite-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def _run(self) -> None:
        last_success = self._clock()
        next_due = last_success + self._interval
        while True:
            if self._wait(max(0.0, next_due - self._clock())) or self._stop.is_set():
                return
            problem = self._beat()
            if problem is None:
                last_success = self._clock()
            elif problem == "expired":
                return
            else:
                self.failures += 1
                failing_for = self._clock() - last_success
                if failing_for > self._warn_after:
                    logger.warning(
                        "Session heartbeat failed for %.0f seconds for session %s. Last exception:"
                        " %s.\nYour connection may be unreliable or Tinker is down. If this "
                        "persists, the session will be terminated.",
                        failing_for,
                        self._session_id,
                        problem,
                    )
            # Fixed-rate schedule: a slow heartbeat does not shift the following ones.
            next_due += self._interval
            now = self._clock()
            next_due = max(next_due, now)

    def _beat(self) -> str | None:
        try:
            resp = self._transport.send(
                PoolKind.SESSION,
                "POST",
                HEARTBEAT_PATH,
                body=self._body,
                timeout=HEARTBEAT_TIMEOUT,
            )
        except ClientClosedError:
            self._stop.set()
            return "expired"
        except TinkerError as e:
            return f"{type(e).__name__}: {redact(str(e))}"
        if 200 <= resp.status < 300:
            self.beats += 1
            return None
        if resp.status == 410:
            self.expired = True
            logger.warning(
                "Session %s has expired on the service (HTTP 410); heartbeats stopped. "
                "Create a new ServiceClient to continue.",
                self._session_id,
            )
            return "expired"
        return f"HTTP {resp.status}"


# ---------------------------------------------------------------------------------------------
# The holder


def _shutdown_components(
    heartbeat: list[_Heartbeat | None],
    telemetry: list[Telemetry | None],
    poller: Poller,
    transport: Transport,
) -> None:
    """Stop every thread of an abandoned holder without sending anything."""
    hb = heartbeat[0]
    if hb is not None:
        hb.stop(timeout=1.0)
    tel = telemetry[0]
    if tel is not None:
        tel.close(timeout=0.0)
    transport.close()
    poller.close(timeout=1.0)
    if tel is not None:
        # Closing the transport ends any send in flight, so the thread now exits promptly.
        tel.join(timeout=1.0)


def _atexit_close(ref: weakref.ref[SessionHolder]) -> None:
    holder = ref()
    if holder is not None:
        try:
            holder.close()
        except Exception:  # pragma: no cover - never fail interpreter exit
            logger.debug("closing at exit failed", exc_info=True)


class SessionHolder:
    """Connection, session and background machinery shared by the clients of one ServiceClient.

    Arguments beyond the settings of :func:`resolve_settings`: ``user_metadata`` is sent with
    ``create_session``; ``create_session=False`` makes a session-less holder (REST use);
    ``lazy=True`` delays the start-up requests until first use; ``poll_threads`` caps the polling
    threads (default: the sampling in-flight cap + 32); ``heartbeat_interval`` is the heartbeat
    period; ``request_timeout`` is the timeout of requests sent without one of their own and
    ``poll_timeout`` the one of each ``retrieve_future`` long poll. ``sleep``, ``rand``,
    ``clock`` (monotonic), ``wall_clock`` (epoch) and ``heartbeat_wait`` are injectable for
    tests.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        user_metadata: Mapping[str, Any] | None = None,
        project_id: str | None = None,
        tags: Sequence[str] | None = None,
        stall_timeout: float | None = None,
        wire: str = "auto",
        verify: bool | str = True,
        telemetry: bool | None = None,
        sdk_version: str | None = None,
        create_session: bool = True,
        lazy: bool = False,
        default_headers: Mapping[str, str] | None = None,
        poll_threads: int | None = None,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
        poll_timeout: Timeout = RETRIEVE_FUTURE_TIMEOUT,
        heartbeat_interval: float = HEARTBEAT_INTERVAL,
        heartbeat_wait: Callable[[float], bool] | None = None,
        telemetry_flush_interval: float = 10.0,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        sleep: Callable[[float], object] | None = None,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = resolve_settings(
            api_key=api_key,
            base_url=base_url,
            project_id=project_id,
            tags=tags,
            stall_timeout=stall_timeout,
            wire=wire,
            verify=verify,
            telemetry=telemetry,
            sdk_version=sdk_version,
            environ=environ,
        )
        if user_metadata is not None and not isinstance(user_metadata, Mapping):
            raise InvalidInputError("user_metadata", "must be a dict of str to JSON values")
        self._user_metadata = dict(user_metadata or {})
        self._want_session = create_session
        self._retry_policy = retry_policy
        self._closing = threading.Event()
        self._sleep: Callable[[float], object] = sleep if sleep is not None else self._closing.wait
        self._rand = rand
        self._clock = clock
        self._wall_clock = wall_clock
        self._heartbeat_interval = heartbeat_interval
        self._request_timeout = request_timeout
        self._heartbeat_wait = heartbeat_wait
        self._telemetry_flush_interval = telemetry_flush_interval
        self._user_poll_threads = poll_threads

        self._credentials = _Credentials(self.settings.api_key, wall_clock=wall_clock)
        headers = dict(self.settings.cloudflare_headers)
        headers.update(default_headers or {})
        sizes = dict(DEFAULT_POOL_SIZES)
        if poll_threads is not None:
            sizes[PoolKind.RETRIEVE_PROMISE] = max(sizes[PoolKind.RETRIEVE_PROMISE], poll_threads)
        self._transport = Transport(
            self.settings.base_url,
            headers=headers,
            auth=self._credentials.current,
            reauth=self._credentials.reauth,
            pool_sizes=sizes,
            verify=self.settings.verify,
        )
        self.sample_gate = sample_gate_for(self.settings.base_url, self.settings.api_key)
        self._poller = Poller(
            self._transport,
            max_workers=poll_threads or self.sample_gate.limit + 32,
            poll_timeout=poll_timeout,
            stall_timeout=self.settings.stall_timeout,
            clock=clock,
            sleep=sleep,
            rand=rand,
            wall_clock=wall_clock,
        )

        self._counter_lock = threading.Lock()
        self._model_seq_id = 0
        self._sampling_session_seq_id = 0
        self._start_lock = threading.Lock()
        self._started = threading.Event()
        self._client_config = types.ClientConfigResponse()
        self._client_config_from_server = False
        self._session_id: str | None = None
        self._heartbeat_ref: list[_Heartbeat | None] = [None]
        self._telemetry_ref: list[Telemetry | None] = [None]
        self._close_lock = threading.Lock()
        self._closed = False

        self._finalizer = weakref.finalize(
            self,
            _shutdown_components,
            self._heartbeat_ref,
            self._telemetry_ref,
            self._poller,
            self._transport,
        )
        ref = weakref.ref(self)
        self._atexit_hook: Callable[[], None] = lambda: _atexit_close(ref)
        atexit.register(self._atexit_hook)
        if not lazy:
            try:
                self.ensure_started()
            except BaseException:
                self._abandon()
                raise

    def __repr__(self) -> str:
        return (
            f"SessionHolder(base_url={self.settings.base_url!r}, session_id={self._session_id!r}, "
            f"closed={self._closed})"
        )

    # -- settings ----------------------------------------------------------------------------

    @property
    def _startup_policy(self) -> RetryPolicy:
        policy = self._retry_policy
        return replace(policy, max_retries=min(policy.max_retries, _STARTUP_MAX_RETRIES))

    @property
    def base_url(self) -> str:
        """The service's base URL."""
        return self.settings.base_url

    @property
    def project_id(self) -> str | None:
        """The project sessions are created in (``TINKER_PROJECT_ID``), if any."""
        return self.settings.project_id

    @property
    def stall_timeout(self) -> float:
        """Seconds without an answer after which a future fails (WIRE.md §P.7)."""
        return self.settings.stall_timeout

    @property
    def sdk_version(self) -> str:
        """The ``sdk_version`` sent to the service (WIRE.md §P.11)."""
        return self.settings.sdk_version

    @property
    def transport(self) -> Transport:
        """The HTTP transport (one attempt per send)."""
        return self._transport

    @property
    def poller(self) -> Poller:
        """The poller resolving this holder's futures."""
        return self._poller

    @property
    def telemetry(self) -> Telemetry | None:
        """The telemetry queue (``None`` before start-up)."""
        return self._telemetry_ref[0]

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def uses_jwt(self) -> bool:
        """Whether requests are authenticated with a JWT obtained from the API key."""
        return self._credentials.uses_jwt

    # -- start-up ----------------------------------------------------------------------------

    @property
    def client_config(self) -> types.ClientConfigResponse:
        """The service's feature flags (defaults when it has no ``client/config``)."""
        self.ensure_started()
        return self._client_config

    @property
    def client_config_from_server(self) -> bool:
        """Whether the service answered ``client/config`` (a current service)."""
        self.ensure_started()
        return self._client_config_from_server

    @property
    def wire_format(self) -> Literal["protobuf", "json"]:
        """The forward/forward_backward encoding in use (WIRE.md §P.10)."""
        mode = self.settings.wire
        if mode == "auto":
            return "protobuf" if self.client_config_from_server else "json"
        return mode

    @property
    def session_id(self) -> str | None:
        """The session's id (``None`` for a session-less holder)."""
        self.ensure_started()
        return self._session_id

    def ensure_started(self) -> None:
        """Run the start-up sequence once (thread-safe); a failed start is tried again later."""
        if self._started.is_set():
            return
        with self._start_lock:
            if self._started.is_set():
                return
            if self._closed:
                raise ClientClosedError("The client is closed.")
            self._start()
            self._started.set()

    def _start(self) -> None:
        config, from_server = self._fetch_client_config()
        self._client_config = config
        self._client_config_from_server = from_server
        if from_server:
            self.sample_gate.set_limit(max(1, config.sample_max_concurrent_requests))
            if self._user_poll_threads is None:
                self._poller.set_max_workers(self.sample_gate.limit + 32)
        if config.pjwt_auth_enabled:
            self._credentials.enable_jwt(self._make_token_fetcher())
        if self._want_session:
            self._session_id = self._create_session()
        with self._close_lock:
            if self._closed:
                raise ClientClosedError("The client was closed during start-up.")
            telemetry = Telemetry(
                self._transport,
                session_id=self._session_id,
                sdk_version=self.settings.sdk_version,
                enabled=self.settings.telemetry,
                flush_interval=self._telemetry_flush_interval,
                clock=self._clock,
            )
            self._telemetry_ref[0] = telemetry
            telemetry.session_start()
            if self._session_id is not None:
                heartbeat = _Heartbeat(
                    self._transport,
                    self._session_id,
                    interval=self._heartbeat_interval,
                    clock=self._clock,
                    wait=self._heartbeat_wait,
                )
                self._heartbeat_ref[0] = heartbeat
                heartbeat.start()

    def _fetch_client_config(self) -> tuple[types.ClientConfigResponse, bool]:
        body = _wire.dumps(types.ClientConfigRequest(sdk_version=self.settings.sdk_version))
        try:
            resp = self._send(
                PoolKind.SESSION, "POST", CLIENT_CONFIG_PATH, body=body, policy=self._startup_policy
            )
            data = decode_json_body(resp, what="client/config")
            config = _wire.structure(data, types.ClientConfigResponse)
        except ClientClosedError:
            raise
        except NotFoundError:
            logger.debug("The service has no client/config; using built-in defaults")
            return types.ClientConfigResponse(), False
        except TinkerError as e:
            logger.info(
                "Could not read the service's client config (%s); using built-in defaults",
                redact(str(e)),
            )
            return types.ClientConfigResponse(), False
        return config, True

    def _make_token_fetcher(self) -> Callable[[], str]:
        transport = self._transport
        api_key = self.settings.api_key
        sleep = self._sleep
        rand = self._rand
        wall_clock = self._wall_clock
        clock = self._clock
        startup_policy = self._startup_policy

        def fetch() -> str:
            headers = {"X-API-Key": api_key} if api_key else {}
            resp = send_with_retries(
                transport,
                PoolKind.SESSION,
                "POST",
                AUTH_TOKEN_PATH,
                body=b"{}",
                headers=headers,
                policy=startup_policy,
                sleep=sleep,
                rand=rand,
                wall_clock=wall_clock,
                clock=clock,
            )
            data = decode_json_body(resp, what="auth/token")
            try:
                return _wire.structure(data, types.AuthTokenResponse).jwt
            except WireFormatError as e:
                raise APIResponseValidationError(
                    f"auth/token answered without a usable jwt: {e}", status_code=resp.status
                ) from e

        return fetch

    def _create_session(self) -> str:
        request = types.CreateSessionRequest(
            tags=list(self.settings.tags),
            user_metadata=self._user_metadata,
            sdk_version=self.settings.sdk_version,
            project_id=self.settings.project_id,
        )
        resp = self._send(PoolKind.SESSION, "POST", CREATE_SESSION_PATH, body=_wire.dumps(request))
        created = self.parse(resp, types.CreateSessionResponse, what="create_session")
        if created.info_message:
            logger.info("%s", created.info_message)
        if created.warning_message:
            logger.warning("%s", created.warning_message)
        if created.error_message:
            logger.error("%s", created.error_message)
        logger.debug("Created session %s", created.session_id)
        return created.session_id

    # -- requests ----------------------------------------------------------------------------

    def _send(
        self,
        pool: PoolKind,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str | None = JSON,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
        policy: RetryPolicy | None = None,
        accept_status: Collection[int] = (),
        allow_redirects: bool = True,
        request_id: str | None = None,
    ) -> HttpResponse:
        return send_with_retries(
            self._transport,
            pool,
            method,
            path,
            body=body,
            content_type=content_type,
            query=query,
            headers=headers,
            timeout=self._request_timeout if timeout is None else timeout,
            allow_redirects=allow_redirects,
            accept_status=accept_status,
            policy=self._retry_policy if policy is None else policy,
            sleep=self._sleep,
            rand=self._rand,
            wall_clock=self._wall_clock,
            request_id=request_id,
            clock=self._clock,
        )

    def _prepare(
        self,
        body_obj: object | None,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        sdk_method: str | None,
    ) -> tuple[bytes | None, dict[str, str]]:
        if body_obj is not None and body is not None:
            raise InvalidInputError("body", "pass body_obj or body, not both")
        data = _wire.dumps(body_obj) if body_obj is not None else body
        merged = dict(headers or {})
        if sdk_method:
            merged.setdefault("x-sdk-version", self.settings.sdk_version)
            merged.setdefault("x-sdk-method", sdk_method)
        return data, merged

    def request(
        self,
        pool: PoolKind,
        method: str,
        path: str,
        *,
        body_obj: object | None = None,
        body: bytes | None = None,
        content_type: str | None = JSON,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
        retry: bool = True,
        sdk_method: str | None = None,
        accept_status: Collection[int] = (),
        allow_redirects: bool = True,
    ) -> HttpResponse:
        """Send one request with Layer-A retries (``retry=False``: a single attempt).

        ``body_obj`` (an attrs model or JSON value) is encoded with ``_wire.dumps``; ``body`` is
        sent as is. ``sdk_method`` adds ``x-sdk-version`` / ``x-sdk-method`` headers. Returns
        the 2xx answer (or one in ``accept_status``); raises the status's
        :class:`~tinker_lite.APIStatusError` subclass or a connection error.
        """
        self.ensure_started()
        data, merged = self._prepare(body_obj, body, headers, sdk_method)
        return self._send(
            pool,
            method,
            path,
            body=data,
            content_type=content_type,
            query=query,
            headers=merged,
            timeout=timeout,
            policy=None if retry else NO_RETRIES,
            accept_status=accept_status,
            allow_redirects=allow_redirects,
        )

    def submit(
        self,
        pool: PoolKind,
        method: str,
        path: str,
        *,
        body_obj: object | None = None,
        body: bytes | None = None,
        content_type: str | None = JSON,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
        retry: bool = True,
        sdk_method: str | None = None,
        accept_status: Collection[int] = (),
        budget_s: float | None = None,
    ) -> HttpResponse:
        """Like :meth:`request`, wrapped in the 5-minute operation layer (WIRE.md §5.2).

        The body is encoded once and every re-send carries the same bytes, hence the same
        ``seq_id`` (WIRE.md §P.4); each re-send gets a new idempotency key. ``budget_s``
        (default 300 s, or the retry policy's ``budget_s`` when shorter) bounds both layers
        together: no HTTP retry starts whose back-off would end after it and each attempt's
        timeouts are cut to what is left, so the final error arrives within about that time.
        """
        self.ensure_started()
        data, merged = self._prepare(body_obj, body, headers, sdk_method)
        base_policy = self._retry_policy
        policy = base_policy if retry else NO_RETRIES
        total = OPERATION_BUDGET_S if budget_s is None else budget_s
        if base_policy.budget_s is not None:
            total = min(total, base_policy.budget_s)
        started = self._clock()

        def once() -> HttpResponse:
            attempt_policy = policy.within(total - (self._clock() - started))
            return self._send(
                pool,
                method,
                path,
                body=data,
                content_type=content_type,
                query=query,
                headers=merged,
                timeout=timeout,
                policy=attempt_policy,
                accept_status=accept_status,
            )

        return with_operation_retries(
            once,
            budget_s=total,
            sleep=self._sleep,
            clock=self._clock,
            describe=f"{method.upper()} {path}",
        )

    def parse(self, resp: HttpResponse, cls: type[T], *, what: str | None = None) -> T:
        """Decode a direct JSON answer into ``cls`` (APIResponseValidationError on mismatch)."""
        label = what or cls.__name__
        data = decode_json_body(resp, what=label)
        try:
            return _wire.structure(data, cls)
        except WireFormatError as e:
            raise APIResponseValidationError(
                f"The service's answer to {label} does not match {cls.__name__}: {e}",
                body=data,
                status_code=resp.status,
            ) from e

    # -- counters ----------------------------------------------------------------------------

    def next_model_seq_id(self) -> int:
        """The next training-client number of this session (0, 1, 2, ...; WIRE.md §6.1)."""
        with self._counter_lock:
            value = self._model_seq_id
            self._model_seq_id += 1
            return value

    def next_sampling_session_seq_id(self) -> int:
        """The next sampling-session number of this session (0, 1, 2, ...; WIRE.md §6.1)."""
        with self._counter_lock:
            value = self._sampling_session_seq_id
            self._sampling_session_seq_id += 1
            return value

    # -- shutdown ----------------------------------------------------------------------------

    def close(
        self,
        reason: FinishReason = "success",
        detail: str | None = None,
        *,
        timeout: float = 10.0,
        sdk_method: str | None = None,
    ) -> None:
        """End the session and stop every thread (idempotent; bounded by about ``timeout`` s).

        Stops the heartbeat, flushes telemetry, sends ``POST /api/v1/sessions/{id}/finish``
        (404 ignored), fails futures still pending, joins the threads and closes connections.
        """
        finish = types.SessionFinishRequest(reason=types.SessionFinishReason(reason), detail=detail)
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + timeout
        self._closing.set()
        try:
            heartbeat = self._heartbeat_ref[0]
            if heartbeat is not None:
                heartbeat.stop(timeout=min(2.0, timeout))
            telemetry = self._telemetry_ref[0]
            if telemetry is not None:
                telemetry.session_end()
                telemetry.flush(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
            if self._started.is_set() and self._session_id is not None:
                remaining = deadline - time.monotonic()
                self._finish_session(finish, sdk_method, max(0.5, min(10.0, remaining)))
            if telemetry is not None:
                telemetry.close(timeout=max(0.0, min(2.0, deadline - time.monotonic())))
        finally:
            self._poller.close(timeout=max(0.5, deadline - time.monotonic()))
            self._transport.close()
            telemetry = self._telemetry_ref[0]
            if telemetry is not None:
                telemetry.join(1.0)
            heartbeat = self._heartbeat_ref[0]
            if heartbeat is not None:
                heartbeat.stop(timeout=1.0)
            self._finalizer.detach()
            atexit.unregister(self._atexit_hook)

    def _finish_session(
        self, finish: types.SessionFinishRequest, sdk_method: str | None, read_timeout: float
    ) -> None:
        body, headers = self._prepare(finish, None, None, sdk_method)
        path = f"/api/v1/sessions/{self._session_id}/finish"
        try:
            self._send(
                PoolKind.SESSION,
                "POST",
                path,
                body=body,
                headers=headers,
                timeout=Timeout(connect=min(5.0, read_timeout), read=read_timeout),
                policy=NO_RETRIES,
            )
        except NotFoundError:
            logger.debug("The service has no session finish endpoint (404); ignored")
        except TinkerError as e:
            logger.info("Could not finish session %s: %s", self._session_id, redact(str(e)))

    def _abandon(self) -> None:
        """Stop everything after a failed start-up (nothing is sent)."""
        with self._close_lock:
            self._closed = True
        self._closing.set()
        self._finalizer()
        atexit.unregister(self._atexit_hook)

    def __enter__(self) -> SessionHolder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close("success")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("interrupted", exc_type.__name__)
        else:
            self.close("errored", exc_type.__name__)
