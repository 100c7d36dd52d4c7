"""ServiceClient: the factory of training, sampling and REST clients sharing one connection
(docs/api.rst, "Clients")."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from tinker_lite import types
from tinker_lite._api import endpoints
from tinker_lite._api.endpoints import CONSOLE_URL
from tinker_lite._codec.chunking import ChunkLimits
from tinker_lite._context import FINISH_REASONS, ClientContext, FinishReason
from tinker_lite._deprecation import deprecated
from tinker_lite._errors import InvalidInputError, NotFoundError
from tinker_lite._futures.async_twins import async_twin
from tinker_lite._futures.future import APIFuture, chain, flatten
from tinker_lite._repr import tolerant_repr
from tinker_lite._secrets import redact_url
from tinker_lite._session.journal import Journal
from tinker_lite._session.settings import DEFAULT_SAMPLE_WORKERS, LOCAL_BASE_URL, resolve_settings
from tinker_lite._training import create as _training_create
from tinker_lite._training.args import check_flag

if TYPE_CHECKING:
    import requests

    from tinker_lite._session.holder import SessionHolder
    from tinker_lite._training.loss_handle import LossHandle, PerDatumLossFn
    from tinker_lite.rest_client import RestClient
    from tinker_lite.sampling_client import BackcompatSamplingClientFuture
    from tinker_lite.training_client import BackcompatTrainingClientFuture, TrainingClient

__all__ = ["LOCAL_BASE_URL", "ServiceClient"]

logger = logging.getLogger("tinker_lite.service_client")


# Guards each ServiceClient's custom losses by traced key (their number is their upload's).
_custom_losses_lock = threading.Lock()


class ServiceClient:
    """Connects to the Tinker service and creates training, sampling and REST clients.

    The official 0.38 arguments, plus keyword-only options (``stall_timeout``, ``journal``,
    ``requests_session``, ...): docs/api.rst, "ServiceClient's arguments"."""

    def __init__(
        self,
        user_metadata: Mapping[str, Any] | None = None,
        project_id: str | None = None,
        *,
        display_name: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        default_headers_overrides: Mapping[str, str] | None = None,
        stall_timeout: float | None = None,
        startup_timeout: float | None = None,
        wire: str = "auto",
        verify: bool | str = True,
        telemetry: bool | None = None,
        tags: Sequence[str] | None = None,
        default_headers: Mapping[str, str] | None = None,
        sample_workers: int = DEFAULT_SAMPLE_WORKERS,
        max_retries: int | None = None,
        journal: str | os.PathLike[str] | Journal | None = None,
        requests_session: requests.Session | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            # As 0.38 does: unknown keywords (public code passes timeout=) are ignored, with
            # the official warning, word for word.
            warnings.warn(
                f"ServiceClient ignores unsupported arguments: {', '.join(sorted(kwargs))}. "
                "Passing them will be an error in a future version of the Tinker SDK.",
                FutureWarning,
                stacklevel=2,
            )
        if isinstance(user_metadata, str):
            # The value may be an API key passed in the old tinker_lite order: never echo it.
            raise InvalidInputError(
                "user_metadata",
                "got a string; the first positional argument is user_metadata (the official "
                "0.38 order), not the API key",
                "pass the key as ServiceClient(api_key=...)",
            )
        if isinstance(project_id, Mapping):
            raise InvalidInputError("project_id", "must be a string, got a mapping")
        settings = resolve_settings(
            api_key=api_key,
            base_url=base_url,
            project_id=project_id,
            tags=tags,
            stall_timeout=stall_timeout,
            startup_timeout=startup_timeout,
            wire=wire,
            verify=verify,
            telemetry=telemetry,
            user_metadata=user_metadata,
            display_name=display_name,
            default_headers={**(default_headers or {}), **(default_headers_overrides or {})},
            sample_workers=sample_workers,
            max_retries=max_retries,
            journal=journal,
            requests_session=requests_session,
            allow_local=True,
        )
        self._context = ClientContext(settings)

    @classmethod
    def _on_context(cls, context: ClientContext) -> ServiceClient:
        """A ServiceClient over an existing context (tests inject clocks this way)."""
        service = cls.__new__(cls)
        service._context = context
        return service

    @tolerant_repr
    def __repr__(self) -> str:
        return (
            f"ServiceClient(base_url={redact_url(self._context.base_url)!r}, closed={self.closed})"
        )

    @property
    def base_url(self) -> str:
        """The service's base URL (the local server's when started with ``local://``)."""
        return self._context.base_url

    @property
    def session_id(self) -> str | None:
        """The id of this client's session on the service (started on first use)."""
        return self._context.holder.session_id

    @property
    def journal(self) -> Journal | None:
        """The run journal completed operations are recorded in (``None``: off)."""
        return self._context.journal

    @property
    def holder(self) -> SessionHolder:
        """The session holder shared by this client's training, sampling and REST clients."""
        return self._context.holder

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._context.closed

    def chunk_limits(self) -> ChunkLimits:
        """Forward/forward_backward chunk limits (docs/protocol.rst §7.4)."""
        return self._context.api.training.chunk_limits()

    @deprecated(
        "ServiceClient.get_server_capabilities() is deprecated as in the official SDK; use "
        "RestClient(...).get_server_capabilities(), which needs no ServiceClient."
    )
    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        """Deprecated: use :meth:`RestClient.get_server_capabilities`."""
        self._context.check_open()
        return self._context.api.request(
            endpoints.GET_SERVER_CAPABILITIES, sdk_method="ServiceClient.get_server_capabilities"
        )

    def create_lora_training_client(  # noqa: PLR0917 - the official positional signature
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: Mapping[str, str] | None = None,
        optimizer: types.OptimizerConfig | None = None,
    ) -> BackcompatTrainingClientFuture:
        """Create a LoRA training run on ``base_model``; the future of its TrainingClient, at once
        (arguments checked now)."""
        from tinker_lite.training_client import BackcompatTrainingClientFuture, TrainingClient

        self._context.check_open()
        if optimizer is not None and not isinstance(
            optimizer, (types.AdamOptimizerConfig, types.DimuonOptimizerConfig)
        ):
            raise InvalidInputError(
                "optimizer",
                f"must be a types.AdamOptimizerConfig or types.DimuonOptimizerConfig, got "
                f"{type(optimizer).__name__}",
                "e.g. optimizer=types.DimuonOptimizerConfig()",
            )
        lora = types.LoraConfig(
            rank=rank,
            seed=seed,
            train_unembed=train_unembed,
            train_mlp=train_mlp,
            train_attn=train_attn,
        )
        steps = _training_create.create_model_steps(
            TrainingClient,
            self._context,
            base_model,
            lora,
            user_metadata=dict(user_metadata) if user_metadata is not None else None,
            sdk_method="ServiceClient.create_lora_training_client",
            optimizer=optimizer,
        )
        return BackcompatTrainingClientFuture(
            _training_create.in_background(self._context, steps, request_type="CreateModel")
        )

    def create_training_client_from_state(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: Mapping[str, str] | None = None,
        weights_access_token: str | None = None,
        optimizer: types.OptimizerConfig | None = None,
    ) -> BackcompatTrainingClientFuture:
        """Create a training run from a saved state (``tinker://<run>/weights/<name>``) with a fresh
        optimizer; the future of its TrainingClient."""
        return self._from_state(
            path,
            base_model,
            user_metadata,
            weights_access_token,
            optimizer,
            optimizer_state=False,
        )

    def create_training_client_from_state_with_optimizer(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: Mapping[str, str] | None = None,
        weights_access_token: str | None = None,
    ) -> BackcompatTrainingClientFuture:
        """Like :meth:`create_training_client_from_state`, restoring the optimizer state too."""
        return self._from_state(
            path, base_model, user_metadata, weights_access_token, None, optimizer_state=True
        )

    def _from_state(
        self,
        path: str,
        base_model: str | None,
        user_metadata: Mapping[str, str] | None,
        weights_access_token: str | None,
        optimizer_config: types.OptimizerConfig | None,
        *,
        optimizer_state: bool,
    ) -> BackcompatTrainingClientFuture:
        from tinker_lite.training_client import BackcompatTrainingClientFuture, TrainingClient

        context = self._context
        context.check_open()
        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(path)
        suffix = "_with_optimizer" if optimizer_state else ""
        method = f"ServiceClient.create_training_client_from_state{suffix}"
        caller_metadata = dict(user_metadata) if user_metadata is not None else None
        # docs/protocol.rst §7.1: numbered in call order, before anything is sent.
        model_seq_id = context.holder.get_training_client_id()

        def start() -> Future[TrainingClient]:
            # On the REST threads: which path applies may take connecting to find out.
            if context.holder.client_config_from_server:
                steps = _training_create.from_state_steps(
                    TrainingClient,
                    context,
                    parsed.tinker_path,
                    model_seq_id=model_seq_id,
                    optimizer=optimizer_state,
                    optimizer_config=optimizer_config,
                    base_model=base_model,
                    user_metadata=caller_metadata,
                    weights_access_token=weights_access_token,
                    sdk_method=method,
                )
                return _training_create.in_background(context, steps, request_type="LoadWeights")
            # A service without client/config cannot create a model from a load: weights_info,
            # create_model, then load_weights (docs/protocol.rst §4.3).
            api = context.api
            try:
                info: types.WeightsInfoResponse | None = api.request(
                    endpoints.WEIGHTS_INFO,
                    body=types.WeightsInfoRequest(tinker_path=parsed.tinker_path),
                    sdk_method=method,
                )
            except NotFoundError:
                logger.debug("weights_info answered 404; reading the training run instead")
                info = None
            if info is not None:
                lora = types.LoraConfig(
                    rank=info.lora_rank or 32,
                    train_unembed=True if info.train_unembed is None else info.train_unembed,
                    train_mlp=True if info.train_mlp is None else info.train_mlp,
                    train_attn=True if info.train_attn is None else info.train_attn,
                )
                source_model, metadata = info.base_model, caller_metadata
            else:
                # docs/protocol.rst §4.3 (0.4.1): read the run; its metadata is merged with the
                # caller's.
                run = api.request(
                    endpoints.GET_TRAINING_RUN,
                    sdk_method=method,
                    training_run_id=parsed.training_run_id,
                )
                lora = types.LoraConfig(rank=run.lora_rank or 32)
                source_model = run.base_model
                metadata = {**(run.user_metadata or {}), **(caller_metadata or {})}
            # the restored optimizer state needs a run of the checkpoint's optimizer family
            restored = info.optimizer_config if optimizer_state and info is not None else None
            send, finish = _training_create.create_model_steps(
                TrainingClient,
                context,
                base_model or source_model,
                lora,
                user_metadata=metadata,
                sdk_method=method,
                optimizer=restored,
                model_seq_id=model_seq_id,
            )
            client = finish(send().result())
            try:
                client._load(
                    parsed.tinker_path, optimizer=optimizer_state, sdk_method=method
                ).result()
            except BaseException:
                client._shutdown()
                raise
            return APIFuture.completed(client)

        started = context.run_in(context.rest_pool(), start, request_type="LoadWeights")
        return BackcompatTrainingClientFuture(flatten(started))

    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: object | None = None,
        record_stability_info: bool = False,
    ) -> BackcompatSamplingClientFuture:
        """The future of a SamplingClient for ``model_path`` (saved weights), ``base_model``, or
        both (the weights, with their base model named)."""
        from tinker_lite.sampling_client import SamplingClient

        del retry_config
        return SamplingClient._create(
            self._context,
            model_path,
            base_model,
            sdk_method="ServiceClient.create_sampling_client",
            record_stability_info=record_stability_info,
        )

    @deprecated(
        "ServiceClient.create_rest_client() is deprecated as in the official SDK; construct "
        "RestClient(base_url=..., api_key=...) directly (or RestClient(service_client))."
    )
    def create_rest_client(self) -> RestClient:
        """Deprecated: construct :class:`RestClient` directly."""
        return self._rest_client()

    def _rest_client(self) -> RestClient:
        from tinker_lite.rest_client import RestClient

        self._context.check_open()
        return RestClient._on_context(self._context)

    def copy_weights(
        self,
        path: str,
        *,
        ttl_seconds: int | None = None,
        weights_access_token: str | None = None,
    ) -> APIFuture[str]:
        """Copy weights into this client's project (see :meth:`RestClient.copy_weights`); the future
        gives the copy's path."""
        return self._rest_client().copy_weights(
            path,
            self._context.holder.settings.project_id,
            ttl_seconds=ttl_seconds,
            weights_access_token=weights_access_token,
        )

    def create_custom_loss(
        self, fn: PerDatumLossFn, input_ranks: Mapping[str, types.CustomLossInputRank]
    ) -> APIFuture[LossHandle]:
        """Trace ``fn`` into a custom loss for ``TrainingClient.forward_backward_custom``; the
        future of its handle (docs/api.rst, "Custom losses")."""
        from tinker_lite._training.loss_handle import encode_graph, loss_inputs, trace_loss

        self._context.check_open()
        inputs = loss_inputs(fn, input_ranks)
        api = self._context.api
        handle = trace_loss(fn, inputs, self._context.holder.ensure_session())
        by_key: dict[str, LossHandle] = self.__dict__.setdefault("_custom_losses", {})
        with _custom_losses_lock:
            existing = by_key.get(handle.key)
            if existing is not None:
                raise InvalidInputError(
                    "fn",
                    f"this session already made {existing.name!r} with the same traced loss",
                    "reuse its LossHandle",
                )
            seq_id = len(by_key)
            by_key[handle.key] = handle
        if not self._context.holder.client_config.custom_loss_server_side:
            return APIFuture.completed(handle)
        request = types.CreateCustomLossRequest(
            session_id=handle.session_id,
            custom_loss_seq_id=seq_id,
            name=handle.name,
            inputs=list(handle.inputs),
            graph=encode_graph(handle),
        )
        created = api.training.submit(
            endpoints.CREATE_CUSTOM_LOSS,
            request,
            sdk_method="ServiceClient.create_custom_loss",
            created_at=time.monotonic(),
        )
        return chain(created, lambda answer: dataclasses.replace(handle, loss_id=answer.loss_id))

    def get_console_url(self) -> str:
        """The Tinker Console page of this session (of all sessions before it starts)."""
        session_id = self._context.holder.started_session_id
        if session_id is None:
            return f"{CONSOLE_URL}/sessions"
        return f"{CONSOLE_URL}/sessions/{session_id}"

    def close(
        self, status: str = "success", detail: str | None = None, *, wait: bool = True
    ) -> APIFuture[None]:
        """Finish (``wait``) or drop what was queued, end the session as ``status`` and stop every
        thread (idempotent; docs/api.rst, "Closing"). Returns a completed future."""
        if not isinstance(status, str) or status not in FINISH_REASONS:
            raise InvalidInputError(
                "status",
                f"must be 'success', 'errored' or 'interrupted', got {status!r}",
            )
        if detail is not None and not isinstance(detail, str):
            raise InvalidInputError("detail", f"must be a string or None, got {detail!r}")
        check_flag("wait", wait)
        self._context.close(cast(FinishReason, status), detail, wait=wait)
        return APIFuture.completed(None)

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Leaving normally is ``close()``; an exception drops what was queued (docs/api.rst)."""
        if exc_type is None:
            self.close("success")
            return
        reason: FinishReason = "errored" if issubclass(exc_type, Exception) else "interrupted"
        self._context.close(
            reason,
            wait=False,
            why=f"{exc_type.__name__} left the 'with ServiceClient' block",
        )

    # -- the official *_async twins (deprecated there too) ---------------------------------------

    create_lora_training_client_async = async_twin(create_lora_training_client)
    create_sampling_client_async = async_twin(create_sampling_client)
    create_training_client_from_state_async = async_twin(create_training_client_from_state)
    create_training_client_from_state_with_optimizer_async = async_twin(
        create_training_client_from_state_with_optimizer
    )
    get_server_capabilities_async = async_twin(get_server_capabilities, blocks=True)
