"""TrainingClient: forward/backward passes, optimizer steps and checkpoints of one training run,
sent in call order (docs/protocol.rst §7.2; docs/api.rst, "Clients")."""

from __future__ import annotations

import functools
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._api import TrainingRequest, endpoints
from tinker_lite._api.endpoints import CONSOLE_URL, Endpoint
from tinker_lite._codec.chunking import combine_outputs
from tinker_lite._deprecation import deprecated
from tinker_lite._errors import (
    APIResponseValidationError,
    InvalidInputError,
)
from tinker_lite._futures.async_twins import async_future_twin, async_twin
from tinker_lite._futures.client_future import ClientFuture, forwarding_to
from tinker_lite._futures.future import APIFuture, chain, combine
from tinker_lite._repr import tolerant_repr
from tinker_lite._training.args import (
    check_access_token,
    check_flag,
    check_name,
    check_optim_params,
    check_recipients,
    check_user_metadata,
)
from tinker_lite._training.custom_loss import (
    CustomLossFn,
    check_loss_type_input,
    custom_forward_datum,
    schedule_custom,
)
from tinker_lite._training.loss_handle import LossHandle, check_handle_session
from tinker_lite._training.queue import TrainingQueue
from tinker_lite._training.validate import validate
from tinker_lite.sampling_client import (
    BackcompatSamplingClientFuture,
    SamplingClient,
    check_record_stability_info,
    client_context,
)
from tinker_lite.tokenizer import load_tokenizer, resolve_tokenizer_id

if TYPE_CHECKING:
    from tinker_lite._session.holder import SessionHolder
    from tinker_lite.tokenizer import PretrainedTokenizer

__all__ = ["BackcompatTrainingClientFuture", "CustomLossFn", "TrainingClient"]

T = TypeVar("T")

_LOAD_STATE_DEPRECATION = (
    "TrainingClient.load_state*() is deprecated (as in the official SDK) and will not be "
    "supported by future Tinker SDK versions: create a new training client from the "
    "checkpoint with ServiceClient.create_training_client_from_state() or "
    "ServiceClient.create_training_client_from_state_with_optimizer()."
)


