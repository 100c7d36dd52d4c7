"""The session holder of one ServiceClient: start-up, session, background threads, close.

docs/protocol.rst §8 gives the sequence; docs/architecture.rst, "The threading contract", the
threads.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Literal, Protocol, TypeVar

from tinker_lite import types
from tinker_lite._errors import (
    ClientClosedError,
    InvalidInputError,
    NotFoundError,
    TinkerError,
)
from tinker_lite._futures.future import APIFuture
from tinker_lite._futures.poller import Poll, Poller
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import redact_url
from tinker_lite._session.credentials import Credentials
from tinker_lite._session.heartbeat import HEARTBEAT_INTERVAL, Heartbeat
from tinker_lite._session.sample_gate import SampleGate
from tinker_lite._session.settings import Settings
from tinker_lite._session.startup import (
    MIN_REFRESH_INTERVAL_S,
    DynamicConfig,
    read_client_config,
)
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import RETRIEVE_FUTURE_TIMEOUT, Timeout, redact
from tinker_lite._transport.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from tinker_lite.telemetry import Telemetry

__all__ = ["FinishReason", "SessionCalls", "SessionHolder"]

logger = logging.getLogger("tinker_lite.session")

T = TypeVar("T")

FinishReason = Literal["success", "errored", "interrupted"]


class SessionCalls(Protocol):
    """What a session holder asks of its requestor (:class:`tinker_lite._api.Requestor`)."""

    closing: threading.Event
    credentials: Credentials
    sample_gate: SampleGate
    fetch_jwt: Callable[[], str]

    def attach(self, session: SessionHolder) -> None: ...

    def client_config(self) -> HttpResponse: ...

    def dynamic_config(self, *, initial: bool) -> HttpResponse: ...

    def create_session(
        self, request: types.CreateSessionRequest
    ) -> types.CreateSessionResponse: ...

    def heartbeat(self, session_id: str) -> HttpResponse: ...

    def finish_session(
        self,
        session_id: str,
        request: types.SessionFinishRequest,
        *,
        sdk_method: str | None,
        read_timeout: float,
    ) -> HttpResponse: ...

    def send_telemetry(self, body: bytes) -> None: ...

    def retrieve_future(self, poll: Poll) -> HttpResponse: ...

    def abort_polls(self) -> None: ...

    def close(self) -> None: ...


def _shutdown_components(
    heartbeat: list[Heartbeat | None],
    telemetry: list[Telemetry | None],
    poller: Poller,
    api: SessionCalls,
    dynamic: DynamicConfig,
) -> None:
    """Stop every thread of a holder, closed or abandoned, sending nothing more."""
    dynamic.stop(timeout=0.0)
    hb = heartbeat[0]
    if hb is not None:
        hb.stop(timeout=1.0)
    tel = telemetry[0]
    if tel is not None:
        tel.abandon()
    api.close()
    poller.close(timeout=1.0)
    # Closing the transport ends any send in flight, so these threads now exit promptly.
    dynamic.stop(timeout=1.0)
    if tel is not None:
        tel.join(timeout=1.0)


class SessionHolder:
    """Session and background machinery shared by the clients of one ServiceClient.

    ``api`` sends every request; ``create_session=False`` makes a session-less holder (REST
    use); ``lazy=True`` delays start-up until first use; clocks and sleeps are injectable.
    """

    def __init__(
        self,
        settings: Settings,
        api: SessionCalls,
        *,
        create_session: bool = True,
        lazy: bool = False,
        poll_threads: int | None = None,
        poll_timeout: Timeout = RETRIEVE_FUTURE_TIMEOUT,
        heartbeat_interval: float = HEARTBEAT_INTERVAL,
        heartbeat_wait: Callable[[float], bool] | None = None,
        dynamic_config_min_interval: float = MIN_REFRESH_INTERVAL_S,
        telemetry_flush_interval: float = 10.0,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        sleep: Callable[[float], object] | None = None,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._api = api
        self.has_session = create_session  # False: a standalone RestClient's
        self._closing = api.closing
        self._clock = clock
        self._heartbeat_interval = heartbeat_interval
        self._heartbeat_wait = heartbeat_wait
        self._telemetry_flush_interval = telemetry_flush_interval
        self._user_poll_threads = poll_threads

        self._credentials = api.credentials
        self.sample_gate = api.sample_gate
        self.poller = Poller(  # resolves this holder's futures
            api.retrieve_future,
            abort=api.abort_polls,
            max_workers=poll_threads or self.sample_gate.limit + 32,
            poll_timeout=poll_timeout,
            stall_timeout=self.settings.stall_timeout,
            clock=clock,
            sleep=sleep,
            rand=rand,
            wall_clock=wall_clock,
            policy=retry_policy,
        )
        self._dynamic = DynamicConfig(api.dynamic_config, min_interval=dynamic_config_min_interval)
        # next() of an itertools.count is atomic: each number is taken once.
        self._model_seq_ids = itertools.count()
        self._sampling_session_seq_ids = itertools.count()
        self._start_lock = threading.Lock()
        self._started = threading.Event()
        self._client_config = types.ClientConfigResponse()
        self._client_config_from_server = False
        self._session_id: str | None = None
        self._heartbeat_ref: list[Heartbeat | None] = [None]
        self._telemetry_ref: list[Telemetry | None] = [None]
        self._close_lock = threading.Lock()
        self._closed = False

        api.attach(self)
        self._finalizer = weakref.finalize(
            self,
            _shutdown_components,
            self._heartbeat_ref,
            self._telemetry_ref,
            self.poller,
            api,
            self._dynamic,
        )
        if not lazy:
            try:
                self.ensure_started()
                if create_session:
                    self.ensure_session()
            except BaseException:  # stop everything after a failed start-up (nothing is sent)
                with self._close_lock:
                    self._closed = True
                self._closing.set()
                self._finalizer()
                raise

    @tolerant_repr
    def __repr__(self) -> str:
        return (
            f"SessionHolder(base_url={redact_url(self.settings.base_url)!r}, "
            f"session_id={self._session_id!r}, "
            f"closed={self._closed})"
        )

    @property
    def telemetry(self) -> Telemetry | None:
        """The telemetry queue (``None`` before start-up)."""
        return self._telemetry_ref[0]

    @property
    def uses_jwt(self) -> bool:
        """Whether requests are authenticated with a JWT obtained from the API key."""
        return self._credentials.uses_jwt

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
    def dynamic_config(self) -> types.ClientDynamicConfigResponse:
        """The service's dynamic flags, refreshed every ``refresh_interval_sec``."""
        self.ensure_started()
        return self._dynamic.current

    @property
    def wire_format(self) -> Literal["protobuf", "json"]:
        """The forward/forward_backward encoding in use (docs/protocol.rst §1.1)."""
        mode = self.settings.wire
        if mode == "auto":
            return "protobuf" if self.client_config_from_server else "json"
        return mode

    @property
    def first_chunk_last(self) -> bool:
        """Whether a split forward_backward sends its first chunk last (docs/protocol.rst §7.4)."""
        return self.client_config_from_server and self.client_config.parallel_fwdbwd_chunks

    @property
    def started_session_id(self) -> str | None:
        """The session's id if it has started (asking does not start it)."""
        return self._session_id

    @property
    def session_id(self) -> str | None:
        """The session's id, started on first use (``None`` for a session-less holder)."""
        if self.has_session:
            return self.ensure_session()
        self.ensure_started()
        return None

    def ensure_started(self) -> None:
        """Connect once (thread-safe): client config, then a JWT if asked; a failure is retried."""
        if self._started.is_set():
            return
        with self._start_lock:
            if self._started.is_set():
                return
            if self._closed:
                raise ClientClosedError("The client is closed.")
            config, from_server = read_client_config(self._api.client_config)
            self._client_config = config
            self._client_config_from_server = from_server
            if from_server:
                self.sample_gate.set_limit(max(1, config.sample_max_concurrent_requests))
                if self._user_poll_threads is None:
                    self.poller.set_max_workers(self.sample_gate.limit + 32)
            self._credentials.use_client_config(config, from_server=from_server)
            if config.pjwt_auth_enabled:
                self._credentials.enable_jwt(self._api.fetch_jwt)
            if from_server:  # after the JWT, before the session (docs/protocol.rst §8.1)
                self._dynamic.fetch_initial()
                self._dynamic.start()
            if not self.has_session:
                self._start_background(None)
            self._started.set()

    def ensure_session(self) -> str:
        """Start the session on first use (thread-safe; docs/protocol.rst §8.1); its id."""
        if self._session_id is not None:
            return self._session_id
        if not self.has_session:
            raise InvalidInputError(
                "session",
                "this connection is session-less (a standalone RestClient)",
                "create training and sampling clients with a ServiceClient",
            )
        self.ensure_started()
        with self._start_lock:
            if self._session_id is None:
                if self._closed:
                    raise ClientClosedError("The client is closed.")
                session_id = self._create_session()
                self._start_background(session_id)
                self._session_id = session_id
            return self._session_id

    def _start_background(self, session_id: str | None) -> None:
        """Start telemetry and, with a session, its heartbeat."""
        with self._close_lock:
            if self._closed:
                raise ClientClosedError("The client was closed during start-up.")
            telemetry = Telemetry(
                self._api.send_telemetry,
                session_id=session_id,
                sdk_version=self.settings.sdk_version,
                enabled=self.settings.telemetry,
                flush_interval=self._telemetry_flush_interval,
                clock=self._clock,
            )
            self._telemetry_ref[0] = telemetry
            telemetry.session_start()
            if session_id is not None:
                heartbeat = Heartbeat(
                    functools.partial(self._api.heartbeat, session_id),
                    session_id,
                    interval=self._heartbeat_interval,
                    clock=self._clock,
                    wait=self._heartbeat_wait,
                )
                self._heartbeat_ref[0] = heartbeat
                heartbeat.start()

    def _create_session(self) -> str:
        request = types.CreateSessionRequest(
            tags=list(self.settings.tags),
            user_metadata=dict(self.settings.user_metadata),
            display_name=self.settings.display_name,
            sdk_version=self.settings.sdk_version,
            project_id=self.settings.project_id,
        )
        created = self._api.create_session(request)
        if created.info_message:
            logger.info("%s", created.info_message)
        if created.warning_message:
            logger.warning("%s", created.warning_message)
        if created.error_message:
            logger.error("%s", created.error_message)
        logger.debug("Created session %s", created.session_id)
        return created.session_id

    def get_training_client_id(self) -> int:
        """The next training-client number of this session (docs/protocol.rst §7.1)."""
        return next(self._model_seq_ids)

    def next_sampling_session_seq_id(self) -> int:
        """The next sampling-session number of this session (docs/protocol.rst §7.1)."""
        return next(self._sampling_session_seq_ids)

    get_session_id = ensure_session  # the official holder's names, which public code calls

    def get_client_config(self) -> types.ClientConfigResponse:
        """The service's client config, read on first use (the official holder's name)."""
        return self.client_config

    def run_coroutine_threadsafe(self, coro: Coroutine[Any, Any, T]) -> APIFuture[T]:
        """Run ``coro`` on a thread with an event loop of its own; the future of its result."""
        import asyncio

        if not asyncio.iscoroutine(coro):
            raise InvalidInputError("coro", f"must be a coroutine, got {type(coro).__name__}")
        out: APIFuture[T] = APIFuture(request_type="Coroutine")

        def run() -> None:
            try:
                out.try_set_result(asyncio.run(coro))
            except BaseException as e:  # delivered to the caller through the future
                out.try_set_exception(e)

        threading.Thread(target=run, name="tinker-lite-coroutine", daemon=True).start()
        return out

    def close(
        self,
        reason: FinishReason = "success",
        detail: str | None = None,
        *,
        timeout: float = 10.0,
        sdk_method: str | None = None,
    ) -> None:
        """End the session and stop every thread (idempotent; about ``timeout`` s; §8.5)."""
        finish = types.SessionFinishRequest(reason=types.SessionFinishReason(reason), detail=detail)
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + timeout
        self._closing.set()
        try:
            self._dynamic.stop(timeout=min(1.0, timeout))
            heartbeat = self._heartbeat_ref[0]
            if heartbeat is not None:
                heartbeat.stop(timeout=min(2.0, timeout))
            telemetry = self._telemetry_ref[0]
            if telemetry is not None:
                telemetry.session_end()
                telemetry.close(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
            session_id = self._session_id
            if self._started.is_set() and session_id is not None:
                read_timeout = max(0.5, min(10.0, deadline - time.monotonic()))
                try:
                    self._api.finish_session(
                        session_id, finish, sdk_method=sdk_method, read_timeout=read_timeout
                    )
                except NotFoundError:
                    logger.debug("The service has no session finish endpoint (404); ignored")
                except TinkerError as e:
                    logger.info("Could not finish session %s: %s", session_id, redact(str(e)))
        finally:
            self.poller.close(timeout=max(0.5, deadline - time.monotonic()))
            self._finalizer()  # closes the transport and joins what is left
