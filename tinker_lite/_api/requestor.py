"""The requestor: one connection's send path and its connection requests
(docs/architecture.rst, "One request's path")."""

from __future__ import annotations

import base64
import functools
import random
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from tinker_lite import types
from tinker_lite._api.endpoints import (
    AUTH_TOKEN_PATH,
    CLIENT_CONFIG_PATH,
    CREATE_SESSION_PATH,
    DYNAMIC_CONFIG_PATH,
    FINISH_SESSION,
    HEARTBEAT_PATH,
    RETRIEVE_FUTURE_PATH,
    RETRIEVE_FUTURES_PATH,
    TELEMETRY_PATH,
    Endpoint,
)
from tinker_lite._api.rest import TraceExports
from tinker_lite._api.sampling import SamplingRequests
from tinker_lite._api.training import TrainingRequests
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import parse_model
from tinker_lite._errors import (
    APIConnectionError,
    APIResponseValidationError,
    ClientClosedError,
    InvalidInputError,
    TinkerError,
)
from tinker_lite._futures.poller import Poll
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import redact_url
from tinker_lite._session.credentials import Credentials, token_fetcher
from tinker_lite._session.sample_gate import sample_gate_for
from tinker_lite._session.settings import Settings
from tinker_lite._session.startup import DYNAMIC_CONFIG_TIMEOUT, is_connection_failure
from tinker_lite._transport.answers import JSON, HttpResponse, raise_for_status
from tinker_lite._transport.http import (
    DEFAULT_POOL_SIZES,
    DEFAULT_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    TELEMETRY_TIMEOUT,
    PoolKind,
    Timeout,
    Transport,
)
from tinker_lite._transport.loops import (
    RetryableStatus,
    Tries,
    after_first,
    http_loop,
    operation_loop,
)
from tinker_lite._transport.retry import (
    DEFAULT_RETRY_POLICY,
    MIN_ATTEMPT_TIMEOUT,
    NO_RETRIES,
    RetryPolicy,
    StallWatch,
    cut_timeout,
    is_retryable_error,
)

if TYPE_CHECKING:
    from tinker_lite._session.holder import SessionHolder

__all__ = ["Requestor"]

T = TypeVar("T")

# Start-up requests (client config, auth token) are retried at most twice per HTTP loop.
_STARTUP_MAX_RETRIES = 2
# Telemetry batches are retried a little, then dropped (docs/protocol.rst §9).
_TELEMETRY_POLICY = RetryPolicy(max_retries=3)
_BODYLESS = ("GET", "HEAD")


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(slots=True)
class _Call:
    """One logical request: what is sent, built once for all of its attempts."""

    method: str
    path: str
    what: str
    pool: PoolKind
    body: bytes | None
    headers: dict[str, str]
    timeout: Timeout
    policy: RetryPolicy
    query: Mapping[str, str] | None = None
    accept_status: Collection[int] = ()
    allow_redirects: bool = True
    raw: bool = False  # every status is the answer (the caller reads it), none is retried
    idempotency_key: str | None = None
    retries: int = 0
    timeout_header: str | None = None  # the read timeout as a request says it