class TrainingClient:
    """Trains one LoRA model: forward/backward passes, optimizer steps, checkpoints, sampling.

    Made by :meth:`ServiceClient.create_lora_training_client` (or ``..._from_state``), or with the
    official constructor (docs/api.rst); every training method returns an
    :class:`~tinker_lite.APIFuture` at once."""

    def __init__(
        self,
        holder: object,
        model_seq_id: int | None = None,
        model_id: str | None = None,
        *,
        info: types.GetInfoResponse | None = None,
        base_model: str | None = None,
    ) -> None:
        del model_seq_id  # taken by the caller with get_training_client_id(); nothing to send
        context = client_context(holder, "create_lora_training_client")
        if not isinstance(model_id, str) or not model_id:
            raise InvalidInputError("model_id", f"must be a non-empty string, got {model_id!r}")
        self._context = context
        self._api = context.api
        # The official attribute: public code calls holder.get_session_id() (docs/as_tinker.rst).
        self.holder: SessionHolder = context.holder
        self.model_id = model_id
        self._info = info
        self._base_model = base_model
        self._queue = TrainingQueue(context, model_id, owner=self)
        self._tokenizer: PretrainedTokenizer | None = None
        self._tokenizer_lock = threading.Lock()
        self._vocab_size: int | None = None

    @tolerant_repr
    def __repr__(self) -> str:
        return f"TrainingClient(model_id={self.model_id!r}, base_model={self._base_model!r})"

    def _single(self, build: Callable[[int], TrainingRequest], *, kind: str) -> APIFuture[Any]:
        return self._queue.schedule([build], created_at=time.monotonic(), kind=kind)[0]

    def _submit(
        self,
        kind: str,
        endpoint: Endpoint[Any],
        *,
        sdk_method: str | None = None,
        **fields: Any,
    ) -> APIFuture[Any]:
        """Queue one JSON training request, the row's request model with ``model_id``, ``seq_id``
        and ``fields``, built (and so checked) before its ``seq_id`` is taken."""
        method = sdk_method or f"TrainingClient.{kind}"
        request = endpoint.request_model
        return self._single(
            lambda seq_id: self._api.training.encode_training(
                endpoint,
                request(model_id=self.model_id, seq_id=seq_id, **fields),
                sdk_method=method,
            ),
            kind=kind,
        )

    def forward(
        self,
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Run the model and the loss on ``data`` without computing gradients."""
        return self._forward_backward("forward", data, loss_fn, loss_fn_config)

    def forward_backward(
        self,
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Compute the loss on ``data`` and accumulate its gradients into the model (``loss_fn``,
        checks and chunking: docs/api.rst)."""
        return self._forward_backward("forward_backward", data, loss_fn, loss_fn_config)

    def _forward_backward(
        self,
        kind: Literal["forward", "forward_backward"],
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        created_at = time.monotonic()
        forward_only = kind == "forward"
        self._context.check_open()
        report = validate(
            data,
            loss_fn,
            loss_fn_config,
            limits=self._api.training.chunk_limits(),
            vocab_size=self._vocab_size,
        )
        request_type = "Forward" if forward_only else "ForwardBackward"
        if report.n_datums == 0:
            # docs/protocol.rst §7.4: an empty batch sends nothing.
            return APIFuture.completed(
                types.ForwardBackwardOutput(loss_fn_output_type="", loss_fn_outputs=[], metrics={})
            )
        items = list(data)
        config = dict(loss_fn_config) if loss_fn_config is not None else None
        builds = [
            self._chunk_builder(
                items[c.start : c.stop],
                report.loss_fn,
                config,
                forward_only=forward_only,
                sdk_method=f"TrainingClient.{kind}",
            )
            for c in report.chunks
        ]
        # golden-0.38 (parallel_fwdbwd_chunks): every chunk after the first goes out before it.
        futures = self._queue.schedule(
            builds,
            created_at=created_at,
            kind=kind,
            first_last=self._context.holder.first_chunk_last,
        )
        return combine(futures, combine_outputs, request_type=request_type)

    def _chunk_builder(
        self,
        chunk: list[types.Datum],
        loss_fn: str,
        config: dict[str, float | str] | None,
        *,
        forward_only: bool,
        sdk_method: str,
    ) -> Callable[[int], TrainingRequest]:
        """The encoder of one forward/forward_backward chunk, given its ``seq_id``."""
        return functools.partial(
            self._api.training.encode_forward_backward,
            model_id=self.model_id,
            data=chunk,
            loss_fn=loss_fn,
            loss_fn_config=config,
            forward_only=forward_only,
            wire=self._context.holder.wire_format,
            sdk_method=sdk_method,
        )

    def forward_backward_custom(
        self,
        data: Sequence[types.Datum],
        loss_fn: CustomLossFn | LossHandle,
        *,
        loss_type_input: Literal["logprobs"] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Train on a loss computed from the model's logprobs: a ``loss_fn`` here, or a
        :class:`~tinker_lite.LossHandle` (docs/api.rst, "Custom losses"; docs/protocol.rst §7.6)."""
        check_loss_type_input(loss_type_input)
        items = list(data)
        if isinstance(loss_fn, LossHandle):
            check_handle_session(loss_fn, self._context.holder.ensure_session())
            if loss_fn.loss_id is not None:
                # An uploaded loss runs on the service in one forward_backward (0.38).
                return self.forward_backward(items, "custom", {"loss_id": loss_fn.loss_id})
            loss_fn = loss_fn.as_loss_fn()
        if not callable(loss_fn):
            raise InvalidInputError("loss_fn", "must be callable", "pass a function")
        forward_data = [custom_forward_datum(datum, index) for index, datum in enumerate(items)]
        if not items:
            return APIFuture.completed(
                types.ForwardBackwardOutput(loss_fn_output_type="", loss_fn_outputs=[], metrics={})
            )
        return schedule_custom(
            self._queue,
            items,
            forward_data,
            loss_fn,
            created_at=time.monotonic(),
            limits=self._api.training.chunk_limits(),
            vocab_size=self._vocab_size,
            first_last=self._context.holder.first_chunk_last,
            encode=lambda chunk, forward_only: self._chunk_builder(
                chunk,
                "cross_entropy",
                None,
                forward_only=forward_only,
                sdk_method="TrainingClient.forward_backward_custom",
            ),
        )

    def optim_step(
        self,
        optim_params: types.OptimParams | None = None,
        *,
        adam_params: types.AdamParams | None = None,
    ) -> APIFuture[types.OptimStepResponse]:
        """Apply one optimizer step with the gradients accumulated so far, then clear them
        (``AdamParams`` or ``DimuonParams``; ``adam_params=`` is the legacy keyword)."""
        params = check_optim_params(optim_params, adam_params)
        return self._single(
            lambda seq_id: self._api.training.encode_optim_step(
                self.model_id, seq_id, params, sdk_method="TrainingClient.optim_step"
            ),
            kind="optim_step",
        )

    def save_state(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> APIFuture[types.SaveWeightsResponse]:
        """Save weights and optimizer state as ``tinker://<run>/weights/<name>`` (resumable)."""
        check_name("name", name)
        check_flag("overwrite", overwrite)
        return self._submit(
            "save_state",
            endpoints.SAVE_WEIGHTS,
            path=name,
            ttl_seconds=ttl_seconds,
            overwrite=overwrite,
            user_metadata=check_user_metadata(user_metadata),
        )

    @deprecated(_LOAD_STATE_DEPRECATION)
    def load_state(
        self, path: str, weights_access_token: str | None = None
    ) -> APIFuture[types.LoadWeightsResponse]:
        """Deprecated: load a saved state's weights, with a fresh optimizer state."""
        return self._load(path, weights_access_token, optimizer=False)

    @deprecated(_LOAD_STATE_DEPRECATION)
    def load_state_with_optimizer(
        self, path: str, weights_access_token: str | None = None
    ) -> APIFuture[types.LoadWeightsResponse]:
        """Deprecated: load a saved state's weights and optimizer state."""
        return self._load(path, weights_access_token, optimizer=True)

    def _load(
        self,
        path: str,
        weights_access_token: str | None = None,
        *,
        optimizer: bool,
        sdk_method: str | None = None,
    ) -> APIFuture[types.LoadWeightsResponse]:
        types.check_tinker_path("path", path)
        check_access_token(weights_access_token)
        return self._submit(
            "load_state_with_optimizer" if optimizer else "load_state",
            endpoints.LOAD_WEIGHTS,
            sdk_method=sdk_method,
            path=path,
            optimizer=optimizer,
            weights_access_token=weights_access_token,
        )

    def save_weights_for_sampler(
        self,
        name: str,
        ttl_seconds: int | None = None,
        user_metadata: dict[str, str] | None = None,
    ) -> APIFuture[types.SaveWeightsForSamplerResponse]:
        """Save weights for sampling as ``tinker://<run>/sampler_weights/<name>``."""
        check_name("name", name)
        saved = self._submit(
            "save_weights_for_sampler",
            endpoints.SAVE_WEIGHTS_FOR_SAMPLER,
            path=name,
            ttl_seconds=ttl_seconds,
            user_metadata=check_user_metadata(user_metadata),
        )
        return chain(
            saved, _with_path(types.SaveWeightsForSamplerResponse, "save_weights_for_sampler")
        )

    def save_weights_external(
        self,
        name: str,
        ttl_seconds: int | None = None,
        age_encryption_recipients: list[str] | None = None,
    ) -> APIFuture[types.SaveWeightsExternalResponse]:
        """Export the weights in the Hugging Face PEFT layout as a
        ``tinker://<run>/external_weights/<name>`` checkpoint (optionally age-encrypted)."""
        check_name("name", name)
        saved = self._submit(
            "save_weights_external",
            endpoints.SAVE_WEIGHTS_EXTERNAL,
            path=name,
            ttl_seconds=ttl_seconds,
            age_encryption_recipients=check_recipients(age_encryption_recipients),
        )
        return chain(saved, _with_path(types.SaveWeightsExternalResponse, "save_weights_external"))

    def get_console_url(self) -> str:
        """The Tinker Console URL of this training run (nothing is sent)."""
        return f"{CONSOLE_URL}/training_runs/{self.model_id}"

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        retry_config: object | None = None,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> BackcompatSamplingClientFuture:
        """Save the current weights (ephemeral) for sampling; the future of a SamplingClient on them
        (docs/api.rst; docs/protocol.rst §7.3)."""
        del retry_config
        if name is not None:
            warnings.warn(
                "The 'name' parameter of save_weights_and_get_sampling_client() is deprecated "
                "and has no effect: the saved weights are always ephemeral. For a named "
                "checkpoint use save_weights_for_sampler(name) and "
                "create_sampling_client(model_path=...).",
                DeprecationWarning,
                stacklevel=2,
            )
        if kind not in ("snapshot", "inflight"):
            raise InvalidInputError(
                "kind", f"must be 'snapshot' or 'inflight', got {kind!r}", "the default is fine"
            )
        stability = check_record_stability_info(record_stability_info)

        def build(seq_id: int) -> TrainingRequest:
            # docs/protocol.rst §7.1: the session-wide counter is shared with
            # create_sampling_session.
            request = types.SaveWeightsForSamplerRequest(
                model_id=self.model_id,
                sampling_session_seq_id=self._context.holder.next_sampling_session_seq_id(),
                seq_id=seq_id,
                kind=kind,
            )
            return self._api.training.encode_training(
                endpoints.SAVE_WEIGHTS_FOR_SAMPLER,
                request,
                sdk_method="TrainingClient.save_weights_and_get_sampling_client",
            )

        saved = self._single(build, kind="save_weights_and_get_sampling_client")

        def client(result: types.SaveWeightsForSamplerResponseInternal) -> SamplingClient:
            if not result.sampling_session_id:
                raise APIResponseValidationError(
                    "an ephemeral save_weights_for_sampler answered without a sampling_session_id",
                    body=attrs.asdict(result),
                )
            base_model = self._base_model
            if self._info is not None:
                base_model = self._info.model_data.model_name or self._info.model_name or base_model
            return SamplingClient(
                self._context,
                result.sampling_session_id,
                base_model=base_model,
                record_stability_info=stability,
            )

        return BackcompatSamplingClientFuture(chain(saved, client))

    def create_sampling_client(
        self,
        model_path: str,
        retry_config: object | None = None,
        record_stability_info: bool = False,
    ) -> BackcompatSamplingClientFuture:
        """The future of a SamplingClient for saved weights (``tinker://.../sampler_weights/...``)."""
        del retry_config
        return SamplingClient._create(
            self._context,
            model_path,
            None,
            sdk_method="TrainingClient.create_sampling_client",
            record_stability_info=record_stability_info,
        )

    def get_info(self) -> types.GetInfoResponse:
        """The model's base model, LoRA rank and tokenizer id, read when the client was made."""
        self._context.check_open()
        return self._model_info(sdk_method="TrainingClient.get_info")

    def _model_info(
        self, *, sdk_method: str, operation_retries: bool = True
    ) -> types.GetInfoResponse:
        """The info read at creation (read now when this client was made without it)."""
        if self._info is None:
            self._info = self._api.training.get_info(
                self.model_id, sdk_method=sdk_method, operation_retries=operation_retries
            )
        return self._info

    def get_tokenizer(self) -> PretrainedTokenizer:
        """The model's tokenizer, as the official SDK's (docs/protocol.rst §10; docs/api.rst,
        "Tokenizers"); cached."""
        with self._tokenizer_lock:
            if self._tokenizer is None:
                self._context.check_open()
                # docs/protocol.rst §10: get_info without the operation-level retry layer.
                info = self._model_info(
                    sdk_method="TrainingClient.get_tokenizer", operation_retries=False
                )
                model_name = info.model_data.model_name or info.model_name or self._base_model
                tokenizer_id = resolve_tokenizer_id(model_name, info.model_data.tokenizer_id)
                tokenizer = load_tokenizer(tokenizer_id)
                self._vocab_size = len(tokenizer)
                self._tokenizer = tokenizer
            return self._tokenizer

    def _shutdown(self) -> None:
        self._queue.executor.shutdown(wait=False)

    # -- the official *_async twins (deprecated there too) ---------------------------------------

    create_sampling_client_async = async_twin(create_sampling_client)
    get_info_async = async_twin(get_info, blocks=lambda self: self._info is None)
    save_weights_and_get_sampling_client_async = async_twin(save_weights_and_get_sampling_client)
    forward_async = async_future_twin(forward)
    forward_backward_async = async_future_twin(forward_backward)
    forward_backward_custom_async = async_future_twin(forward_backward_custom)
    load_state_async = async_future_twin(load_state)
    load_state_with_optimizer_async = async_future_twin(load_state_with_optimizer)
    optim_step_async = async_future_twin(optim_step)
    save_state_async = async_future_twin(save_state)
    save_weights_external_async = async_future_twin(save_weights_external)
    save_weights_for_sampler_async = async_future_twin(save_weights_for_sampler)


def _with_path(public: Callable[..., T], what: str) -> Callable[[Any], T]:
    """The public answer of a save from the service's, which must carry a path."""

    def read(result: Any) -> T:
        if not result.path:
            message = f"{what} answered without a path"
            raise APIResponseValidationError(message, body=attrs.asdict(result))
        return public(path=result.path)

    return read


@forwarding_to(TrainingClient)
class BackcompatTrainingClientFuture(ClientFuture[TrainingClient], TrainingClient):
    """The future of a TrainingClient, as the creation methods return it (the official name;
    see :class:`ClientFuture`)."""
