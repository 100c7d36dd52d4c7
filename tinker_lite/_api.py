"""The requestor: named operations in ``types`` between the clients and the transport.

Clients call an operation (``create_model``, ``submit_training``, ``submit_sample``, ...) with
``types`` models and get ``types`` models (or futures of them) back; the session holder asks
it for the start-up, heartbeat, telemetry and poll requests. This module alone knows the
endpoint paths, the request and result encodings (JSON, protobuf, zstd), the pool each
operation uses and which statuses it accepts, and builds the service's headers: ``x-sdk-*``,
``X-Tinker-*``, the idempotency key, the retry count and read timeout (WIRE.md §1.3-§1.4).

One send path, one seam per concern (as httpx's client: auth, redirects and cookies, then one
transport attempt): :meth:`Requestor.call` builds a request's headers once, the operation layer
(Layer B, WIRE.md §5.2) gives each re-send a new idempotency key, the HTTP layer (Layer A,
§5.1) stamps each attempt's retry count, and :class:`~tinker_lite._transport.http.Transport`
sends one attempt. Both layers are tenacity loops built once
(:mod:`tinker_lite._transport.retry`); nothing else calls them.

Threading: a :class:`Requestor` may be shared by every thread. It holds its session holder
weakly (background threads hold the requestor, never the holder), the credentials, the
transport and the sampling gate.
"""

from __future__ import annotations

import base64
import logging
import random
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._api_rest import ACCESS_SCOPES, API, REDIRECT_STATUSES, RestRequests
from tinker_lite._chunking import DEFAULT_LIMITS, ChunkLimits
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import parse_model
from tinker_lite._errors import (
    APIConnectionError,
    APIResponseValidationError,
    ClientClosedError,
    InvalidInputError,
    TinkerError,
)
from tinker_lite._futures.future import APIFuture
from tinker_lite._futures.poller import RETRIEVE_FUTURE_PATH, Poll
from tinker_lite._session.credentials import Credentials, token_fetcher
from tinker_lite._session.sample_gate import sample_gate_for
from tinker_lite._session.settings import Settings
from tinker_lite._session.startup import (
    CLIENT_CONFIG_PATH,
    DYNAMIC_CONFIG_PATH,
    DYNAMIC_CONFIG_TIMEOUT,
    is_connection_failure,
)
from tinker_lite._transport.http import (
    DEFAULT_POOL_SIZES,
    DEFAULT_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    JSON,
    PROTOBUF,
    TELEMETRY_TIMEOUT,
    HttpResponse,
    PoolKind,
    Timeout,
    Transport,
    raise_for_status,
)
from tinker_lite._transport.loops import (
    RetryableStatus,
    ServiceWait,
    Tries,
    attempt_error,
    call_of,
    http_loop,
    operation_loop,
    retry_loop,
)
from tinker_lite._transport.retry import (
    DEFAULT_RETRY_POLICY,
    MIN_ATTEMPT_TIMEOUT,
    NO_RETRIES,
    RetryPolicy,
    StallWatch,
    cut_timeout,
)

if TYPE_CHECKING:
    from tinker_lite._session.holder import SessionHolder

__all__ = [
    "ACCESS_SCOPES",
    "ASAMPLE_PATH",
    "CONSOLE_URL",
    "REDIRECT_STATUSES",
    "SAMPLE_BACKPRESSURE_HEADERS",
    "Requestor",
    "TrainingRequest",
    "decode_forward_backward",
    "decode_sample",
    "json_result",
    "new_idempotency_key",
]

CONSOLE_URL = "https://tinker.thinkingmachines.ai"
"""The web console; training runs and sessions have pages under it."""

T = TypeVar("T")

logger = logging.getLogger("tinker_lite.api")

ASAMPLE_PATH = f"{API}/asample"
CREATE_SESSION_PATH = f"{API}/create_session"
HEARTBEAT_PATH = f"{API}/session_heartbeat"
TELEMETRY_PATH = f"{API}/telemetry"
RETRIEVE_FUTURES_PATH = f"{API}/retrieve_futures"
# WIRE.md §P.8: asample asks the service for 429 backpressure rather than queueing.
SAMPLE_BACKPRESSURE_HEADERS: Mapping[str, str] = {"X-Tinker-Sampling-Backpressure": "1"}
# WIRE.md §5.2: the operation-level (Layer B) retry budget of a submit.
OPERATION_BUDGET_S = 300.0
# Start-up requests (client config, auth token) are retried at most twice per HTTP loop.
_STARTUP_MAX_RETRIES = 2
# Telemetry batches are retried a little, then dropped (WIRE.md §11).
_TELEMETRY_POLICY = RetryPolicy(max_retries=3)
_BODYLESS = ("GET", "HEAD")


