"""TrainingClient: forward/backward passes, optimizer steps and checkpoints of one training run.

Sequencing follows WIRE.md §6.2: every training request (each chunk of a forward /
forward_backward, optim_step, save/load) reserves its request id in the caller's thread, at call
time, in call order; its wire ``seq_id`` is that id + 1. One single-thread executor per client
sends the submits strictly in ``seq_id`` order, each with HTTP and operation-level retries that
re-send the same ``seq_id``. The turn passes to the next request even when a submit fails for
good; that failure is delivered to its future. If the service may never have received it (a
connection error, a timeout, or 408/429/5xx after every retry), the later requests of the client
are not sent: the service runs a model's requests in ``seq_id`` order and would hold them forever
for the missing one (SERVER.md §8), so each fails at once with an :class:`~tinker_lite.APIError`
naming that ``seq_id``. Results are polled elsewhere (the session's
poller), so ``forward_backward(...)`` followed by ``optim_step(...)`` is pipelined: both return
futures at once and both requests reach the service back to back.

Threading contract: every method may be called from any thread; calls made from several threads
are sent in the order the calls were made.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import numpy as np
import numpy.typing as npt

from tinker_lite import _wire, types
from tinker_lite._chunking import combine_outputs
from tinker_lite._errors import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    InvalidInputError,
    TinkerError,
)
from tinker_lite._futures import APIFuture, QueueStateLogger, ReadyClient, chain, combine
from tinker_lite._futures import json_decoder as _decode_json
from tinker_lite._http import JSON, PROTOBUF, ClientClosedError, HttpResponse, PoolKind
from tinker_lite._journal import SeqOrder
from tinker_lite._validate import validate
from tinker_lite.tokenizer import load_tokenizer, resolve_tokenizer_id

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from tinker_lite.sampling_client import SamplingClient
    from tinker_lite.service_client import ServiceClient

__all__ = ["CustomLossFn", "TrainingClient"]

logger = logging.getLogger("tinker_lite.training_client")

T = TypeVar("T")

# loss_fn(data, logprobs) -> (loss, grads, metrics) without torch, or (loss_tensor, metrics).
CustomLossFn = Callable[[list[types.Datum], list[Any]], Any]

_FORWARD_PATH = "/api/v1/forward"
_FORWARD_BACKWARD_PATH = "/api/v1/forward_backward"


@attrs.frozen
class _Submission:
    """One training request, encoded at call time, waiting for its turn."""

    path: str
    body: bytes
    content_type: str
    request_type: str
    decode: Callable[[HttpResponse], Any]
    accept: str = JSON
    headers: Mapping[str, str] = attrs.field(factory=dict)
    sdk_method: str | None = None
    tokens: int | None = None  # input tokens of a forward/forward_backward chunk (journal)


@attrs.frozen
class _Operation:
    """How one training request is named in the run journal."""

    kind: str
    seq_id: int
    created_at: float


def _decode_forward_backward(resp: HttpResponse) -> types.ForwardBackwardOutput:
    # WIRE.md §P.10: decode whichever content type the service answered with.
    if resp.is_protobuf:
        from tinker_lite import _proto

        return _proto.decode_forward_backward_output(resp.body)
    return _wire.structure(resp.json(), types.ForwardBackwardOutput)


class TrainingClient(ReadyClient):
    """Trains one LoRA model: forward/backward passes, optimizer steps, checkpoints, sampling.

    Created by :meth:`ServiceClient.create_lora_training_client` (or ``..._from_state``); every
    training method returns an :class:`~tinker_lite.APIFuture` at once.
    """

    def __init__(
        self,
        service: ServiceClient,
        model_id: str,
        *,
        base_model: str | None = None,
        lora_config: types.LoraConfig | None = None,
    ) -> None:
        self._service = service
        self._holder = service.holder
        self.model_id = model_id
        self._base_model = base_model
        self._lora_config = lora_config
        self._executor = service._new_train_executor()
        self._order_lock = threading.Lock()
        # (seq_id, path, error) of a submit the service may never have received; read and
        # written only on the executor's single thread.
        self._lost_submit: tuple[int, str, BaseException] | None = None
        self._next_request_id = 0
        # Journal lines in seq_id order (results may be polled back out of order).
        self._journal_order = SeqOrder(first=self._next_request_id + 1)
        self._queue_logger = QueueStateLogger("Training", model_id, kind="training")
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_lock = threading.Lock()
        self._vocab_size: int | None = None

    def __repr__(self) -> str:
        return f"TrainingClient(model_id={self.model_id!r}, base_model={self._base_model!r})"

    # -- sequencing ------------------------------------------------------------------------------

    def _schedule(
        self, builds: Sequence[Callable[[int], _Submission]], *, created_at: float, kind: str
    ) -> list[APIFuture[Any]]:
        """Reserve one request id per build (in call order) and queue the submits.

        ``kind`` names the operation in the run journal (the public method's name).
        """
        with self._order_lock:
            self._service._check_open()
            first_seq = self._next_request_id + 1
            # Encoded before any id is consumed: an encoding error leaves no gap in seq_ids.
            submissions = [build(first_seq + index) for index, build in enumerate(builds)]
            self._next_request_id += len(submissions)
            futures: list[APIFuture[Any]] = []
            for index, submission in enumerate(submissions):
                out: APIFuture[Any] = APIFuture(request_type=submission.request_type)
                op = _Operation(kind, first_seq + index, created_at)
                try:
                    self._executor.submit(self._send, submission, out, op)
                except RuntimeError:
                    closed = ClientClosedError("The ServiceClient is closed.")
                    self._deliver(APIFuture.failed(closed), out, submission, op)
                futures.append(out)
        return futures

    def _deliver(
        self, source: APIFuture[Any], out: APIFuture[Any], submission: _Submission, op: _Operation
    ) -> None:
        """Journal ``source``'s outcome, then hand it to the caller's future ``out``.

        Called exactly once per scheduled request: journal lines are released in ``seq_id``
        order, so a request that never got here would hold back the later lines.
        """
        # Watched first: the line is written (or queued behind an earlier seq_id still
        # pending) before ``out`` completes.
        self._service._journal_watch(
            source,
            op.kind,
            seq_id=op.seq_id,
            tokens=submission.tokens,
            model_id=self.model_id,
            started=op.created_at,
            defer=self._journal_order.slot(op.seq_id),
        )
        out.forward_from(source)

    def _send(self, submission: _Submission, out: APIFuture[Any], op: _Operation) -> None:
        """Submit one request (its turn has come) and hand its polling to the poller."""
        if self._lost_submit is not None:
            held = _held_back(self._lost_submit, op.seq_id, submission.request_type)
            self._deliver(APIFuture.failed(held), out, submission, op)
            return
        try:
            resp = self._holder.submit(
                PoolKind.TRAIN,
                "POST",
                submission.path,
                body=submission.body,
                content_type=submission.content_type,
                headers=submission.headers,
                sdk_method=submission.sdk_method,
            )
            submitted = self._holder.parse(resp, types.UntypedAPIFuture, what=submission.path)
        except BaseException as e:
            self._report(e)
            if _maybe_not_received(e):
                self._lost_submit = (op.seq_id, submission.path, e)
            self._deliver(APIFuture.failed(e), out, submission, op)
            return
        try:
            inner = self._holder.poller.poll(
                submitted.request_id,
                submission.request_type,
                submission.decode,
                created_at=op.created_at,
                accept=submission.accept,
                on_queue_state=self._queue_logger,
            )
        except BaseException as e:
            self._deliver(APIFuture.failed(e, request_id=submitted.request_id), out, submission, op)
            return
        self._deliver(inner, out, submission, op)

    def _report(self, error: BaseException) -> None:
        telemetry = self._holder.telemetry
        if telemetry is not None and not isinstance(error, ClientClosedError):
            try:
                telemetry.log_exception(error)
            except Exception:  # pragma: no cover - telemetry never breaks a call
                logger.debug("telemetry failed", exc_info=True)

    def _json_submission(
        self,
        path: str,
        request: object,
        request_type: str,
        result_cls: type[Any],
        sdk_method: str,
    ) -> _Submission:
        return _Submission(
            path=path,
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=_decode_json(result_cls),
            sdk_method=sdk_method,
        )

    def _single(self, build: Callable[[int], _Submission], *, kind: str) -> APIFuture[Any]:
        return self._schedule([build], created_at=time.monotonic(), kind=kind)[0]

    # -- forward / backward ----------------------------------------------------------------------

    def forward(
        self,
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Run the model and the loss on ``data`` without computing gradients.

        The future's result has one output per datum (e.g. ``logprobs``) and the loss metrics.
        """
        return self._forward_backward(
            data,
            loss_fn,
            loss_fn_config,
            forward_only=True,
            sdk_method="TrainingClient.forward",
            kind="forward",
        )

    def forward_backward(
        self,
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Compute the loss on ``data`` and accumulate its gradients into the model.

        ``loss_fn`` is one of ``cross_entropy`` (inputs ``target_tokens``, optional
        ``weights``), ``importance_sampling``, ``ppo``, ``cispo``, ``dro`` (inputs
        ``target_tokens``, ``logprobs``, ``advantages``). The batch is checked with
        :func:`tinker_lite.validate` first and split into requests of at most the service's
        chunk limits (WIRE.md §6.4); the future's result merges them (§7).
        """
        return self._forward_backward(
            data,
            loss_fn,
            loss_fn_config,
            forward_only=False,
            sdk_method="TrainingClient.forward_backward",
            kind="forward_backward",
        )

    def _forward_backward(
        self,
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None,
        *,
        forward_only: bool,
        sdk_method: str,
        kind: str,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        created_at = time.monotonic()
        self._service._check_open()
        report = validate(
            data,
            loss_fn,
            loss_fn_config,
            limits=self._service.chunk_limits(),
            vocab_size=self._vocab_size,
        )
        request_type = "Forward" if forward_only else "ForwardBackward"
        if report.n_datums == 0:
            # WIRE.md §6.4: an empty batch sends nothing.
            return APIFuture.completed(
                types.ForwardBackwardOutput(loss_fn_output_type="", loss_fn_outputs=[], metrics={})
            )
        items = list(data)
        config = dict(loss_fn_config) if loss_fn_config is not None else None
        use_proto = self._holder.wire_format == "protobuf"

        def builder(chunk: range) -> Callable[[int], _Submission]:
            def build(seq_id: int) -> _Submission:
                return self._fb_submission(
                    items[chunk.start : chunk.stop],
                    report.loss_fn,
                    config,
                    seq_id,
                    forward_only=forward_only,
                    use_proto=use_proto,
                    sdk_method=sdk_method,
                )

            return build

        futures = self._schedule(
            [builder(c) for c in report.chunks], created_at=created_at, kind=kind
        )
        return combine(futures, combine_outputs, request_type=request_type)

    def _fb_submission(
        self,
        data: list[types.Datum],
        loss_fn: str,
        config: dict[str, float | str] | None,
        seq_id: int,
        *,
        forward_only: bool,
        use_proto: bool,
        sdk_method: str,
    ) -> _Submission:
        request_type = "Forward" if forward_only else "ForwardBackward"
        tokens = sum(datum.model_input.length for datum in data)
        if use_proto:
            from tinker_lite import _proto

            # WIRE.md §13.3/§P.10: protobuf to /forward_backward; forward_only marks a forward.
            body = _proto.encode_forward_backward_request(
                model_id=self.model_id,
                seq_id=seq_id,
                data=data,
                loss_fn=loss_fn,
                loss_fn_config=config,
                forward_only=forward_only,
            )
            headers: dict[str, str] = {}
            if self._holder.client_config.proto_compress_fwdbwd and _proto.zstd_available():
                body = _proto.compress(body)
                headers["Content-Encoding"] = "zstd"
            return _Submission(
                path=_FORWARD_BACKWARD_PATH,
                body=body,
                content_type=PROTOBUF,
                request_type=request_type,
                decode=_decode_forward_backward,
                accept=PROTOBUF,
                headers=headers,
                sdk_method=sdk_method,
                tokens=tokens,
            )
        fb_input = types.ForwardBackwardInput(data=data, loss_fn=loss_fn, loss_fn_config=config)
        request: object
        if forward_only:
            request = types.ForwardRequest(
                forward_input=fb_input, model_id=self.model_id, seq_id=seq_id
            )
        else:
            request = types.ForwardBackwardRequest(
                forward_backward_input=fb_input, model_id=self.model_id, seq_id=seq_id
            )
        return _Submission(
            path=_FORWARD_PATH if forward_only else _FORWARD_BACKWARD_PATH,
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=_decode_forward_backward,
            sdk_method=sdk_method,
            tokens=tokens,
        )

    def forward_backward_custom(
        self, data: Sequence[types.Datum], loss_fn: CustomLossFn
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Train on a loss computed on the client from the model's logprobs (WIRE.md §8).

        Runs ``forward(data, "cross_entropy")``, calls ``loss_fn`` on the logprobs, then sends
        ``forward_backward`` with cross-entropy weights equal to minus the loss's gradient with
        respect to the logprobs, which gives the model exactly the custom loss's gradient.
        Blocks until that second request is queued and returns its future; its metrics are the
        service's plus the ones ``loss_fn`` returned (which win on a clash).

        Without torch, ``loss_fn(data, logprobs)`` receives ``data`` and one float32 numpy
        array per datum (shaped like its ``target_tokens``) and returns
        ``(loss, grads, metrics)``: the loss value (a finite float, for the caller's own
        bookkeeping), ``d loss / d logprobs`` (one array per datum, same shapes) and a dict of
        float metrics. With torch installed, the official form also works: ``loss_fn`` receives
        torch tensors and returns ``(loss, metrics)`` where ``loss`` is a scalar tensor; the
        gradient comes from autograd. Every datum needs ``target_tokens``; other inputs are
        passed to ``loss_fn`` but only ``target_tokens`` and ``weights`` are sent.
        """
        items = list(data)
        if not callable(loss_fn):
            raise InvalidInputError("loss_fn", "must be callable", "pass a function")
        forward_data: list[types.Datum] = []
        for index, datum in enumerate(items):
            if not isinstance(datum, types.Datum):
                raise InvalidInputError(f"data[{index}]", f"must be a Datum, got {datum!r}")
            if "target_tokens" not in datum.loss_fn_inputs:
                raise InvalidInputError(
                    f"data[{index}].loss_fn_inputs",
                    "forward_backward_custom needs 'target_tokens'",
                    "give the token each position predicts",
                )
            inputs = {"target_tokens": datum.loss_fn_inputs["target_tokens"]}
            if "weights" in datum.loss_fn_inputs:
                inputs["weights"] = datum.loss_fn_inputs["weights"]
            forward_data.append(types.Datum(model_input=datum.model_input, loss_fn_inputs=inputs))
        if not items:
            return APIFuture.completed(
                types.ForwardBackwardOutput(loss_fn_output_type="", loss_fn_outputs=[], metrics={})
            )
        forward_out = self.forward(forward_data, "cross_entropy").result()
        logprobs = [
            _logprobs_of(out, index) for index, out in enumerate(forward_out.loss_fn_outputs)
        ]
        if len(logprobs) != len(items):
            raise APIResponseValidationError(
                f"forward returned {len(logprobs)} outputs for {len(items)} datums"
            )
        grads, user_metrics = _custom_gradients(loss_fn, items, logprobs)
        backward_data = [
            types.Datum(
                model_input=datum.model_input,
                loss_fn_inputs={
                    "target_tokens": datum.loss_fn_inputs["target_tokens"],
                    "weights": types.TensorData.from_numpy((-grad).astype(np.float32)),
                },
            )
            for datum, grad in zip(items, grads, strict=True)
        ]
        future = self.forward_backward(backward_data, "cross_entropy")

        def add_metrics(out: types.ForwardBackwardOutput) -> types.ForwardBackwardOutput:
            return attrs.evolve(out, metrics={**out.metrics, **user_metrics})

        return chain(future, add_metrics)

    # -- optimizer and checkpoints ---------------------------------------------------------------

    def optim_step(self, adam_params: types.AdamParams) -> APIFuture[types.OptimStepResponse]:
        """Apply one Adam(W) step with the gradients accumulated so far, then clear them."""
        if not isinstance(adam_params, types.AdamParams):
            raise InvalidInputError(
                "adam_params",
                f"must be an AdamParams, got {type(adam_params).__name__}",
                "e.g. types.AdamParams(learning_rate=1e-4)",
            )
        return self._single(
            lambda seq_id: self._json_submission(
                "/api/v1/optim_step",
                types.OptimStepRequest(
                    model_id=self.model_id, seq_id=seq_id, adam_params=adam_params
                ),
                "OptimStep",
                types.OptimStepResponse,
                "TrainingClient.optim_step",
            ),
            kind="optim_step",
        )

    def save_state(
        self, name: str, ttl_seconds: int | None = None
    ) -> APIFuture[types.SaveWeightsResponse]:
        """Save weights and optimizer state as ``tinker://<run>/weights/<name>`` (resumable)."""
        _check_name("name", name)
        types.SaveWeightsRequest(model_id=self.model_id, path=name, ttl_seconds=ttl_seconds)
        return self._single(
            lambda seq_id: self._json_submission(
                "/api/v1/save_weights",
                types.SaveWeightsRequest(
                    model_id=self.model_id, path=name, seq_id=seq_id, ttl_seconds=ttl_seconds
                ),
                "SaveWeights",
                types.SaveWeightsResponse,
                "TrainingClient.save_state",
            ),
            kind="save_state",
        )

    def load_state(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        """Load the weights of a saved state; the optimizer state starts fresh."""
        return self._load(
            path, optimizer=False, sdk_method="TrainingClient.load_state", kind="load_state"
        )

    def load_state_with_optimizer(self, path: str) -> APIFuture[types.LoadWeightsResponse]:
        """Load the weights and the optimizer state of a saved state."""
        return self._load(
            path,
            optimizer=True,
            sdk_method="TrainingClient.load_state_with_optimizer",
            kind="load_state_with_optimizer",
        )

    def _load(
        self, path: str, *, optimizer: bool, sdk_method: str, kind: str
    ) -> APIFuture[types.LoadWeightsResponse]:
        types.check_tinker_path("path", path)
        return self._single(
            lambda seq_id: self._json_submission(
                "/api/v1/load_weights",
                types.LoadWeightsRequest(
                    model_id=self.model_id, seq_id=seq_id, path=path, optimizer=optimizer
                ),
                "LoadWeights",
                types.LoadWeightsResponse,
                sdk_method,
            ),
            kind=kind,
        )

    def save_weights_for_sampler(
        self, name: str, ttl_seconds: int | None = None
    ) -> APIFuture[types.SaveWeightsForSamplerResponse]:
        """Save weights for sampling as ``tinker://<run>/sampler_weights/<name>``."""
        _check_name("name", name)
        types.SaveWeightsForSamplerRequest(
            model_id=self.model_id, path=name, ttl_seconds=ttl_seconds
        )
        future: APIFuture[types.SaveWeightsForSamplerResponseInternal] = self._single(
            lambda seq_id: self._json_submission(
                "/api/v1/save_weights_for_sampler",
                types.SaveWeightsForSamplerRequest(
                    model_id=self.model_id, path=name, seq_id=seq_id, ttl_seconds=ttl_seconds
                ),
                "SaveWeightsForSampler",
                types.SaveWeightsForSamplerResponseInternal,
                "TrainingClient.save_weights_for_sampler",
            ),
            kind="save_weights_for_sampler",
        )

        def public(result: types.SaveWeightsForSamplerResponseInternal) -> Any:
            if not result.path:
                raise APIResponseValidationError(
                    "save_weights_for_sampler answered without a path", body=attrs.asdict(result)
                )
            return types.SaveWeightsForSamplerResponse(path=result.path)

        return chain(future, public)

    def save_weights_and_get_sampling_client(
        self, name: str | None = None, retry_config: object | None = None
    ) -> SamplingClient:
        """Snapshot the current weights for sampling and return a SamplingClient on them.

        Without ``name`` the snapshot is ephemeral (not listed, not downloadable) and no extra
        sampling session is created (WIRE.md §6.3). With ``name`` the weights are saved as
        ``tinker://<run>/sampler_weights/<name>`` and a sampler is created on that path.
        Blocks until the sampler is ready. ``retry_config`` is accepted for compatibility.
        """
        del retry_config
        if name is not None:
            path = self.save_weights_for_sampler(name).result().path
            return self.create_sampling_client(path)
        from tinker_lite.sampling_client import SamplingClient

        def build(seq_id: int) -> _Submission:
            # WIRE.md §6.1: the session-wide counter is shared with create_sampling_session.
            request = types.SaveWeightsForSamplerRequest(
                model_id=self.model_id,
                sampling_session_seq_id=self._holder.next_sampling_session_seq_id(),
                seq_id=seq_id,
            )
            return self._json_submission(
                "/api/v1/save_weights_for_sampler",
                request,
                "SaveWeightsForSampler",
                types.SaveWeightsForSamplerResponseInternal,
                "TrainingClient.save_weights_and_get_sampling_client",
            )

        result: types.SaveWeightsForSamplerResponseInternal = self._single(
            build, kind="save_weights_and_get_sampling_client"
        ).result()
        if not result.sampling_session_id:
            raise APIResponseValidationError(
                "an ephemeral save_weights_for_sampler answered without a sampling_session_id",
                body=attrs.asdict(result),
            )
        return SamplingClient(self._service, result.sampling_session_id)

    def create_sampling_client(
        self, model_path: str, retry_config: object | None = None
    ) -> SamplingClient:
        """Return a SamplingClient for saved sampler weights (``tinker://.../sampler_weights/...``)."""
        del retry_config
        self._service._check_open()
        return self._service._create_sampling_client(
            model_path, None, sdk_method="TrainingClient.create_sampling_client"
        )

    # -- information -----------------------------------------------------------------------------

    def get_info(self) -> types.GetInfoResponse:
        """Return the model's base model, LoRA rank and tokenizer id."""
        self._service._check_open()
        resp = self._holder.submit(
            PoolKind.TRAIN,
            "POST",
            "/api/v1/get_info",
            body_obj=types.GetInfoRequest(model_id=self.model_id),
            sdk_method="TrainingClient.get_info",
        )
        return self._holder.parse(resp, types.GetInfoResponse)

    def get_tokenizer(self) -> Tokenizer:
        """Return the model's tokenizer as a ``tokenizers.Tokenizer`` (no chat template).

        Resolved per WIRE.md §9 and loaded by :mod:`tinker_lite.tokenizer` (local files first,
        the Hugging Face hub otherwise); cached for this client.
        """
        with self._tokenizer_lock:
            if self._tokenizer is None:
                self._service._check_open()
                # WIRE.md §9: get_info without the operation-level retry layer.
                resp = self._holder.request(
                    PoolKind.TRAIN,
                    "POST",
                    "/api/v1/get_info",
                    body_obj=types.GetInfoRequest(model_id=self.model_id),
                    sdk_method="TrainingClient.get_tokenizer",
                )
                info = self._holder.parse(resp, types.GetInfoResponse)
                model_name = info.model_data.model_name or info.model_name or self._base_model
                tokenizer_id = resolve_tokenizer_id(model_name, info.model_data.tokenizer_id)
                tokenizer = load_tokenizer(tokenizer_id)
                self._vocab_size = int(tokenizer.get_vocab_size())
                self._tokenizer = tokenizer
            return self._tokenizer

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=False)


def _maybe_not_received(error: BaseException) -> bool:
    """Whether a failed submit may never have reached the service (so its seq_id is missing)."""
    if isinstance(error, ClientClosedError):
        return False
    if isinstance(error, APIConnectionError):
        return True
    return isinstance(error, APIStatusError) and (
        error.status_code >= 500 or error.status_code in (408, 429)
    )


def _held_back(lost: tuple[int, str, BaseException], seq_id: int, request_type: str) -> APIError:
    lost_seq, lost_path, cause = lost
    error = APIError(
        f"{request_type} (seq_id {seq_id}) was not sent: the training request with seq_id "
        f"{lost_seq} (POST {lost_path}) could not be submitted ({type(cause).__name__}), and "
        "the service runs a model's requests in seq_id order, so this one would wait for it "
        "forever. Create a new training client (e.g. from your last saved state) to continue."
    )
    error.__cause__ = cause
    return error


def _check_name(field: str, name: object) -> None:
    if not isinstance(name, str) or not name or "/" in name:
        raise InvalidInputError(
            field,
            f"must be a non-empty checkpoint name without '/', got {name!r}",
            "e.g. 'step-100'; the service builds the tinker:// path",
        )


def _logprobs_of(out: Mapping[str, types.TensorData], index: int) -> npt.NDArray[np.float32]:
    tensor = out.get("logprobs")
    if tensor is None:
        raise APIResponseValidationError(
            f"forward output {index} has no 'logprobs' (keys: {sorted(out)})"
        )
    return np.asarray(tensor.to_numpy(), dtype=np.float32)


def _custom_gradients(
    loss_fn: CustomLossFn, data: list[types.Datum], logprobs: list[npt.NDArray[np.float32]]
) -> tuple[list[npt.NDArray[np.float64]], dict[str, float]]:
    """Call ``loss_fn`` and return d loss / d logprobs per datum and its metrics."""
    first_error: BaseException | None = None
    result: Any = None
    try:
        result = loss_fn(data, [lp.copy() for lp in logprobs])
    except Exception as e:
        first_error = e
    if first_error is None and isinstance(result, tuple) and len(result) == 3:
        return _numpy_form(result, logprobs)
    torch = _torch()
    if torch is None:
        if first_error is not None:
            raise first_error
        raise InvalidInputError(
            "loss_fn",
            f"returned {_describe(result)}; without torch it must return (loss, grads, metrics)",
            "return the loss, one gradient array per datum (d loss / d logprobs) and a dict",
        )
    try:
        return _torch_form(torch, loss_fn, data, logprobs)
    except Exception as e:
        if first_error is not None:
            raise e from first_error
        raise


def _describe(value: object) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return type(value).__name__


def _numpy_form(
    result: tuple[Any, Any, Any], logprobs: list[npt.NDArray[np.float32]]
) -> tuple[list[npt.NDArray[np.float64]], dict[str, float]]:
    loss, grads, metrics = result
    try:
        loss_value = float(loss)
    except (TypeError, ValueError):
        raise InvalidInputError(
            "loss_fn", f"returned a loss that is not a number: {loss!r}"
        ) from None
    if not math.isfinite(loss_value):
        raise InvalidInputError("loss_fn", f"returned a non-finite loss ({loss_value})")
    if isinstance(grads, (str, bytes)) or not isinstance(grads, Sequence):
        raise InvalidInputError("loss_fn", "grads must be a list with one array per datum")
    if len(grads) != len(logprobs):
        raise InvalidInputError(
            "loss_fn", f"returned {len(grads)} gradients for {len(logprobs)} datums"
        )
    out: list[npt.NDArray[np.float64]] = []
    for index, (grad, lp) in enumerate(zip(grads, logprobs, strict=True)):
        arr = np.asarray(grad, dtype=np.float64)
        if arr.shape != lp.shape:
            if arr.size != lp.size:
                raise InvalidInputError(
                    f"loss_fn grads[{index}]",
                    f"has shape {list(arr.shape)}, expected {list(lp.shape)} like the logprobs",
                )
            arr = arr.reshape(lp.shape)
        if not bool(np.isfinite(arr).all()):
            raise InvalidInputError(f"loss_fn grads[{index}]", "holds NaN or Inf")
        out.append(arr)
    return out, _metrics_dict(metrics)


def _metrics_dict(metrics: object) -> dict[str, float]:
    if metrics is None:
        return {}
    if not isinstance(metrics, Mapping):
        raise InvalidInputError("loss_fn", f"metrics must be a dict, got {type(metrics).__name__}")
    out: dict[str, float] = {}
    for key, value in metrics.items():
        try:
            out[str(key)] = float(value)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"loss_fn metrics[{key!r}]", f"must be a number, got {value!r}"
            ) from None
    return out


def _torch() -> Any:
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def _torch_form(
    torch: Any,
    loss_fn: CustomLossFn,
    data: list[types.Datum],
    logprobs: list[npt.NDArray[np.float32]],
) -> tuple[list[npt.NDArray[np.float64]], dict[str, float]]:
    tensors = [torch.tensor(lp, dtype=torch.float32, requires_grad=True) for lp in logprobs]
    result = loss_fn(data, tensors)
    if isinstance(result, tuple) and len(result) == 3:
        given = [g.detach().cpu().numpy() if isinstance(g, torch.Tensor) else g for g in result[1]]
        value = result[0].item() if isinstance(result[0], torch.Tensor) else result[0]
        return _numpy_form((value, given, result[2]), logprobs)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.Tensor)):
        raise InvalidInputError(
            "loss_fn",
            f"returned {_describe(result)}",
            "return (loss_tensor, metrics) with a scalar torch loss, or (loss, grads, metrics)",
        )
    loss, metrics = result
    if loss.numel() != 1:
        raise InvalidInputError(
            "loss_fn", f"the loss must be a scalar, got shape {list(loss.shape)}"
        )
    loss.backward()
    grads: list[npt.NDArray[np.float64]] = []
    for index, tensor in enumerate(tensors):
        if tensor.grad is None:
            raise TinkerError(f"No gradient computed for logprob tensor {index}")
        grads.append(np.asarray(tensor.grad.detach().cpu().numpy(), dtype=np.float64))
    return _numpy_form((float(loss.item()), grads, metrics), logprobs)