class Requestor:
    """Named operations of the Tinker API over one connection's transport; ``sleep``, ``rand``
    and the clocks are injectable for tests (the default sleep ends once :attr:`closing` is set)."""

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
        self.credentials = Credentials(
            settings.api_key, command=settings.credential_command, wall_clock=wall_clock
        )
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
            secret_headers=settings.secret_headers,
            max_answer_bytes=settings.max_answer_bytes,
        )
        self.sample_gate = sample_gate_for(settings.base_url, settings.api_key)
        self.fetch_jwt = token_fetcher(self._post_with_key, self.credentials.exchange_credential)
        self._session_ref: Callable[[], SessionHolder | None] = lambda: None
        # The two layers of the one retrying send, built once (Layer A once per policy).
        self._http_loop = functools.cache(
            lambda policy: http_loop(
                policy,
                closing=self.closing,
                sleep=self.sleep,
                rand=rand,
                wall_clock=wall_clock,
                clock=clock,
            )
        )
        self._operations = operation_loop(
            retry_policy, closing=self.closing, sleep=self.sleep, wall_clock=wall_clock, clock=clock
        )
        # The clients' operations, by subject.
        self.training = TrainingRequests(self)
        self.sampling = SamplingRequests(self)
        self.trace_exports = TraceExports(self)

    @tolerant_repr
    def __repr__(self) -> str:
        return f"Requestor(base_url={redact_url(self.base_url)!r})"

    @property
    def base_url(self) -> str:
        """The service's base URL."""
        return self.transport.base_url

    def attach(self, session: SessionHolder) -> None:
        """Start ``session`` (held weakly) before the operations that need it."""
        self._session_ref = weakref.ref(session)

    def session_holder(self) -> SessionHolder:
        """The session this requestor serves; :class:`~tinker_lite.ClientClosedError` once it
        is gone."""
        session = self._session_ref()
        if session is None:
            raise ClientClosedError("The client is closed.")
        return session

    def stall_watch(self) -> StallWatch:
        """A new deadline for one request's life (docs/protocol.rst §6.6) on this connection's
        clocks."""
        return StallWatch(self.settings.stall_timeout, self.clock)

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
        """Send one request (connecting first) and return its 2xx answer, or one in
        ``accept_status``; Layer B (docs/protocol.rst §6.3) is bounded by ``deadline``."""
        started = self.clock()
        # The start-up a first call triggers counts against the call's budget too.
        self.session_holder().ensure_started()
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
        if not (operation_retries and retry):
            return self._send(call)
        # docs/protocol.rst §6.6: the stall timeout bounds the whole life of a request.
        total = min(
            self.policy.operation_budget_s,  # docs/protocol.rst §6.3
            self.settings.stall_timeout if deadline is None else deadline.remaining(),
        )
        if self.policy.budget_s is not None:
            total = min(total, self.policy.budget_s)
        return self._send(call, operation_deadline=started + total)

    def request(
        self,
        endpoint: Endpoint[T],
        path: str | None = None,
        *,
        sdk_method: str | None = None,
        query: Mapping[str, object] | None = None,
        body: object | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        **ids: str,
    ) -> T:
        """One operation of the endpoint table, read into its row's response model; ``ids``
        fill the row's path, ``None`` query values are left out (docs/protocol.rst §4.5)."""
        resp = self.call(
            endpoint.verb,
            endpoint.url_path(**ids) if path is None else path,
            sdk_method=sdk_method or endpoint.sdk_method,
            query={k: str(v) for k, v in query.items() if v is not None} if query else None,
            body_obj=body,
            headers=headers,
            idempotency_key=idempotency_key,
        )
        if endpoint.response is None:
            return None  # type: ignore[return-value]  # an Endpoint[None]
        return parse_model(resp, endpoint.response_type)

    def _prepare(
        self,
        method: str,
        path: str,
        *,
        pool: PoolKind,
        body: bytes | None = None,
        content_type: str | None = JSON,
        headers: Mapping[str, str] | None = None,
        sdk_method: str | None = None,
        timeout: Timeout | None = None,
        what: str | None = None,
        **fields: Any,
    ) -> _Call:
        """A request with its service headers, built once for all of its attempts; ``fields``
        are the rest of :class:`_Call`'s."""
        method = method.upper()
        wire: dict[str, str] = {}
        # docs/protocol.rst §2.3: Content-Type with a body and on every request that may carry one.
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
            what or f"{method} {self.transport.sent_path(path)}",
            pool,
            body,
            wire,
            self._request_timeout if timeout is None else timeout,
            **fields,
        )

    def _send(
        self,
        call: _Call,
        *,
        operation_deadline: float | None = None,
        retryable: Callable[[BaseException], bool] = is_retryable_error,
    ) -> HttpResponse:
        """The operation layer around the HTTP layer around one attempt; a failure's traceback
        starts here, its low-level cause kept (docs/protocol.rst §6.6)."""
        tries = Tries(call.what, operation_deadline=operation_deadline, retryable=retryable)
        try:
            try:  # the first try outside the loop (docs/architecture.rst, "Waiting on the service")
                return self._operation_try(tries, call)
            except TinkerError as e:
                if operation_deadline is None:
                    raise
                first = e
            return self._operations(after_first(first, self._operation_try), tries, call)
        except TinkerError as e:
            failure = e
        raise failure.with_traceback(None)

    def _operation_try(self, tries: Tries, call: _Call) -> HttpResponse:
        """One try of the operation: a new idempotency key, then the HTTP layer's attempts."""
        if call.method not in _BODYLESS:  # docs/protocol.rst §2.3: one key per logical request
            key = call.idempotency_key or f"tinker-lite-retry-{uuid.uuid4()}"
            call.headers["X-Idempotency-Key"] = key
        now = self.clock()
        call.retries = 0
        budget = call.policy.budget_s
        deadline = None if budget is None else now + budget
        if tries.operation_deadline is not None:
            left = max(tries.operation_deadline - now, MIN_ATTEMPT_TIMEOUT)
            deadline = now + (left if budget is None else min(left, budget))
        if deadline != tries.deadline:
            tries = replace(tries, deadline=deadline)
        try:
            try:
                return self._attempt(tries, call)
            except Exception as e:
                if call.policy.max_retries == 0:
                    raise
                first = e
            return self._http_loop(call.policy)(after_first(first, self._attempt), tries, call)
        except RetryableStatus as e:
            refused = e.response
        # Raised here, not in the handler: the error's cause is the service's answer alone.
        raise_for_status(refused, what=call.what)
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(self, tries: Tries, call: _Call) -> HttpResponse:
        """One attempt: its retry count and read timeout, then the transport's one send."""
        timeout = call.timeout
        if tries.deadline is not None:
            timeout = cut_timeout(timeout, tries.deadline - self.clock())
        headers = call.headers
        # docs/protocol.rst §2.3: sent for parity with the official SDK.
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
        _ANSWERED.add(self.base_url)
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

    def _post(
        self,
        path: str,
        body: object,
        *,
        pool: PoolKind = PoolKind.SESSION,
        operation_deadline: float | None = None,
        retryable: Callable[[BaseException], bool] = is_retryable_error,
        **options: Any,
    ) -> HttpResponse:
        """One POST of the connection's own (its body encoded unless bytes): :meth:`_prepare`'s
        ``options``, sent by :meth:`_send`."""
        data = body if isinstance(body, bytes) else _wire.dumps(body)
        call = self._prepare("POST", path, pool=pool, body=data, **options)
        return self._send(call, operation_deadline=operation_deadline, retryable=retryable)

    def client_config(self) -> HttpResponse:
        """``POST client/config``, retried for the start-up budget while the service never
        answered this process, for the stall timeout once it had (docs/protocol.rst §6.7)."""
        settings = self.settings
        reached = self.base_url in _ANSWERED
        budget = settings.stall_timeout if reached else settings.startup_timeout
        try:
            return self._post(
                CLIENT_CONFIG_PATH,
                types.ClientConfigRequest(sdk_version=settings.sdk_version),
                policy=self._startup_policy(budget),
                what=f"POST {CLIENT_CONFIG_PATH} (start-up)",
                operation_deadline=self.clock() + budget,
                retryable=is_connection_failure,
            )
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

    def _post_with_key(self, body: bytes, headers: Mapping[str, str]) -> HttpResponse:
        """``auth/token`` with the start-up retries (whenever a JWT is refreshed)."""
        return self._post(AUTH_TOKEN_PATH, body, headers=headers, policy=self._startup_policy())

    def dynamic_config(self, *, initial: bool) -> HttpResponse:
        """``POST client/dynamic_config``: the start-up retries at first, one attempt later."""
        return self._post(
            DYNAMIC_CONFIG_PATH,
            types.ClientConfigRequest(sdk_version=self.settings.sdk_version),
            timeout=DYNAMIC_CONFIG_TIMEOUT,
            policy=self._startup_policy() if initial else NO_RETRIES,
        )

    def create_session(self, request: types.CreateSessionRequest) -> types.CreateSessionResponse:
        """``POST create_session`` (HTTP retries)."""
        resp = self._post(CREATE_SESSION_PATH, request, policy=self.policy)
        return parse_model(resp, types.CreateSessionResponse, what="create_session")

    def heartbeat(self, session_id: str) -> HttpResponse:
        """One ``session_heartbeat``; its answer, whatever the status (docs/protocol.rst §8.4)."""
        request = types.SessionHeartbeatRequest(session_id=session_id)
        return self._post(
            HEARTBEAT_PATH, request, timeout=HEARTBEAT_TIMEOUT, policy=NO_RETRIES, raw=True
        )

    def finish_session(
        self,
        session_id: str,
        request: types.SessionFinishRequest,
        *,
        sdk_method: str | None,
        read_timeout: float,
    ) -> HttpResponse:
        """``POST sessions/{id}/finish``, one attempt (docs/protocol.rst §8.5)."""
        return self._post(
            FINISH_SESSION.url_path(session_id=session_id),
            request,
            sdk_method=sdk_method,
            timeout=Timeout(connect=min(5.0, read_timeout), read=read_timeout),
            policy=NO_RETRIES,
        )

    def send_telemetry(self, body: bytes) -> None:
        """``POST telemetry`` with a few HTTP retries (docs/protocol.rst §9)."""
        self._post(
            TELEMETRY_PATH,
            body,
            pool=PoolKind.TELEMETRY,
            timeout=TELEMETRY_TIMEOUT,
            policy=_TELEMETRY_POLICY,
        )

    def retrieve_future(self, poll: Poll) -> HttpResponse:
        """One ``retrieve_future`` poll: its answer, any status (docs/protocol.rst §5.2)."""
        headers = {
            "Accept": poll.accept,
            "X-Tinker-Request-Iteration": str(poll.iteration),
            "X-Tinker-Request-Type": poll.request_type,
            "X-Stainless-Raw-Response": "raw",
        }
        if poll.roundtrip_s is not None:
            # docs/protocol.rst §2.3: seconds from the caller's start to the creation of the future.
            headers["X-Tinker-Create-Promise-Roundtrip-Time"] = str(poll.roundtrip_s)
        request = types.FutureRetrieveRequest(
            request_id=poll.request_id, allow_metadata_only=poll.metadata_only
        )
        return self._post(
            RETRIEVE_FUTURE_PATH,
            request,
            pool=PoolKind.RETRIEVE_PROMISE,
            headers=headers,
            sdk_method=poll.sdk_method,
            timeout=poll.timeout,
            policy=NO_RETRIES,
            raw=True,
        )

    def retrieve_futures(
        self, request: types.FuturesRetrieveRequest, timeout: Timeout
    ) -> HttpResponse:
        """One ``retrieve_futures`` long poll; its answer, whatever the status."""
        return self._post(
            RETRIEVE_FUTURES_PATH,
            request,
            pool=PoolKind.RETRIEVE_PROMISE,
            timeout=timeout,
            policy=NO_RETRIES,
            raw=True,
            # golden-0.38: this one says its read timeout as a float (45.0, 5.0).
            timeout_header=str(float(timeout.read)),
        )

    def abort_polls(self) -> None:
        """Fail the polls in flight at once (their sockets are shut down)."""
        self.transport.abort([PoolKind.RETRIEVE_PROMISE])

    # -- the caller's identity ---------------------------------------------------------------------

    def identity_claims(self) -> Mapping[str, Any] | None:
        """The claims of the JWT this connection authenticates with, read locally (nothing is
        sent beyond the start-up); ``None`` when the credential is a plain API key
        (docs/protocol.rst §8.3)."""
        self.session_holder().ensure_started()
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


# Base URLs that have answered this process (any status): a service reached once is lost, not
# absent, when it stops answering (docs/protocol.rst §6.7, "never reached vs lost").
_ANSWERED: set[str] = set()