def new_idempotency_key() -> str:
    """A fresh ``X-Idempotency-Key`` value for one logical request (WIRE.md §1.3)."""
    return f"tinker-lite-retry-{uuid.uuid4()}"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_zstd_warned = threading.Event()


def _warn_zstd_missing() -> None:
    """Say once per process that the service asks for zstd bodies and they go uncompressed."""
    if _zstd_warned.is_set():
        return
    _zstd_warned.set()
    logger.warning(
        "The service asks for zstd-compressed forward/forward_backward requests "
        "(proto_compress_fwdbwd), but the 'zstandard' package is not installed: they are sent "
        "uncompressed. Install it with: pip install 'tinker-lite[zstd]'"
    )


# ---------------------------------------------------------------------------------------------
# Decoding polled results


def json_result(cls: type[T]) -> Callable[[HttpResponse], T]:
    """A poll decoder reading a JSON result into ``cls``."""

    def decode(resp: HttpResponse) -> T:
        return _wire.structure(resp.json(), cls)

    return decode


def decode_forward_backward(resp: HttpResponse) -> types.ForwardBackwardOutput:
    """A forward/forward_backward result in whichever content type came back (WIRE.md §P.10)."""
    if resp.is_protobuf:
        from tinker_lite._codec import proto as _proto

        return _proto.decode_forward_backward_output(resp.body)
    return _wire.structure(resp.json(), types.ForwardBackwardOutput)


def decode_sample(resp: HttpResponse) -> types.SampleResponse:
    """A sample result in whichever content type came back (WIRE.md §P.10)."""
    if resp.is_protobuf:
        from tinker_lite._codec import proto as _proto

        return _proto.decode_sample_response(resp.body)
    return _wire.structure(resp.json(), types.SampleResponse)


# ---------------------------------------------------------------------------------------------
# Training requests


@attrs.frozen
class TrainingRequest:
    """One training request, encoded at call time, waiting for its turn to be submitted."""

    path: str
    body: bytes
    content_type: str
    request_type: str
    decode: Callable[[HttpResponse], Any]
    accept: str = JSON
    headers: Mapping[str, str] = attrs.field(factory=dict)
    tokens: int | None = None  # input tokens of a forward/forward_backward chunk (journal)


_TRAINING_PATHS: Mapping[type[Any], tuple[str, str]] = {
    types.OptimStepRequest: ("optim_step", "OptimStep"),
    types.SaveWeightsRequest: ("save_weights", "SaveWeights"),
    types.LoadWeightsRequest: ("load_weights", "LoadWeights"),
    types.SaveWeightsForSamplerRequest: ("save_weights_for_sampler", "SaveWeightsForSampler"),
}


# ---------------------------------------------------------------------------------------------
# One request on its way


class _Call(Tries):
    """One logical request: what is sent (built once) and its retry bookkeeping."""

    __slots__ = (
        "accept_status",
        "allow_redirects",
        "body",
        "headers",
        "idempotency_key",
        "method",
        "path",
        "pool",
        "query",
        "raw",
        "retries",
        "timeout",
        "timeout_header",
    )

    def __init__(
        self,
        method: str,
        path: str,
        *,
        pool: PoolKind,
        body: bytes | None,
        headers: dict[str, str],
        query: Mapping[str, str] | None,
        timeout: Timeout,
        policy: RetryPolicy,
        accept_status: Collection[int] = (),
        allow_redirects: bool = True,
        raw: bool = False,
        idempotency_key: str | None = None,
    ) -> None:
        super().__init__(f"{method} {path}", policy)
        self.method = method
        self.path = path
        self.pool = pool
        self.body = body
        self.headers = headers
        self.query = query
        self.timeout = timeout
        self.accept_status = accept_status
        self.allow_redirects = allow_redirects
        self.raw = raw  # every status is the answer (the caller reads it), none is retried
        self.idempotency_key = idempotency_key
        self.retries = 0
        self.timeout_header: str | None = None  # the read timeout as a request says it


