"""ServiceClient: the entry point that creates training, sampling and REST clients.

``ServiceClient()`` opens a session with the service (WIRE.md §10, §P.10: client config, then
``create_session`` and a heartbeat every 10 s); every client it creates shares that session, its
connection pools and its counters (WIRE.md §6.1). Close it (or use ``with``) to end the session
and stop every background thread.

``base_url="local://"`` (or ``TINKER_BASE_URL=local://``) starts an offline
:class:`tinker_lite.local.LocalServer` in this process, backed by a tiny numpy model, and stops
it on :meth:`ServiceClient.close`.

Threading contract: every method may be called from any thread. A ServiceClient owns one
single-thread executor per TrainingClient (``tinker-lite-train``; submits in ``seq_id`` order),
one wide executor for sampling submits shared by its SamplingClients (``tinker-lite-sample``),
one small executor for REST calls (``tinker-lite-rest``), and the session holder's poller,
heartbeat and telemetry threads. :meth:`close` stops and joins all of them.
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tinker_lite import types
from tinker_lite._chunking import DEFAULT_LIMITS, ChunkLimits
from tinker_lite._errors import InvalidInputError, NotFoundError
from tinker_lite._futures import APIFuture
from tinker_lite._futures import json_decoder as _json_decoder
from tinker_lite._http import ClientClosedError, PoolKind, path_param
from tinker_lite._journal import Journal
from tinker_lite._retry import DEFAULT_RETRY_POLICY
from tinker_lite._session import ENV_BASE_URL, FinishReason, SessionHolder

if TYPE_CHECKING:
    from tinker_lite.rest_client import RestClient
    from tinker_lite.sampling_client import SamplingClient
    from tinker_lite.training_client import TrainingClient

__all__ = ["LOCAL_BASE_URL", "ServiceClient"]

logger = logging.getLogger("tinker_lite.service_client")

T = TypeVar("T")

LOCAL_BASE_URL = "local://"

CREATE_MODEL_PATH = "/api/v1/create_model"
CREATE_SAMPLING_SESSION_PATH = "/api/v1/create_sampling_session"
CAPABILITIES_PATH = "/api/v1/get_server_capabilities"
WEIGHTS_INFO_PATH = "/api/v1/weights_info"

FINISH_REASONS = ("success", "errored", "interrupted")

DEFAULT_SAMPLE_WORKERS = 64
DEFAULT_REST_WORKERS = 4

# Live ServiceClients of this process, so an unpickled SamplingClient finds its session.
_LIVE: weakref.WeakSet[ServiceClient] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def _is_local(url: str | None) -> bool:
    return url is not None and url.strip().lower().startswith(LOCAL_BASE_URL)


class ServiceClient:
    """Connects to the Tinker service and creates training, sampling and REST clients.

    ``api_key`` defaults to ``TINKER_API_KEY`` (an explicit argument wins), ``base_url`` to
    ``TINKER_BASE_URL`` or the public service; ``"local://"`` runs the offline local server in
    this process. ``user_metadata`` is attached to the session and ``project_id`` (default
    ``TINKER_PROJECT_ID``) picks the project.

    Keyword-only options: ``stall_timeout`` (seconds without any answer before a pending
    request fails; default 300, or ``TINKER_LITE_STALL_TIMEOUT``), ``wire`` (``"auto"``:
    protobuf forward/forward_backward when the service publishes a client config, JSON
    otherwise; or force ``"protobuf"`` / ``"json"``), ``verify`` (TLS verification, or a CA
    bundle path), ``telemetry`` (default ``TINKER_TELEMETRY``), ``tags`` (default
    ``TINKER_TAGS``), ``default_headers`` (added to every request), ``sample_workers``
    (threads submitting sample requests), ``max_retries`` (HTTP retries of one request after
    a connection error or a 408/409/429/5xx answer; default 10, start-up requests at most 2)
    and ``journal``.

    ``journal`` (a file path; default ``TINKER_LITE_JOURNAL``, unset: no journal) turns on
    the run journal: every completed operation of the clients created here (``create_model``,
    each forward / forward_backward chunk, ``optim_step``, saves and loads, ``sample``)
    appends one JSON line with its kind, status, request id, ``seq_id``, duration and token
    count to that file before the operation's future completes (see :doc:`configuration`).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        user_metadata: Mapping[str, Any] | None = None,
        project_id: str | None = None,
        *,
        stall_timeout: float | None = None,
        wire: str = "auto",
        verify: bool | str = True,
        telemetry: bool | None = None,
        tags: Sequence[str] | None = None,
        default_headers: Mapping[str, str] | None = None,
        sample_workers: int = DEFAULT_SAMPLE_WORKERS,
        max_retries: int | None = None,
        journal: str | os.PathLike[str] | Journal | None = None,
        _session_options: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(sample_workers, bool) or not isinstance(sample_workers, int):
            raise InvalidInputError("sample_workers", f"must be an int, got {sample_workers!r}")
        if sample_workers < 1:
            raise InvalidInputError("sample_workers", f"must be >= 1, got {sample_workers}")
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._closed = False
        self._sample_workers = sample_workers
        self._sample_executor: ThreadPoolExecutor | None = None
        self._rest_executor: ThreadPoolExecutor | None = None
        self._train_executors: list[ThreadPoolExecutor] = []
        self._local_server: Any = None
        self._journal = Journal.resolve(journal)
        options = dict(_session_options or {})
        # A session-less client (``create_session=False``) backs a standalone RestClient.
        self._session_less = options.get("create_session", True) is False
        if max_retries is not None:
            policy = options.get("retry_policy", DEFAULT_RETRY_POLICY)
            options["retry_policy"] = dataclasses.replace(policy, max_retries=max_retries)
        requested_url = base_url if base_url else os.environ.get(ENV_BASE_URL)
        if _is_local(requested_url):
            base_url = self._start_local_server()
        try:
            self._holder = SessionHolder(
                api_key=api_key,
                base_url=base_url,
                user_metadata=user_metadata,
                project_id=project_id,
                stall_timeout=stall_timeout,
                wire=wire,
                verify=verify,
                telemetry=telemetry,
                tags=tags,
                default_headers=default_headers,
                **options,
            )
        except BaseException:
            self._stop_local_server()
            raise
        with _LIVE_LOCK:
            _LIVE.add(self)
        _ensure_exit_hook()
        # WIRE.md §P.12: an unclosed client is closed at interpreter exit (a started local
        # server is stopped and its temporary data removed).
        ref = weakref.ref(self)
        self._atexit_hook: Callable[[], None] = lambda: _close_at_exit(ref)
        atexit.register(self._atexit_hook)

    def _start_local_server(self) -> str:
        # Imported here: the client modules never import the local server at module level.
        from tinker_lite.local import server as local_server

        server = local_server.LocalServer()
        url = server.start()
        self._local_server = server
        logger.info("Started the offline local server at %s", url)
        return url

    def _stop_local_server(self) -> None:
        server, self._local_server = self._local_server, None
        if server is not None:
            server.stop()

    def __repr__(self) -> str:
        return f"ServiceClient(base_url={self._holder.base_url!r}, closed={self._closed})"

    # -- properties ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The service's base URL (the local server's when started with ``local://``)."""
        return self._holder.base_url

    @property
    def session_id(self) -> str | None:
        """The id of this client's session on the service."""
        return self._holder.session_id

    @property
    def journal(self) -> Journal | None:
        """The run journal completed operations are recorded in (``None``: off)."""
        return self._journal

    def _journal_watch(
        self,
        future: APIFuture[Any],
        kind: str,
        *,
        seq_id: int | None = None,
        tokens: int | Callable[[Any], int | None] | None = None,
        model_id: str | None = None,
        started: float | None = None,
        defer: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        """Record ``future``'s outcome in the journal when it completes (no journal: nothing)."""
        journal = self._journal
        if journal is not None:
            journal.watch(
                future,
                kind,
                seq_id=seq_id,
                tokens=tokens,
                model_id=model_id,
                started=started,
                defer=defer,
            )

    @property
    def holder(self) -> SessionHolder:
        """The session holder shared by this client's training, sampling and REST clients."""
        return self._holder

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def chunk_limits(self) -> ChunkLimits:
        """Forward/forward_backward chunk limits: the service's client config, else WIRE.md §6.4."""
        if self._holder.client_config_from_server:
            config = self._holder.client_config
            return ChunkLimits(
                max_datums=max(1, config.fwdbwd_max_chunk_len),
                max_numbers=None,
                max_bytes=max(1, config.fwdbwd_max_chunk_bytes_count),
            )
        return DEFAULT_LIMITS

    # -- service calls ---------------------------------------------------------------------------

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        """Return the base models the service supports."""
        self._check_open()
        resp = self._holder.submit(
            PoolKind.TRAIN,
            "GET",
            CAPABILITIES_PATH,
            content_type=None,
            sdk_method="ServiceClient.get_server_capabilities",
        )
        return self._holder.parse(resp, types.GetServerCapabilitiesResponse)

    def create_lora_training_client(  # noqa: PLR0917 - the official positional signature
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: Mapping[str, str] | None = None,
    ) -> TrainingClient:
        """Create a LoRA training run on ``base_model`` and return its TrainingClient.

        Blocks until the service has created the model. ``rank`` must be a positive int; at
        least one of ``train_mlp`` / ``train_attn`` / ``train_unembed`` must be true.
        """
        self._check_open()
        lora = types.LoraConfig(
            rank=rank,
            seed=seed,
            train_unembed=train_unembed,
            train_mlp=train_mlp,
            train_attn=train_attn,
        )
        return self._create_training_client(
            base_model,
            lora,
            user_metadata=dict(user_metadata) if user_metadata is not None else None,
            sdk_method="ServiceClient.create_lora_training_client",
        )

    def _create_training_client(
        self,
        base_model: str,
        lora: types.LoraConfig,
        *,
        user_metadata: dict[str, Any] | None,
        sdk_method: str,
    ) -> TrainingClient:
        from tinker_lite.training_client import TrainingClient

        if not isinstance(base_model, str) or not base_model:
            raise InvalidInputError(
                "base_model", f"must be a model name, got {base_model!r}", "e.g. 'Qwen/Qwen3-8B'"
            )
        session_id = self._holder.session_id
        if session_id is None:  # pragma: no cover - a ServiceClient always has a session
            raise InvalidInputError("session", "this client has no session")
        # WIRE.md §6.1: the number is taken before create_model is sent; a failure consumes it.
        model_seq_id = self._holder.next_model_seq_id()
        request = types.CreateModelRequest(
            session_id=session_id,
            model_seq_id=model_seq_id,
            base_model=base_model,
            user_metadata=user_metadata,
            lora_config=lora,
        )
        created_at = time.monotonic()
        source: APIFuture[types.CreateModelResponse]
        try:
            # WIRE.md §5.7: create_model gets HTTP retries only (no operation-level re-send).
            resp = self._holder.request(
                PoolKind.TRAIN, "POST", CREATE_MODEL_PATH, body_obj=request, sdk_method=sdk_method
            )
            submitted = self._holder.parse(resp, types.UntypedAPIFuture, what="create_model")
        except Exception as e:
            source = APIFuture.failed(e)
        else:
            source = self._holder.poller.poll(
                submitted.request_id,
                "CreateModel",
                _json_decoder(types.CreateModelResponse),
                created_at=created_at,
            )
        # Watched first: the journal line is written before the result is returned.
        self._journal_watch(
            source,
            "create_model",
            seq_id=0,
            model_id=None,
            started=created_at,
        )
        future: APIFuture[types.CreateModelResponse] = APIFuture(request_type="CreateModel")
        future.forward_from(source)
        model_id = future.result().model_id
        return TrainingClient(self, model_id, base_model=base_model, lora_config=lora)

    def create_training_client_from_state(
        self, path: str, user_metadata: Mapping[str, str] | None = None
    ) -> TrainingClient:
        """Create a training run from a saved state (``tinker://<run>/weights/<name>``).

        The new run has the checkpoint's base model and LoRA settings and starts from its
        weights; the optimizer state starts fresh (see
        :meth:`create_training_client_from_state_with_optimizer`). Blocks until loaded.
        """
        return self._from_state(path, user_metadata, optimizer=False)

    def create_training_client_from_state_with_optimizer(
        self, path: str, user_metadata: Mapping[str, str] | None = None
    ) -> TrainingClient:
        """Like :meth:`create_training_client_from_state`, restoring the optimizer state too."""
        return self._from_state(path, user_metadata, optimizer=True)

    def _from_state(
        self, path: str, user_metadata: Mapping[str, str] | None, *, optimizer: bool
    ) -> TrainingClient:
        self._check_open()
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(path)
        method = (
            "ServiceClient.create_training_client_from_state_with_optimizer"
            if optimizer
            else "ServiceClient.create_training_client_from_state"
        )
        caller_metadata = dict(user_metadata) if user_metadata is not None else None
        info = self._weights_info(parsed.tinker_path, method)
        if info is not None:
            lora = types.LoraConfig(
                rank=info.lora_rank or 32,
                train_unembed=True if info.train_unembed is None else info.train_unembed,
                train_mlp=True if info.train_mlp is None else info.train_mlp,
                train_attn=True if info.train_attn is None else info.train_attn,
            )
            base_model, metadata = info.base_model, caller_metadata
        else:
            # WIRE.md §6.2 (0.4.1): read the run; its metadata is merged with the caller's.
            run = self._get_training_run(parsed.training_run_id, method)
            lora = types.LoraConfig(rank=run.lora_rank or 32)
            base_model = run.base_model
            metadata = {**(run.user_metadata or {}), **(caller_metadata or {})}
        client = self._create_training_client(
            base_model, lora, user_metadata=metadata, sdk_method=method
        )
        try:
            client._load(
                parsed.tinker_path,
                optimizer=optimizer,
                sdk_method=method,
                kind="load_state_with_optimizer" if optimizer else "load_state",
            ).result()
        except BaseException:
            client._shutdown()
            raise
        return client

    def _weights_info(self, tinker_path: str, sdk_method: str) -> types.WeightsInfoResponse | None:
        try:
            resp = self._holder.submit(
                PoolKind.TRAIN,
                "POST",
                WEIGHTS_INFO_PATH,
                body_obj=types.WeightsInfoRequest(tinker_path=tinker_path),
                sdk_method=sdk_method,
            )
        except NotFoundError:
            logger.debug("weights_info answered 404; reading the training run instead")
            return None
        return self._holder.parse(resp, types.WeightsInfoResponse)

    def _get_training_run(self, run_id: str, sdk_method: str) -> types.TrainingRun:
        resp = self._holder.submit(
            PoolKind.TRAIN,
            "GET",
            f"/api/v1/training_runs/{path_param(run_id)}",
            content_type=None,
            sdk_method=sdk_method,
        )
        return self._holder.parse(resp, types.TrainingRun)

    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: object | None = None,
    ) -> SamplingClient:
        """Create a sampler for saved weights (``model_path``) or a base model (``base_model``).

        Exactly one of the two must be given; ``model_path`` is a
        ``tinker://<run>/sampler_weights/<name>`` path from ``save_weights_for_sampler``.
        ``retry_config`` is accepted for compatibility; retries follow WIRE.md §P.
        """
        del retry_config
        self._check_open()
        return self._create_sampling_client(
            model_path, base_model, sdk_method="ServiceClient.create_sampling_client"
        )

    def _create_sampling_client(
        self, model_path: str | None, base_model: str | None, *, sdk_method: str
    ) -> SamplingClient:
        from tinker_lite.sampling_client import SamplingClient

        if (model_path is None) == (base_model is None):
            raise InvalidInputError(
                "model_path/base_model",
                "both are set" if model_path is not None else "neither is set",
                "pass exactly one: model_path='tinker://<run>/sampler_weights/<name>' or "
                "base_model='...'",
            )
        if model_path is not None:
            _check_sampleable(model_path)
        elif not isinstance(base_model, str) or not base_model:
            raise InvalidInputError("base_model", f"must be a model name, got {base_model!r}")
        session_id = self._holder.session_id
        if session_id is None:  # pragma: no cover - a ServiceClient always has a session
            raise InvalidInputError("session", "this client has no session")
        request = types.CreateSamplingSessionRequest(
            session_id=session_id,
            sampling_session_seq_id=self._holder.next_sampling_session_seq_id(),
            base_model=base_model,
            model_path=model_path,
        )
        # WIRE.md §5.7: create_sampling_session gets HTTP retries only.
        resp = self._holder.request(
            PoolKind.SESSION,
            "POST",
            CREATE_SAMPLING_SESSION_PATH,
            body_obj=request,
            sdk_method=sdk_method,
        )
        created = self._holder.parse(resp, types.CreateSamplingSessionResponse)
        return SamplingClient(
            self,
            created.sampling_session_id,
            model_path=model_path,
            base_model=base_model,
        )

    def create_rest_client(self) -> RestClient:
        """Return a RestClient for runs, checkpoints, sessions and samplers."""
        from tinker_lite.rest_client import RestClient

        self._check_open()
        return RestClient(self)

    # -- executors (used by the clients) ----------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("The ServiceClient is closed.")

    def _new_train_executor(self) -> ThreadPoolExecutor:
        with self._lock:
            self._check_open()
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinker-lite-train")
            self._train_executors.append(executor)
            return executor

    def _sample_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            self._check_open()
            if self._sample_executor is None:
                self._sample_executor = ThreadPoolExecutor(
                    max_workers=self._sample_workers, thread_name_prefix="tinker-lite-sample"
                )
            return self._sample_executor

    def _rest_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            self._check_open()
            if self._rest_executor is None:
                self._rest_executor = ThreadPoolExecutor(
                    max_workers=DEFAULT_REST_WORKERS, thread_name_prefix="tinker-lite-rest"
                )
            return self._rest_executor

    def _run_in(
        self, pool: ThreadPoolExecutor, fn: Callable[[], T], *, request_type: str | None = None
    ) -> APIFuture[T]:
        """Run ``fn`` on ``pool``; its result or error is delivered to the returned future."""
        out: APIFuture[T] = APIFuture(request_type=request_type)

        def run() -> None:
            if out.cancelled():
                return
            try:
                value = fn()
            except BaseException as e:
                out.try_set_exception(e)
            else:
                out.try_set_result(value)

        try:
            pool.submit(run)
        except RuntimeError:
            out.try_set_exception(ClientClosedError("The ServiceClient is closed."))
        return out

    @property
    def _closing_event(self) -> threading.Event:
        return self._closing

    # -- shutdown --------------------------------------------------------------------------------

    def close(self, status: str = "success", detail: str | None = None) -> APIFuture[None]:
        """End the session, fail pending requests and stop every thread (idempotent).

        ``status`` tells the service how the session ended: ``"success"``, ``"errored"`` or
        ``"interrupted"`` (the official SDK's argument name); ``detail`` is an optional
        explanation. Stops the heartbeat, flushes
        telemetry, sends ``POST /api/v1/sessions/{id}/finish`` (WIRE.md §P.12), then joins the
        polling, submit and REST threads and stops the local server if one was started.

        Returns a future that is already complete when ``close`` returns, so code that calls
        ``.result()`` on it works as well as code that ignores it. Closing again sends nothing.
        """
        if not isinstance(status, str) or status not in FINISH_REASONS:
            raise InvalidInputError(
                "status",
                f"must be 'success', 'errored' or 'interrupted', got {status!r}",
            )
        if detail is not None and not isinstance(detail, str):
            raise InvalidInputError("detail", f"must be a string or None, got {detail!r}")
        with self._lock:
            if self._closed:
                return APIFuture.completed(None)
            self._closed = True
            executors = list(self._train_executors)
            for pool in (self._sample_executor, self._rest_executor):
                if pool is not None:
                    executors.append(pool)
        self._closing.set()
        atexit.unregister(self._atexit_hook)
        with _LIVE_LOCK:
            _LIVE.discard(self)
        try:
            self._holder.close(cast(FinishReason, status), detail, sdk_method="ServiceClient.close")
        finally:
            for executor in executors:
                executor.shutdown(wait=True)
            self._stop_local_server()
        return APIFuture.completed(None)

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close with ``"success"``, ``"errored"`` (an exception) or ``"interrupted"``.

        ``KeyboardInterrupt`` and other exceptions that are not :class:`Exception` subclasses
        (``SystemExit``) end the session as interrupted.
        """
        if exc_type is None:
            reason = "success"
        elif issubclass(exc_type, Exception):
            reason = "errored"
        else:
            reason = "interrupted"
        self.close(reason)


def _hide_private_parameters(function: Callable[..., Any]) -> None:
    """Leave ``_``-prefixed parameters out of the signature ``help()`` and the API docs show."""
    signature = inspect.signature(function)
    public = [p for p in signature.parameters.values() if not p.name.startswith("_")]
    setattr(function, "__signature__", signature.replace(parameters=public))  # noqa: B010


# ``_session_options`` (session-holder settings for tinker-lite and tests) is not public API.
_hide_private_parameters(ServiceClient.__init__)

_exit_hook_registered = False


def _close_live_clients() -> None:
    with _LIVE_LOCK:
        clients = list(_LIVE)
    for client in clients:
        try:
            client.close()
        except Exception:  # pragma: no cover - never fail interpreter exit
            logger.debug("closing at exit failed", exc_info=True)


def _ensure_exit_hook() -> None:
    """Close live clients before the interpreter waits for worker threads at exit.

    concurrent.futures joins its worker threads in threading's exit hooks, which run before
    ``atexit``: a submit thread still retrying against a failing service would keep the
    process alive for minutes after an uncaught error. Closing first makes them return at once.
    """
    global _exit_hook_registered
    with _LIVE_LOCK:
        if _exit_hook_registered:
            return
        _exit_hook_registered = True
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - CPython >= 3.9 has it
        return
    try:
        register(_close_live_clients)
    except RuntimeError:  # pragma: no cover - the interpreter is already shutting down
        logger.debug("could not register the exit hook", exc_info=True)


def _close_at_exit(ref: weakref.ref[ServiceClient]) -> None:
    client = ref()
    if client is not None:
        try:
            client.close()
        except Exception:  # pragma: no cover - never fail interpreter exit
            logger.debug("closing at exit failed", exc_info=True)


def _check_sampleable(model_path: str) -> None:
    """Reject a path that cannot be sampled (WIRE.md §3.12; SERVER.md §7)."""
    types.check_tinker_path("model_path", model_path)
    try:
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(model_path)
    except InvalidInputError:
        return  # another path format: let the service decide
    if parsed.checkpoint_type == "training":
        raise InvalidInputError(
            "model_path",
            f"{model_path!r} is a training state (weights/...), which cannot be sampled",
            "save with save_weights_for_sampler(name) and sample from the "
            "tinker://<run>/sampler_weights/<name> path it returns",
        )


def find_live_client(base_url: str) -> ServiceClient | None:
    """Return an open ServiceClient of this process connected to ``base_url``, if any."""
    wanted = base_url.rstrip("/")
    with _LIVE_LOCK:
        for client in list(_LIVE):
            if client._session_less or client.closed:
                continue
            if client.base_url.rstrip("/") == wanted:
                return client
    return None