class Requestor:
    """Named operations of the Tinker API over one connection's transport.

    ``settings`` are the connection's resolved options; ``retry_policy`` decides every wait,
    ``request_timeout`` is the timeout of requests without one of their own; ``poll_threads``
    widens the poll pool; ``sleep``, ``rand``, ``clock`` (monotonic) and ``wall_clock`` (epoch)
    are injectable for tests (the default sleep ends at once when :attr:`closing` is set).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
        poll_threads: int | None = None,
        sleep: Callable[[float], object] | None = None,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.policy = retry_policy
        self.closing = threading.Event()
        self.sleep: Callable[[float], object] = sleep if sleep is not None else self.closing.wait
        self.clock = clock
        self.wall_clock = wall_clock
        self._request_timeout = request_timeout
        self.credentials = Credentials(settings.api_key, wall_clock=wall_clock)
        sizes = dict(DEFAULT_POOL_SIZES)
        if poll_threads is not None:
            sizes[PoolKind.RETRIEVE_PROMISE] = max(sizes[PoolKind.RETRIEVE_PROMISE], poll_threads)
        self.transport = Transport(
            settings.base_url,
            headers={**settings.cloudflare_headers, **settings.default_headers},
            auth=self.credentials.current,
            reauth=self.credentials.reauth,
            pool_sizes=sizes,
            verify=settings.verify,
            json_loads=_wire.loads,
            session=settings.requests_session,
        )
        self.sample_gate = sample_gate_for(settings.base_url, settings.api_key)
        self.fetch_jwt = token_fetcher(self._post_with_key, settings.api_key)
        self._session_ref: Callable[[], SessionHolder | None] = lambda: None
        # The two layers of the one retrying send, and the sampling 429 loop, built once.
        self._http = http_loop(
            retry_policy,
            closing=self.closing,
            sleep=self.sleep,
            rand=rand,
            wall_clock=wall_clock,
            clock=clock,
        )
        self._operations = operation_loop(
            retry_policy, closing=self.closing, sleep=self.sleep, wall_clock=wall_clock, clock=clock
        )
        self._sample_submits = retry_loop(
            wait=ServiceWait(
                retry_policy,
                fallback=lambda state: (
                    0.0
                    if isinstance(attempt_error(state), _HeldBack)
                    else retry_policy.throttle_backoff.delay(0)
                ),
                wall_clock=wall_clock,
                at_most=lambda state: call_of(state).life.remaining(),
                window=self.sample_gate,  # WIRE.md §P.8: one window for every sampler
            ),
            stop=lambda state: self.closing.is_set() or call_of(state).closing.is_set(),
            retry_on=lambda error: isinstance(error, (RetryableStatus, _HeldBack)),
            sleep=self.sleep,
        )
        self.rest = RestRequests(self)

    def __repr__(self) -> str:
        return f"Requestor(base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        """The service's base URL."""
        return self.transport.base_url

    def attach(self, session: SessionHolder) -> None:
        """Start ``session`` (held weakly) before the operations that need it."""
        self._session_ref = weakref.ref(session)

    def _session(self) -> SessionHolder:
        session = self._session_ref()
        if session is None:
            raise ClientClosedError("The client is closed.")
        return session

    def stall_watch(self) -> StallWatch:
        """A new deadline for one request's life (WIRE.md §P.7) on this connection's clocks."""
        return StallWatch(self.settings.stall_timeout, self.clock, self.sleep)

    def close(self) -> None:
        """End the waits of every retry loop and close the transport (idempotent)."""
        self.closing.set()
        self.transport.close()

    # -- the send path ---------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        *,
        sdk_method: str | None = None,
        pool: PoolKind = PoolKind.TRAIN,
        body_obj: object | None = None,
        body: bytes | None = None,
        content_type: str | None = JSON,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
        retry: bool = True,
        operation_retries: bool = True,
        accept_status: Collection[int] = (),
        allow_redirects: bool = True,
        deadline: StallWatch | None = None,
        idempotency_key: str | None = None,
    ) -> HttpResponse:
        """Send one request of the service (starting the connection first) and return its 2xx
        answer (or one in ``accept_status``); raise its error after the retries.

        ``body_obj`` (an attrs model or JSON value) is encoded with ``_wire.dumps``; ``body`` is
        sent as is. ``sdk_method`` adds the ``x-sdk-version`` / ``x-sdk-method`` headers.
        ``retry=False``: one attempt. With ``operation_retries`` (the default) the request is
        re-sent for up to 5 minutes (WIRE.md §5.2) with the same body, hence the same
        ``seq_id`` (§P.4); the stall timeout bounds it too (§P.7): what is left of ``deadline``
        (a :meth:`stall_watch` started when the request's life began), else the whole of it.
        """
        started = self.clock()
        # The start-up a first call triggers counts against the call's budget too.
        self._session().ensure_started()
        if body_obj is not None:
            if body is not None:
                raise InvalidInputError("body", "pass body_obj or body, not both")
            body = _wire.dumps(body_obj)
        call = self._prepare(
            method,
            path,
            pool=pool,
            body=body,
            content_type=content_type,
            query=query,
            headers=headers,
            sdk_method=sdk_method,
            timeout=timeout,
            policy=self.policy if retry else NO_RETRIES,
            accept_status=accept_status,
            allow_redirects=allow_redirects,
            idempotency_key=idempotency_key,
        )
        if operation_retries and retry:
            # WIRE.md §P.7: the stall timeout bounds the whole life of a request.
            total = min(
                OPERATION_BUDGET_S,
                self.settings.stall_timeout if deadline is None else deadline.remaining(),
            )
            if self.policy.budget_s is not None:
                total = min(total, self.policy.budget_s)
            call.operation_budget_s = total
            call.operation_started = started
        return self._send(call)

    def _prepare(
        self,
        method: str,
        path: str,
        *,
        pool: PoolKind,
        body: bytes | None = None,
        content_type: str | None = JSON,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        sdk_method: str | None = None,
        timeout: Timeout | None = None,
        policy: RetryPolicy,
        accept_status: Collection[int] = (),
        allow_redirects: bool = True,
        raw: bool = False,
        idempotency_key: str | None = None,
    ) -> _Call:
        """A request with its service headers, built once for all of its attempts."""
        method = method.upper()
        wire: dict[str, str] = {}
        # WIRE.md §1.3: Content-Type with a body and on every request that may carry one.
        if content_type is not None and (body is not None or method not in _BODYLESS):
            wire["Content-Type"] = content_type
        if sdk_method:
            # golden-0.38: the public call a request belongs to.
            wire["x-sdk-version"] = self.settings.sdk_version
            wire["x-sdk-method"] = sdk_method
        if headers:
            wire.update(headers)
        return _Call(
            method,
            path,
            pool=pool,
            body=body,
            headers=wire,
            query=query,
            timeout=self._request_timeout if timeout is None else timeout,
            policy=policy,
            accept_status=accept_status,
            allow_redirects=allow_redirects,
            raw=raw,
            idempotency_key=idempotency_key,
        )

    def _send(self, call: _Call) -> HttpResponse:
        """The one retrying send: the operation layer (when the call has a budget for it)
        around the HTTP layer around one transport attempt.

        A failure is raised with a traceback that starts here, its low-level cause kept: an
        uncaught one prints the caller's frames and the cause, not every retry (WIRE.md §P.7).
        """
        try:
            if call.operation_budget_s is None:
                return self._operation_try(call)
            return self._operations(self._operation_try, call)
        except TinkerError as e:
            failure = e
        raise failure.with_traceback(None)

    def _operation_try(self, call: _Call) -> HttpResponse:
        """One try of the operation: a new idempotency key, then the HTTP layer's attempts."""
        if call.method not in _BODYLESS:
            call.headers["X-Idempotency-Key"] = call.idempotency_key or new_idempotency_key()
        call.started = now = self.clock()
        call.retries = 0
        if call.operation_budget_s is not None:
            left = max(
                call.operation_budget_s - (now - call.operation_started), MIN_ATTEMPT_TIMEOUT
            )
            budget = call.policy.budget_s
            call.budget_s = left if budget is None else min(left, budget)
        try:
            if call.policy.max_retries == 0:
                return self._attempt(call)
            return self._http(self._attempt, call)
        except RetryableStatus as e:
            refused = e.response
        # Raised here, not in the handler: the error's cause is the service's answer alone.
        raise_for_status(refused, what=call.what)
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(self, call: _Call) -> HttpResponse:
        """One attempt: its retry count and read timeout, then the transport's one send."""
        timeout = call.timeout
        if call.budget_s is not None:
            timeout = cut_timeout(timeout, call.budget_s - (self.clock() - call.started))
        headers = call.headers
        # WIRE.md §1.3: sent for parity with the official SDK.
        headers["x-stainless-retry-count"] = str(call.retries)
        # The timeout the request was given (an attempt near the end of its budget waits less).
        headers["x-stainless-read-timeout"] = call.timeout_header or _seconds(call.timeout.read)
        call.retries += 1
        resp = self.transport.send(
            call.pool,
            call.method,
            call.path,
            body=call.body,
            query=call.query,
            headers=headers,
            timeout=timeout,
            allow_redirects=call.allow_redirects,
        )
        _answered(self.base_url)
        status = resp.status
        if call.raw or 200 <= status < 300 or status in call.accept_status:
            return resp
        if call.policy.should_retry(status, resp.headers):
            raise RetryableStatus(resp)
        raise_for_status(resp, what=call.what)
        return resp  # pragma: no cover - raise_for_status raised

    # -- the connection: start-up, session, heartbeat, telemetry, polls ---------------------------

    def _startup_policy(self, budget_s: float | None = None) -> RetryPolicy:
        policy = self.policy
        budget = self.settings.startup_timeout if budget_s is None else budget_s
        if policy.budget_s is not None:
            budget = min(budget, policy.budget_s)
        return replace(
            policy, max_retries=min(policy.max_retries, _STARTUP_MAX_RETRIES), budget_s=budget
        )

    def client_config(self) -> HttpResponse:
        """``POST client/config``: a connection that cannot be made is retried for the start-up
        budget (WIRE.md §P.7) when this process never had an answer from the service (a wrong
        URL, no network), for the stall timeout when it had (the service is lost, not absent);
        then an :class:`~tinker_lite.APIConnectionError` names the URL and the cause. Any
        answer is returned."""
        settings = self.settings
        reached = self.base_url in _ANSWERED
        budget = settings.stall_timeout if reached else settings.startup_timeout
        body = _wire.dumps(types.ClientConfigRequest(sdk_version=settings.sdk_version))
        call = self._prepare(
            "POST",
            CLIENT_CONFIG_PATH,
            pool=PoolKind.SESSION,
            body=body,
            policy=self._startup_policy(budget),
        )
        call.what = f"POST {CLIENT_CONFIG_PATH} (start-up)"
        call.operation_budget_s = budget
        call.operation_started = self.clock()
        call.retryable = is_connection_failure
        try:
            return self._send(call)
        except APIConnectionError as e:
            if reached or not is_connection_failure(e):
                raise
            unreachable = e
        error = APIConnectionError(
            f"{unreachable} The service at {self.base_url} never answered within the start-up "
            f"budget of {budget:g} s (startup_timeout=, --startup-timeout or "
            "TINKER_LITE_STARTUP_TIMEOUT to wait longer)."
        )
        raise error from unreachable.__cause__

    def _post_with_key(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpResponse:
        """``auth/token``: sent with the start-up retries (on any thread, whenever a JWT is
        refreshed)."""
        call = self._prepare(
            "POST",
            path,
            pool=PoolKind.SESSION,
            body=body,
            headers=headers,
            policy=self._startup_policy(),
        )
        return self._send(call)

    def dynamic_config(self, *, initial: bool) -> HttpResponse:
        """``POST client/dynamic_config``: with the start-up retries at first, then one attempt
        per refresh."""
        body = _wire.dumps(types.ClientConfigRequest(sdk_version=self.settings.sdk_version))
        call = self._prepare(
            "POST",
            DYNAMIC_CONFIG_PATH,
            pool=PoolKind.SESSION,
            body=body,
            timeout=DYNAMIC_CONFIG_TIMEOUT,
            policy=self._startup_policy() if initial else NO_RETRIES,
        )
        return self._send(call)

    def create_session(self, request: types.CreateSessionRequest) -> types.CreateSessionResponse:
        """``POST create_session`` (HTTP retries)."""
        call = self._prepare(
            "POST",
            CREATE_SESSION_PATH,
            pool=PoolKind.SESSION,
            body=_wire.dumps(request),
            policy=self.policy,
        )
        return parse_model(self._send(call), types.CreateSessionResponse, what="create_session")

    def heartbeat(self, session_id: str) -> HttpResponse:
        """One ``session_heartbeat``; its answer, whatever the status (WIRE.md §10)."""
        body = _wire.dumps(types.SessionHeartbeatRequest(session_id=session_id))
        call = self._prepare(
            "POST",
            HEARTBEAT_PATH,
            pool=PoolKind.SESSION,
            body=body,
            timeout=HEARTBEAT_TIMEOUT,
            policy=NO_RETRIES,
            raw=True,
        )
        return self._send(call)

    def finish_session(
        self,
        session_id: str,
        request: types.SessionFinishRequest,
        *,
        sdk_method: str | None,
        read_timeout: float,
    ) -> HttpResponse:
        """``POST sessions/{id}/finish``, one attempt (WIRE.md §P.12)."""
        call = self._prepare(
            "POST",
            f"{API}/sessions/{session_id}/finish",
            pool=PoolKind.SESSION,
            body=_wire.dumps(request),
            sdk_method=sdk_method,
            timeout=Timeout(connect=min(5.0, read_timeout), read=read_timeout),
            policy=NO_RETRIES,
        )
        return self._send(call)

    def send_telemetry(self, body: bytes) -> None:
        """``POST telemetry`` with a few HTTP retries (WIRE.md §11)."""
        call = self._prepare(
            "POST",
            TELEMETRY_PATH,
            pool=PoolKind.TELEMETRY,
            body=body,
            timeout=TELEMETRY_TIMEOUT,
            policy=_TELEMETRY_POLICY,
        )
        self._send(call)

    def retrieve_future(self, poll: Poll) -> HttpResponse:
        """One ``retrieve_future`` poll; its answer, whatever the status (WIRE.md §4, §P.6)."""
        headers = {
            "Accept": poll.accept,
            "X-Tinker-Request-Iteration": str(poll.iteration),
            "X-Tinker-Request-Type": poll.request_type,
            "X-Stainless-Raw-Response": "raw",
        }
        if poll.roundtrip_s is not None:
            # WIRE.md §1.4: seconds from the caller's start to the creation of the future.
            headers["X-Tinker-Create-Promise-Roundtrip-Time"] = str(poll.roundtrip_s)
        body = _wire.dumps(
            types.FutureRetrieveRequest(
                request_id=poll.request_id, allow_metadata_only=poll.metadata_only
            )
        )
        call = self._prepare(
            "POST",
            RETRIEVE_FUTURE_PATH,
            pool=PoolKind.RETRIEVE_PROMISE,
            body=body,
            headers=headers,
            sdk_method=poll.sdk_method,
            timeout=poll.timeout,
            policy=NO_RETRIES,
            raw=True,
        )
        return self._send(call)

    def retrieve_futures(
        self, request: types.FuturesRetrieveRequest, timeout: Timeout
    ) -> HttpResponse:
        """One ``retrieve_futures`` long poll; its answer, whatever the status."""
        call = self._prepare(
            "POST",
            RETRIEVE_FUTURES_PATH,
            pool=PoolKind.RETRIEVE_PROMISE,
            body=_wire.dumps(request),
            timeout=timeout,
            policy=NO_RETRIES,
            raw=True,
        )
        # golden-0.38: this one says its read timeout as a float (45.0, 5.0).
        call.timeout_header = str(float(timeout.read))
        return self._send(call)

    def abort_polls(self) -> None:
        """Fail the polls in flight at once (their sockets are shut down)."""
        self.transport.abort([PoolKind.RETRIEVE_PROMISE])

    # -- models and sessions -----------------------------------------------------------------------

    def _submitted(
        self,
        path: str,
        request: object,
        *,
        sdk_method: str,
        request_type: str,
        decode: Callable[[HttpResponse], T],
        created_at: float,
    ) -> APIFuture[T]:
        """Send a request the service answers with a future (HTTP retries only, WIRE.md §5.7)
        and poll its result."""
        try:
            resp = self.call(
                "POST", path, body_obj=request, sdk_method=sdk_method, operation_retries=False
            )
            submitted = parse_model(resp, types.UntypedAPIFuture, what=path.rsplit("/", 1)[-1])
            session = self._session()
        except Exception as e:
            return APIFuture.failed(e)
        return session.poller.poll(
            submitted.request_id,
            request_type,
            decode,
            created_at=created_at,
            sdk_method=sdk_method,
        )

    def create_model(
        self, request: types.CreateModelRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.CreateModelResponse]:
        """Send ``create_model`` (HTTP retries only, WIRE.md §5.7) and poll its result."""
        return self._submitted(
            f"{API}/create_model",
            request,
            sdk_method=sdk_method,
            request_type="CreateModel",
            decode=json_result(types.CreateModelResponse),
            created_at=created_at,
        )

    def load_weights_creating_model(
        self, request: types.LoadWeightsRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.LoadWeightsResponse]:
        """Send a ``load_weights`` that creates its model (``session_id`` + ``model_seq_id``,
        golden-0.38) with HTTP retries only, like ``create_model``, and poll its result."""
        return self._submitted(
            f"{API}/load_weights",
            request,
            sdk_method=sdk_method,
            request_type="LoadWeights",
            decode=json_result(types.LoadWeightsResponse),
            created_at=created_at,
        )

    def create_custom_loss(
        self, request: types.CreateCustomLossRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.CreateCustomLossResponse]:
        """Upload a custom loss (HTTP retries only, like create_model) and poll its loss id."""
        return self._submitted(
            f"{API}/create_custom_loss",
            request,
            sdk_method=sdk_method,
            request_type="CreateCustomLoss",
            decode=json_result(types.CreateCustomLossResponse),
            created_at=created_at,
        )

    def weights_info(self, tinker_path: str, *, sdk_method: str) -> types.WeightsInfoResponse:
        """What a checkpoint holds (a 0.4.1-era service answers 404: NotFoundError)."""
        resp = self.call(
            "POST",
            f"{API}/weights_info",
            body_obj=types.WeightsInfoRequest(tinker_path=tinker_path),
            sdk_method=sdk_method,
        )
        return parse_model(resp, types.WeightsInfoResponse)

    def create_sampling_session(
        self, request: types.CreateSamplingSessionRequest, *, sdk_method: str
    ) -> types.CreateSamplingSessionResponse:
        """Create a sampling session (HTTP retries only, WIRE.md §5.7)."""
        resp = self.call(
            "POST",
            f"{API}/create_sampling_session",
            body_obj=request,
            sdk_method=sdk_method,
            pool=PoolKind.SESSION,
            operation_retries=False,
        )
        return parse_model(resp, types.CreateSamplingSessionResponse)

    def get_info(
        self, model_id: str, *, sdk_method: str, operation_retries: bool = True
    ) -> types.GetInfoResponse:
        """A model's base model, LoRA rank and tokenizer id."""
        resp = self.call(
            "POST",
            f"{API}/get_info",
            body_obj=types.GetInfoRequest(model_id=model_id),
            sdk_method=sdk_method,
            operation_retries=operation_retries,
        )
        return parse_model(resp, types.GetInfoResponse)

    def identity_claims(self) -> Mapping[str, Any] | None:
        """The claims of the JWT this connection authenticates with, read locally (nothing is
        sent beyond the start-up); ``None`` when the credential is a plain API key (§13.2)."""
        self._session().ensure_started()
        credentials = self.credentials
        token = credentials.current() if credentials.uses_jwt else None
        if token is None:
            return None
        try:
            payload = token.split(".")[1]
            claims = _wire.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError, TinkerError) as e:
            raise APIResponseValidationError(
                f"the access token's claims cannot be read: {e}"
            ) from e
        if not isinstance(claims, dict):
            raise APIResponseValidationError("the access token's claims are not an object")
        return claims

    # -- training ----------------------------------------------------------------------------

    def chunk_limits(self) -> ChunkLimits:
        """Forward/forward_backward chunk limits: the service's client config, else WIRE.md §6.4."""
        session = self._session()
        if session.client_config_from_server:
            config = session.client_config
            return ChunkLimits(
                max_datums=max(1, config.fwdbwd_max_chunk_len),
                max_numbers=None,
                max_bytes=max(1, config.fwdbwd_max_chunk_bytes_count),
            )
        return DEFAULT_LIMITS

    def encode_training(self, request: object, result_cls: type[Any]) -> TrainingRequest:
        """Encode an optim_step / save / load request for :meth:`submit_training`."""
        name, request_type = _TRAINING_PATHS[type(request)]
        return TrainingRequest(
            path=f"{API}/{name}",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=json_result(result_cls),
        )

    def encode_forward_backward(
        self,
        *,
        model_id: str,
        seq_id: int,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: dict[str, float | str] | None,
        forward_only: bool,
        wire: Literal["protobuf", "json"],
    ) -> TrainingRequest:
        """Encode one forward/forward_backward chunk in the connection's wire format."""
        request_type = "Forward" if forward_only else "ForwardBackward"
        tokens = sum(datum.model_input.length for datum in data)
        if wire == "protobuf":
            from tinker_lite._codec import proto as _proto

            # WIRE.md §13.3/§P.10: protobuf to /forward_backward; forward_only marks a forward.
            body = _proto.encode_forward_backward_request(
                model_id=model_id,
                seq_id=seq_id,
                data=data,
                loss_fn=loss_fn,
                loss_fn_config=loss_fn_config,
                forward_only=forward_only,
            )
            headers: dict[str, str] = {}
            if self._session().client_config.proto_compress_fwdbwd:
                if _proto.zstd_available():
                    body = _proto.compress(body)
                    headers["Content-Encoding"] = "zstd"
                else:
                    _warn_zstd_missing()
            return TrainingRequest(
                path=f"{API}/forward_backward",
                body=body,
                content_type=PROTOBUF,
                request_type=request_type,
                decode=decode_forward_backward,
                accept=PROTOBUF,
                headers=headers,
                tokens=tokens,
            )
        fb_input = types.ForwardBackwardInput(
            data=data, loss_fn=loss_fn, loss_fn_config=loss_fn_config
        )
        request: object
        if forward_only:
            request = types.ForwardRequest(forward_input=fb_input, model_id=model_id, seq_id=seq_id)
        else:
            request = types.ForwardBackwardRequest(
                forward_backward_input=fb_input, model_id=model_id, seq_id=seq_id
            )
        return TrainingRequest(
            path=f"{API}/forward" if forward_only else f"{API}/forward_backward",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=decode_forward_backward,
            tokens=tokens,
        )

    def encode_optim_step(
        self, model_id: str, seq_id: int, params: types.AdamParams | types.DimuonParams
    ) -> TrainingRequest:
        """Encode an optim_step: AdamW settings go as ``adam_params``, others (Dimuon) as
        ``optimizer_params`` with their ``type``, as 0.38 sends them."""
        if isinstance(params, types.AdamParams):
            request = types.OptimStepRequest(model_id=model_id, seq_id=seq_id, adam_params=params)
            return self.encode_training(request, types.OptimStepResponse)
        body = {
            "model_id": model_id,
            "seq_id": seq_id,
            "type": "optim_step",
            "optimizer_params": _wire.to_builtins(params),
        }
        return TrainingRequest(
            path=f"{API}/optim_step",
            body=_wire.dumps(body),
            content_type=JSON,
            request_type="OptimStep",
            decode=json_result(types.OptimStepResponse),
        )

    def encode_save_weights_external(
        self, request: types.SaveWeightsExternalRequest
    ) -> TrainingRequest:
        """Encode a save_weights_external (a training request, polled like save_weights)."""
        return TrainingRequest(
            path=f"{API}/save_weights_external",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type="SaveWeightsExternal",
            decode=json_result(types.SaveWeightsExternalResponseInternal),
        )

    def submit_training(self, request: TrainingRequest, *, sdk_method: str) -> str:
        """Submit an encoded training request (HTTP and operation retries); its request id."""
        resp = self.call(
            "POST",
            request.path,
            body=request.body,
            content_type=request.content_type,
            headers=request.headers,
            sdk_method=sdk_method,
        )
        return parse_model(resp, types.UntypedAPIFuture, what=request.path).request_id

    # -- sampling --------------------------------------------------------------------------------

    @property
    def result_accept(self) -> str:
        """The content type asked for polled forward/sample results (WIRE.md §P.10)."""
        return PROTOBUF if self._session().wire_format == "protobuf" else JSON

    def join_sampling_session(self, sampling_session_id: str, *, sdk_method: str) -> int:
        """Join a sampling session as a copied sampler; its ``client_counter`` (WIRE.md §13.4)."""
        resp = self.call(
            "POST",
            f"{API}/join_sampling_session",
            body_obj=types.JoinSamplingSessionRequest(sampling_session_id=sampling_session_id),
            sdk_method=sdk_method,
            pool=PoolKind.SESSION,
        )
        return parse_model(resp, types.JoinSamplingSessionResponse).client_counter

    def submit_sample(
        self, request: types.SampleRequest, *, sdk_method: str, closing: threading.Event
    ) -> str:
        """Send one ``asample`` until the service accepts it; its request id (WIRE.md §P.8).

        A 429 is backpressure, not an error: it opens the back-off window every sampler of this
        service and key shares (``Retry-After`` when given, else 1 s), and the same bytes, hence
        the same ``seq_id``, are sent again once it closes; a window opened by another sampler
        is waited out before sending. The stall timeout bounds the whole loop (WIRE.md §P.7):
        HTTP and operation retries, 429 waits and re-sends alike; a service that keeps answering
        429 for that long raises :class:`~tinker_lite.RateLimitError`.
        """
        call = _SampleCall(closing, self.stall_watch(), _wire.dumps(request), sdk_method)
        try:
            return self._sample_submits(self._submit_sample_once, call)
        except (RetryableStatus, _HeldBack):  # stopped: the client is closing
            closed = True
        if closed:
            raise ClientClosedError("The ServiceClient was closed during a 429 back-off.")
        raise AssertionError("unreachable")  # pragma: no cover

    def _submit_sample_once(self, call: _SampleCall) -> str:
        """One turn of the sample loop: wait out an open window (or give up), else send."""
        if call.closing.is_set():
            raise ClientClosedError("The ServiceClient was closed during a 429 back-off.")
        life = call.life
        window = self.sample_gate.backoff_remaining()
        if window > 0:
            if window <= life.remaining():
                raise _HeldBack
            if call.throttled is not None:
                # WIRE.md §P.7: the back-off would outlast the stall timeout.
                raise_for_status(
                    call.throttled,
                    what=f"POST {ASAMPLE_PATH} (held back by HTTP 429 for "
                    f"{life.silent_for():.0f} s; stall timeout {life.stall_timeout:g} s)",
                )
        resp = self.call(
            "POST",
            ASAMPLE_PATH,
            body=call.body,
            sdk_method=call.sdk_method,
            pool=PoolKind.SAMPLE,
            headers=SAMPLE_BACKPRESSURE_HEADERS,
            accept_status=(429,),
            deadline=life,
        )
        if resp.status == 429:
            call.throttled = resp
            logger.debug("asample answered 429; backing off")
            raise RetryableStatus(resp)
        self.sample_gate.note_accepted()
        return parse_model(resp, types.UntypedAPIFuture, what="asample").request_id


# Base URLs that have answered this process (any status): a service reached once is lost, not
# absent, when it stops answering (WIRE.md §P.7, "never reached vs lost").
_ANSWERED: set[str] = set()


def _answered(base_url: str) -> None:
    if base_url not in _ANSWERED:
        _ANSWERED.add(base_url)


class _SampleCall:
    """One sample's submit loop: its life (WIRE.md §P.7), bytes and last 429."""

    __slots__ = ("body", "closing", "life", "sdk_method", "throttled")

    def __init__(
        self, closing: threading.Event, life: StallWatch, body: bytes, sdk_method: str
    ) -> None:
        self.closing = closing
        self.life = life
        self.body = body
        self.sdk_method = sdk_method
        self.throttled: HttpResponse | None = None


class _HeldBack(Exception):
    """A sample not sent: the shared 429 window is open (its loop waits it out, then sends)."""
