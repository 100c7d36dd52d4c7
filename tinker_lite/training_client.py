"""TrainingClient: forward/backward passes, optimizer steps and checkpoints of one training run.

Sequencing follows docs/protocol.rst §7.2: every training request (each chunk of a forward /
forward_backward, optim_step, save/load) reserves its request id in the caller's thread, at call
time, in call order; its wire ``seq_id`` is that id + 1. One single-thread executor per client
sends the submits strictly in ``seq_id`` order, each with HTTP and operation-level retries that
re-send the same ``seq_id``. The turn passes to the next request even when a submit fails for
good; that failure is delivered to its future. If the service may never have received it (a
connection error, a timeout, or 408/429/5xx after every retry), the later requests of the client
are not sent: the service runs a model's requests in ``seq_id`` order and would hold them forever
for the missing one (docs/service.rst §8), so each fails at once with an
:class:`~tinker_lite.APIError` naming that ``seq_id``. Results are polled elsewhere (the session's
poller), so ``forward_backward(...)`` followed by ``optim_step(...)`` is pipelined: both return
futures at once and both requests reach the service back to back.

Threading contract: every method may be called from any thread; calls made from several threads
are sent in the order the calls were made.

Size (over the house's ~600 lines): the official 0.38 TrainingClient surface, about twenty
public methods, over one ordered submit queue; request encoding lives in :mod:`_api` and the
custom-loss gradients in :mod:`_custom_loss`, so what remains is one job.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._api import CONSOLE_URL, TrainingRequest
from tinker_lite._async import with_async_twins
from tinker_lite._chunking import combine_outputs
from tinker_lite._context import ClientContext
from tinker_lite._custom_loss import (
    CustomLoss,
    CustomLossFn,
    check_loss_type_input,
    custom_gradients,
    logprobs_of,
    merge_metrics,
)
from tinker_lite._deprecation import deprecated
from tinker_lite._errors import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    ClientClosedError,
    InvalidInputError,
)
from tinker_lite._futures.answers import QueueStateLogger
from tinker_lite._futures.client_future import ClientFuture, forwarding_to
from tinker_lite._futures.future import APIFuture, chain, combine, then
from tinker_lite._journal import SeqOrder
from tinker_lite._loss_handle import LossHandle
from tinker_lite._validate import validate
from tinker_lite.sampling_client import (
    BackcompatSamplingClientFuture,
    SamplingClient,
    check_record_stability_info,
)
from tinker_lite.tokenizer import load_tokenizer, resolve_tokenizer_id

if TYPE_CHECKING:
    from tinker_lite._futures.pending import PendingRequest
    from tinker_lite.tokenizer import PretrainedTokenizer

__all__ = ["BackcompatTrainingClientFuture", "CustomLossFn", "TrainingClient"]

logger = logging.getLogger("tinker_lite.training_client")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_Steps = tuple[Callable[[], "APIFuture[T]"], Callable[[T], "TrainingClient"]]
"""A creation's two blocking steps: send the request (its future), then make the client."""

"""Where the Tinker Console lives (training runs are under ``/training_runs/<id>``)."""

_OPTIM_PARAMS = (types.AdamParams, types.DimuonParams)
_MAX_AGE_RECIPIENTS = 10
_LOAD_STATE_DEPRECATION = (
    "TrainingClient.load_state*() is deprecated (as in the official SDK) and will not be "
    "supported by future Tinker SDK versions: create a new training client from the "
    "checkpoint with ServiceClient.create_training_client_from_state() or "
    "ServiceClient.create_training_client_from_state_with_optimizer()."
)


@attrs.frozen
class _Submission:
    """One encoded training request and the public method that sent it."""

    request: TrainingRequest
    sdk_method: str


@attrs.frozen
class _Deferred:
    """A training request whose ``seq_id`` is reserved at the call but whose body is built
    when its turn comes (the backward pass of ``forward_backward_custom``)."""

    request_type: str
    tokens: int | None
    build: Callable[[int], _Submission]


@attrs.frozen
class _Operation:
    """How one training request is named in the run journal (it holds no request body)."""

    kind: str
    seq_id: int
    created_at: float
    tokens: int | None = None  # input tokens of a forward/forward_backward chunk


@with_async_twins
class TrainingClient:
    """Trains one LoRA model: forward/backward passes, optimizer steps, checkpoints, sampling.

    Created by :meth:`ServiceClient.create_lora_training_client` (or ``..._from_state``); every
    training method returns an :class:`~tinker_lite.APIFuture` at once.
    """

    def __init__(
        self,
        context: ClientContext,
        model_id: str,
        *,
        base_model: str | None = None,
        lora_config: types.LoraConfig | None = None,
        info: types.GetInfoResponse | None = None,
    ) -> None:
        self._context = context
        self._api = context.api
        self.model_id = model_id
        self._info = info
        self._base_model = base_model
        self._lora_config = lora_config
        self._executor = context.new_train_executor(self)
        self._order_lock = threading.RLock()
        # (seq_id, what, error) of a submit the service may never have received; read and
        # written only on the executor's single thread.
        self._lost_submit: tuple[int, str, BaseException] | None = None
        self._next_request_id = 0
        # Journal lines in seq_id order (results may be polled back out of order).
        self._journal_order = SeqOrder(first=self._next_request_id + 1)
        self._queue_logger = QueueStateLogger("Training", model_id, kind="training")
        self._tokenizer: PretrainedTokenizer | None = None
        self._tokenizer_lock = threading.Lock()
        self._vocab_size: int | None = None

    def __repr__(self) -> str:
        return f"TrainingClient(model_id={self.model_id!r}, base_model={self._base_model!r})"

    @classmethod
    def _create(
        cls,
        context: ClientContext,
        base_model: str,
        lora: types.LoraConfig,
        *,
        user_metadata: dict[str, Any] | None,
        sdk_method: str,
        optimizer: types.OptimizerConfig | None = None,
        model_seq_id: int | None = None,
    ) -> _Steps[types.CreateModelResponse]:
        """Create the model on the service (starting the session if needed), in two blocking
        steps: send ``create_model`` (its future), then make the client of the created model
        (see :meth:`_in_background`). Checks the arguments now."""
        if not isinstance(base_model, str) or not base_model:
            raise InvalidInputError(
                "base_model", f"must be a model name, got {base_model!r}", "e.g. 'Qwen/Qwen3-8B'"
            )
        api = context.api
        # docs/protocol.rst §7.1: the number is taken before create_model is sent; a failure
        # consumes it.
        seq_id = context.holder.next_model_seq_id() if model_seq_id is None else model_seq_id
        created_at = time.monotonic()

        def send() -> APIFuture[types.CreateModelResponse]:
            request = types.CreateModelRequest(
                session_id=context.holder.ensure_session(),
                model_seq_id=seq_id,
                base_model=base_model,
                user_metadata=user_metadata,
                lora_config=lora,
                **({} if optimizer is None else {"optimizer_config": optimizer}),
            )
            source = api.training.create_model(
                request, sdk_method=sdk_method, created_at=created_at
            )
            # Watched first: the journal line is written before the client is delivered.
            context.journal_watch(source, "create_model", seq_id=0, started=created_at)
            return source

        def finish(created: types.CreateModelResponse) -> TrainingClient:
            return cls._created(
                context, created.model_id, base_model=base_model, lora=lora, sdk_method=sdk_method
            )

        return send, finish

    @classmethod
    def _create_from_state(
        cls,
        context: ClientContext,
        path: str,
        *,
        model_seq_id: int,
        optimizer: bool,
        optimizer_config: object | None,
        base_model: str | None,
        user_metadata: dict[str, Any] | None,
        weights_access_token: str | None,
        sdk_method: str,
    ) -> _Steps[types.LoadWeightsResponse]:
        """Create a model from a saved state with one ``load_weights`` (golden-0.38).

        The request carries ``session_id`` + ``model_seq_id`` instead of ``model_id`` /
        ``seq_id``: the service creates the model ``<session_id>:train:<model_seq_id>`` from the
        checkpoint, so the new client's first request has ``seq_id`` 1. The same two steps as
        :meth:`_create`.
        """
        api = context.api
        created_at = time.monotonic()

        def send() -> APIFuture[types.LoadWeightsResponse]:
            request = types.LoadWeightsRequest(
                session_id=context.holder.ensure_session(),
                model_seq_id=model_seq_id,
                base_model=base_model,
                user_metadata=user_metadata,
                path=path,
                optimizer=optimizer,
                optimizer_config=optimizer_config,
                weights_access_token=weights_access_token,
            )
            source = api.training.load_weights_creating_model(
                request, sdk_method=sdk_method, created_at=created_at
            )
            context.journal_watch(source, "create_model", seq_id=0, started=created_at)
            return source

        def finish(loaded: types.LoadWeightsResponse) -> TrainingClient:
            # golden-0.38: the service names the model after the session and the number.
            model_id = f"{context.holder.ensure_session()}:train:{model_seq_id}"
            client = cls._created(
                context, model_id, base_model=None, lora=None, sdk_method=sdk_method
            )
            if client._info is not None:
                client._base_model = client._info.model_data.model_name or client._info.model_name
            return client

        return send, finish

    @staticmethod
    def _in_background(
        context: ClientContext, steps: _Steps[T], *, request_type: str
    ) -> APIFuture[TrainingClient]:
        """The future of a creation's client, returned at once: both steps run on the REST
        threads, and no thread waits while the service works on the request the first one sent.

        Registered for close() as one ``create_model`` request: a close that finishes what was
        queued waits for the client; one that drops it names it, and nothing is sent after that.
        """
        send, finish = steps
        pool = context.rest_pool()

        def run(step: Callable[[], Any]) -> Future[Any]:
            try:
                return pool.submit(step)
            except RuntimeError:  # the pool was shut down by close()
                raise ClientClosedError("The ServiceClient is closed.") from None

        def start() -> APIFuture[T]:
            if not pending.claim():
                raise ClientClosedError("The ServiceClient was closed before the model was made.")
            return send()

        out: APIFuture[TrainingClient] = APIFuture(request_type=request_type)
        pending = context.pending.track("create_model", out, on_drop=out.try_set_exception)
        try:
            started = run(start)
        except ClientClosedError as e:
            out.try_set_exception(e)
            raise
        out.forward_from(then(started, lambda sent: then(sent, finish, run=run)))
        return out

    @classmethod
    def _created(
        cls,
        context: ClientContext,
        model_id: str,
        *,
        base_model: str | None,
        lora: types.LoraConfig | None,
        sdk_method: str,
    ) -> TrainingClient:
        """The client of a model the service has just created: 0.38 reads its info once.

        A close that waited for the creation refuses the new client (ClientClosedError).
        """
        if context.closed:
            raise ClientClosedError(
                f"The ServiceClient was closed while training run {model_id} was being created: "
                "the service created it, but no client is made for a closed connection"
            )
        info = context.api.training.get_info(model_id, sdk_method=sdk_method)
        client = cls(context, model_id, base_model=base_model, lora_config=lora, info=info)
        # Its submit thread starts here (a creation runs on the REST threads), not in the first
        # training call, which may be made from an event loop.
        client._executor.submit(int)
        return client

    # -- sequencing ------------------------------------------------------------------------------

    def _schedule(
        self,
        builds: Sequence[Callable[[int], _Submission] | _Deferred],
        *,
        created_at: float,
        kind: str,
        first_last: bool = False,
    ) -> list[APIFuture[Any]]:
        """Reserve one request id per build (in call order) and queue the submits.

        ``kind`` names the operation in the run journal (the public method's name).
        ``first_last`` queues the first submit after the others (their ``seq_id`` stay in call
        order); the futures are returned in ``seq_id`` order either way.
        """
        with self._order_lock:
            self._context.check_open()
            first_seq = self._next_request_id + 1
            # Encoded before any id is consumed: an encoding error leaves no gap in seq_ids.
            submissions = [
                build if isinstance(build, _Deferred) else build(first_seq + index)
                for index, build in enumerate(builds)
            ]
            self._next_request_id += len(submissions)
            futures: list[APIFuture[Any]] = [
                APIFuture(request_type=_request_type(submission)) for submission in submissions
            ]
            order = list(range(len(submissions)))
            if first_last and len(order) > 1:
                order = [*order[1:], 0]
            for index in order:
                submission, out = submissions[index], futures[index]
                op = _Operation(kind, first_seq + index, created_at, _tokens(submission))
                # Registered for close(): finished on a normal close, named if dropped. Its
                # entry lives until the result arrives, so it does not hold the encoded body
                # (freed once the request is sent).
                pending = self._context.pending.track(
                    kind,
                    out,
                    owner=f"training run {self.model_id}",
                    seq_id=op.seq_id,
                    on_drop=functools.partial(self._deliver_error, out=out, op=op),
                )
                try:
                    self._executor.submit(self._send, submission, out, op, pending)
                except RuntimeError:
                    if pending.claim():
                        self._deliver_error(
                            ClientClosedError("The ServiceClient is closed."), out, op
                        )
        return futures

    def _deliver(self, source: APIFuture[Any], out: APIFuture[Any], op: _Operation) -> None:
        """Journal ``source``'s outcome, then hand it to the caller's future ``out``.

        Called exactly once per scheduled request: journal lines are released in ``seq_id``
        order, so a request that never got here would hold back the later lines.
        """
        # Watched first: the line is written (or queued behind an earlier seq_id still
        # pending) before ``out`` completes.
        self._context.journal_watch(
            source,
            op.kind,
            seq_id=op.seq_id,
            tokens=op.tokens,
            model_id=self.model_id,
            started=op.created_at,
            defer=self._journal_order.slot(op.seq_id),
        )
        out.forward_from(source)

    def _deliver_error(self, error: BaseException, out: APIFuture[Any], op: _Operation) -> None:
        self._deliver(APIFuture.failed(error), out, op)

    def _send(
        self,
        submission: _Submission | _Deferred,
        out: APIFuture[Any],
        op: _Operation,
        pending: PendingRequest,
    ) -> None:
        """Submit one request (its turn has come) and hand its polling to the poller."""
        if not pending.claim():
            return  # dropped by close(): its future already holds a ClientClosedError
        if self._lost_submit is not None:
            held = _held_back(self._lost_submit, op.seq_id, _request_type(submission))
            self._deliver(APIFuture.failed(held), out, op)
            return
        if isinstance(submission, _Deferred):
            deferred = submission
            try:
                submission = deferred.build(op.seq_id)
            except BaseException as e:
                # Nothing was sent: the service would wait for this seq_id forever.
                self._lost_submit = (op.seq_id, deferred.request_type, e)
                self._deliver(APIFuture.failed(e), out, op)
                return
        request = submission.request
        try:
            request_id = self._api.training.submit_training(
                request, sdk_method=submission.sdk_method
            )
        except BaseException as e:
            self._report(e)
            if _maybe_not_received(e):
                self._lost_submit = (op.seq_id, f"POST {request.path}", e)
            self._deliver(APIFuture.failed(e), out, op)
            return
        try:
            inner = self._context.holder.poller.poll(
                request_id,
                request.request_type,
                request.decode,
                created_at=op.created_at,
                accept=request.accept,
                on_queue_state=self._queue_logger,
                sdk_method=submission.sdk_method,
            )
        except BaseException as e:
            self._deliver(APIFuture.failed(e, request_id=request_id), out, op)
            return
        self._deliver(inner, out, op)

    def _report(self, error: BaseException) -> None:
        telemetry = self._context.holder.telemetry
        if telemetry is not None and not isinstance(error, ClientClosedError):
            try:
                telemetry.log_exception(error)
            except Exception:  # pragma: no cover - telemetry never breaks a call
                logger.debug("telemetry failed", exc_info=True)

    def _json_submission(
        self, request: object, result_cls: type[Any], sdk_method: str
    ) -> _Submission:
        return _Submission(self._api.training.encode_training(request, result_cls), sdk_method)

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
        chunk limits (docs/protocol.rst §7.4); the future's result merges them
        (docs/protocol.rst §7.5).
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
                sdk_method=sdk_method,
            )
            for c in report.chunks
        ]
        # golden-0.38 (parallel_fwdbwd_chunks): every chunk after the first goes out before it.
        futures = self._schedule(
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
    ) -> Callable[[int], _Submission]:
        """The encoder of one forward/forward_backward chunk, given its ``seq_id``."""
        wire = self._context.holder.wire_format

        def build(seq_id: int) -> _Submission:
            encoded = self._api.training.encode_forward_backward(
                model_id=self.model_id,
                seq_id=seq_id,
                data=chunk,
                loss_fn=loss_fn,
                loss_fn_config=config,
                forward_only=forward_only,
                wire=wire,
            )
            return _Submission(encoded, sdk_method)

        return build

    def forward_backward_custom(
        self,
        data: Sequence[types.Datum],
        loss_fn: CustomLossFn | LossHandle,
        *,
        loss_type_input: Literal["logprobs"] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """Train on a loss computed on the client from the model's logprobs
        (docs/protocol.rst §7.6).

        Runs ``forward(data, "cross_entropy")``, calls ``loss_fn`` on the logprobs, then sends
        ``forward_backward`` with cross-entropy weights equal to minus the loss's gradient with
        respect to the logprobs, which gives the model exactly the custom loss's gradient.
        Returns at once, as in the official SDK: both requests take their place in the
        client's order now, so a later ``optim_step`` is applied after this backward pass.
        When ``loss_fn`` fails, the future raises its error and nothing is learned (the backward
        is sent with zero weights, so the client stays usable). As in the official
        SDK, its metrics report the custom loss as ``loss:sum`` and the service's surrogate
        cross-entropy as ``surrogate_loss:sum``; the metrics ``loss_fn`` returned come with them
        (and win over the service's other ones).

        Without torch, ``loss_fn(data, logprobs)`` receives ``data`` and one float32 numpy
        array per datum (shaped like its ``target_tokens``) and returns
        ``(loss, grads, metrics)``: the loss value (a finite float), ``d loss / d logprobs``
        (one array per datum, same shapes) and a dict of float metrics. With torch installed,
        the official form also works: ``loss_fn`` receives torch tensors and returns
        ``(loss, metrics)`` where ``loss`` is a scalar tensor; the gradient comes from
        autograd. Every datum needs ``target_tokens``; other inputs are passed to ``loss_fn``
        but only ``target_tokens`` and ``weights`` are sent. ``loss_type_input`` is deprecated
        (as in the official SDK): the loss always receives logprobs. ``loss_fn`` may also be a
        :class:`~tinker_lite.LossHandle` from ``ServiceClient.create_custom_loss`` of the same
        session: one the service runs (it has a ``loss_id``) is sent as one
        ``forward_backward(data, "custom", {"loss_id": ...})``; otherwise it runs here.
        """
        check_loss_type_input(loss_type_input)
        items = list(data)
        if isinstance(loss_fn, LossHandle):
            session_id = self._context.holder.ensure_session()
            if loss_fn.session_id != session_id:
                raise InvalidInputError(
                    "loss_fn",
                    f"LossHandle {loss_fn.name!r} was created in session {loss_fn.session_id}; "
                    "only clients of that session can use it",
                    "make the loss with this client's ServiceClient.create_custom_loss",
                )
            if loss_fn.loss_id is not None:
                # An uploaded loss runs on the service in one forward_backward (0.38).
                return self.forward_backward(items, "custom", {"loss_id": loss_fn.loss_id})
            loss_fn = loss_fn.as_loss_fn()
        if not callable(loss_fn):
            raise InvalidInputError("loss_fn", "must be callable", "pass a function")
        forward_data = [_custom_forward_datum(datum, index) for index, datum in enumerate(items)]
        if not items:
            return APIFuture.completed(
                types.ForwardBackwardOutput(loss_fn_output_type="", loss_fn_outputs=[], metrics={})
            )
        return self._custom(items, forward_data, loss_fn)

    def _custom(
        self, items: list[types.Datum], forward_data: list[types.Datum], loss_fn: CustomLossFn
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """The forward pass now and the backward pass's ``seq_id`` reserved now (as 0.38 does):
        a later call is ordered after the backward even though its body waits for the loss.

        The backward chunks keep the forward's boundaries. When the loss function (or reading
        the forward's result) fails, the future raises that error and the backward is sent with
        zero weights, so the reserved ``seq_id`` is filled without changing the model and the
        client stays usable.
        """
        created_at = time.monotonic()
        sdk_method = "TrainingClient.forward_backward_custom"
        report = validate(
            forward_data,
            "cross_entropy",
            None,
            limits=self._api.training.chunk_limits(),
            vocab_size=self._vocab_size,
        )
        outcome: list[tuple[list[types.Datum], CustomLoss | None, BaseException | None]] = []
        first_last = self._context.holder.first_chunk_last

        def backward() -> tuple[list[types.Datum], CustomLoss | None, BaseException | None]:
            # Only the client's submit thread calls this, chunk after chunk.
            if not outcome:
                try:
                    forward_out = forward.result()
                    logprobs = [
                        logprobs_of(out, index)
                        for index, out in enumerate(forward_out.loss_fn_outputs)
                    ]
                    if len(logprobs) != len(items):
                        raise APIResponseValidationError(
                            f"forward returned {len(logprobs)} outputs for {len(items)} datums"
                        )
                    custom = custom_gradients(loss_fn, items, logprobs)
                    grads = [(-grad).astype("float32") for grad in custom.grads]
                    outcome.append((_with_weights(forward_data, grads), custom, None))
                except Exception as e:
                    zeros = [_zero_weights(datum) for datum in forward_data]
                    outcome.append((zeros, None, e))
            return outcome[0]

        def deferred(chunk: range) -> _Deferred:
            def build(seq_id: int) -> _Submission:
                data = backward()[0][chunk.start : chunk.stop]
                encode = self._chunk_builder(
                    data, "cross_entropy", None, forward_only=False, sdk_method=sdk_method
                )
                return encode(seq_id)

            tokens = sum(
                datum.model_input.length for datum in forward_data[chunk.start : chunk.stop]
            )
            return _Deferred("ForwardBackward", tokens, build)

        with self._order_lock:  # the forward's and the backward's seq_ids are contiguous
            forwards = self._schedule(
                [
                    self._chunk_builder(
                        forward_data[c.start : c.stop],
                        "cross_entropy",
                        None,
                        forward_only=True,
                        sdk_method=sdk_method,
                    )
                    for c in report.chunks
                ],
                created_at=created_at,
                kind="forward_backward_custom",
                first_last=first_last,
            )
            forward = combine(forwards, combine_outputs, request_type="Forward")
            backwards = self._schedule(
                [deferred(c) for c in report.chunks],
                created_at=created_at,
                kind="forward_backward_custom",
                first_last=first_last,
            )

        def result(out: types.ForwardBackwardOutput) -> types.ForwardBackwardOutput:
            _, custom, error = outcome[0]
            if error is not None:
                raise error
            assert custom is not None
            return attrs.evolve(out, metrics=merge_metrics(out.metrics, custom))

        return chain(combine(backwards, combine_outputs, request_type="ForwardBackward"), result)

    # -- optimizer and checkpoints ---------------------------------------------------------------

    def optim_step(
        self,
        optim_params: types.OptimParams | None = None,
        *,
        adam_params: types.AdamParams | None = None,
    ) -> APIFuture[types.OptimStepResponse]:
        """Apply one optimizer step with the gradients accumulated so far, then clear them.

        ``optim_params`` is an :class:`~tinker_lite.types.AdamParams` (AdamW, the default
        optimizer) or a :class:`~tinker_lite.types.DimuonParams` (runs created with the Dimuon
        optimizer); ``adam_params=`` is the legacy keyword for the former.
        """
        if optim_params is not None and adam_params is not None:
            raise InvalidInputError(
                "optim_params",
                "both optim_params and adam_params are given",
                "pass one: optim_step(types.AdamParams(...)) (adam_params= is the legacy name)",
            )
        field = "adam_params" if adam_params is not None else "optim_params"
        params = adam_params if adam_params is not None else optim_params
        allowed = (types.AdamParams,) if field == "adam_params" else _OPTIM_PARAMS
        if not isinstance(params, allowed):
            raise InvalidInputError(
                field,
                f"must be an {' or '.join(c.__name__ for c in allowed)}, got "
                f"{type(params).__name__}",
                "e.g. types.AdamParams(learning_rate=1e-4)",
            )
        return self._single(
            lambda seq_id: _Submission(
                self._api.training.encode_optim_step(self.model_id, seq_id, params),
                "TrainingClient.optim_step",
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
        """Save weights and optimizer state as ``tinker://<run>/weights/<name>`` (resumable).

        ``ttl_seconds`` bounds the checkpoint's life (None: it never expires); ``overwrite``
        replaces an existing checkpoint of that name (and its whole ``user_metadata``);
        ``user_metadata`` (str -> str) is kept with the checkpoint and shown in its listings.
        """
        _check_name("name", name)
        _check_flag("overwrite", overwrite)
        metadata = _check_user_metadata(user_metadata)

        def request(seq_id: int | None) -> types.SaveWeightsRequest:
            return types.SaveWeightsRequest(
                model_id=self.model_id,
                path=name,
                seq_id=seq_id,
                ttl_seconds=ttl_seconds,
                overwrite=overwrite,
                user_metadata=metadata,
            )

        request(None)  # checks ttl_seconds before a seq_id is taken
        return self._single(
            lambda seq_id: self._json_submission(
                request(seq_id), types.SaveWeightsResponse, "TrainingClient.save_state"
            ),
            kind="save_state",
        )

    @deprecated(_LOAD_STATE_DEPRECATION)
    def load_state(
        self, path: str, weights_access_token: str | None = None
    ) -> APIFuture[types.LoadWeightsResponse]:
        """Load the weights of a saved state; the optimizer state starts fresh.

        Deprecated, as in the official SDK: create a new training client from the checkpoint
        with :meth:`ServiceClient.create_training_client_from_state`. ``weights_access_token``
        loads a checkpoint of another account.
        """
        return self._load(
            path,
            weights_access_token=weights_access_token,
            optimizer=False,
            sdk_method="TrainingClient.load_state",
            kind="load_state",
        )

    @deprecated(_LOAD_STATE_DEPRECATION)
    def load_state_with_optimizer(
        self, path: str, weights_access_token: str | None = None
    ) -> APIFuture[types.LoadWeightsResponse]:
        """Load the weights and the optimizer state of a saved state.

        Deprecated, as in the official SDK: use
        :meth:`ServiceClient.create_training_client_from_state_with_optimizer`.
        """
        return self._load(
            path,
            weights_access_token=weights_access_token,
            optimizer=True,
            sdk_method="TrainingClient.load_state_with_optimizer",
            kind="load_state_with_optimizer",
        )

    def _load(
        self,
        path: str,
        *,
        optimizer: bool,
        sdk_method: str,
        kind: str,
        weights_access_token: str | None = None,
    ) -> APIFuture[types.LoadWeightsResponse]:
        types.check_tinker_path("path", path)
        if weights_access_token is not None and not isinstance(weights_access_token, str):
            raise InvalidInputError(
                "weights_access_token",
                f"must be a str or None, got {type(weights_access_token).__name__}",
                "to load the optimizer state too, call load_state_with_optimizer(path)"
                if isinstance(weights_access_token, bool)
                else "pass the access token of the account that owns the checkpoint",
            )
        return self._single(
            lambda seq_id: self._json_submission(
                types.LoadWeightsRequest(
                    model_id=self.model_id,
                    seq_id=seq_id,
                    path=path,
                    optimizer=optimizer,
                    weights_access_token=weights_access_token,
                ),
                types.LoadWeightsResponse,
                sdk_method,
            ),
            kind=kind,
        )

    def save_weights_for_sampler(
        self,
        name: str,
        ttl_seconds: int | None = None,
        user_metadata: dict[str, str] | None = None,
    ) -> APIFuture[types.SaveWeightsForSamplerResponse]:
        """Save weights for sampling as ``tinker://<run>/sampler_weights/<name>``.

        ``user_metadata`` (str -> str) is kept with the checkpoint and shown in its listings.
        """
        _check_name("name", name)
        metadata = _check_user_metadata(user_metadata)

        def request(seq_id: int | None) -> types.SaveWeightsForSamplerRequest:
            return types.SaveWeightsForSamplerRequest(
                model_id=self.model_id,
                path=name,
                seq_id=seq_id,
                ttl_seconds=ttl_seconds,
                user_metadata=metadata,
            )

        request(None)  # checks ttl_seconds before a seq_id is taken
        future: APIFuture[types.SaveWeightsForSamplerResponseInternal] = self._single(
            lambda seq_id: self._json_submission(
                request(seq_id),
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

    def save_weights_external(
        self,
        name: str,
        ttl_seconds: int | None = None,
        age_encryption_recipients: list[str] | None = None,
    ) -> APIFuture[types.SaveWeightsExternalResponse]:
        """Export the weights in an external (Hugging Face PEFT) layout as a checkpoint.

        The result's ``path`` is a ``tinker://<run>/external_weights/<name>`` checkpoint, listed
        and deleted like any other. ``age_encryption_recipients`` (at most 10 ``age1...`` or SSH
        public keys) has every exported file encrypted to them (stored with a ``.age`` suffix).
        """
        _check_name("name", name)
        recipients = _check_recipients(age_encryption_recipients)

        def request(seq_id: int | None) -> types.SaveWeightsExternalRequest:
            return types.SaveWeightsExternalRequest(
                model_id=self.model_id,
                path=name,
                seq_id=seq_id,
                ttl_seconds=ttl_seconds,
                age_encryption_recipients=recipients,
            )

        request(None)  # checks ttl_seconds before a seq_id is taken
        future: APIFuture[types.SaveWeightsExternalResponseInternal] = self._single(
            lambda seq_id: _Submission(
                self._api.training.encode_save_weights_external(request(seq_id)),
                "TrainingClient.save_weights_external",
            ),
            kind="save_weights_external",
        )

        def public(result: types.SaveWeightsExternalResponseInternal) -> Any:
            if not result.path:
                raise APIResponseValidationError(
                    "save_weights_external answered without a path", body=attrs.asdict(result)
                )
            return types.SaveWeightsExternalResponse(path=result.path)

        return chain(future, public)

    def get_console_url(self) -> str:
        """Return the Tinker Console URL of this training run (built locally, nothing is sent)."""
        return f"{CONSOLE_URL}/training_runs/{self.model_id}"

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        retry_config: object | None = None,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> BackcompatSamplingClientFuture:
        """Save the current weights for sampling; the future of a SamplingClient on them.

        The save is ephemeral (not listed, not downloadable) and creates no extra sampling
        session (docs/protocol.rst §7.3). ``kind``: ``"snapshot"`` fixes the weights saved now;
        ``"inflight"`` publishes weights shared by this model's inflight samplers (later inflight
        saves update them). ``record_stability_info`` is sent with every sample request of the
        returned client. ``name`` is deprecated and has no effect, as in the official SDK 0.38
        (a :class:`DeprecationWarning`): for a named checkpoint use
        ``save_weights_for_sampler(name)`` and ``create_sampling_client(path)``. Returns at once
        (the save is queued in call order); ``result()`` or ``await`` gives the client once the
        save is done. ``retry_config`` is accepted for compatibility.
        """
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

        def build(seq_id: int) -> _Submission:
            # docs/protocol.rst §7.1: the session-wide counter is shared with
            # create_sampling_session.
            request = types.SaveWeightsForSamplerRequest(
                model_id=self.model_id,
                sampling_session_seq_id=self._context.holder.next_sampling_session_seq_id(),
                seq_id=seq_id,
                kind=kind,
            )
            return self._json_submission(
                request,
                types.SaveWeightsForSamplerResponseInternal,
                "TrainingClient.save_weights_and_get_sampling_client",
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
        """The future of a SamplingClient for saved weights (``tinker://.../sampler_weights/...``).

        Returns at once; ``result()`` or ``await`` gives the client. ``record_stability_info`` is
        sent with every sample request of the client; ``retry_config`` is accepted for
        compatibility.
        """
        del retry_config
        self._context.check_open()
        return BackcompatSamplingClientFuture(
            SamplingClient._create(
                self._context,
                model_path,
                None,
                sdk_method="TrainingClient.create_sampling_client",
                record_stability_info=record_stability_info,
            )
        )

    # -- information -----------------------------------------------------------------------------

    def get_info(self) -> types.GetInfoResponse:
        """Return the model's base model, LoRA rank and tokenizer id.

        Read once when the client was created (golden-0.38: this call sends nothing).
        """
        self._context.check_open()
        return self._model_info(sdk_method="TrainingClient.get_info")

    def _info_unread(self) -> bool:
        """Whether :meth:`get_info` would ask the service (this client was made without it)."""
        return self._info is None

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
        """Return the model's tokenizer, as the official SDK does (docs/protocol.rst §10).

        ``transformers``' tokenizer when it is installed, else tinker_lite's
        :class:`~tinker_lite.tokenizer.LightTokenizer` (``encode`` gives ``list[int]``); both
        from the model's tokenizer files, resolved per docs/protocol.rst §10 and loaded by
        :mod:`tinker_lite.tokenizer` (local files first, the Hugging Face hub otherwise); cached
        for this client.
        """
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
        self._executor.shutdown(wait=False)


def _request_type(submission: _Submission | _Deferred) -> str:
    if isinstance(submission, _Deferred):
        return submission.request_type
    return submission.request.request_type


def _tokens(submission: _Submission | _Deferred) -> int | None:
    if isinstance(submission, _Deferred):
        return submission.tokens
    return submission.request.tokens


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
    lost_seq, lost_what, cause = lost
    error = APIError(
        f"{request_type} (seq_id {seq_id}) was not sent: the training request with seq_id "
        f"{lost_seq} ({lost_what}) could not be submitted ({type(cause).__name__}), and "
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


def _check_flag(field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidInputError(field, f"must be True or False, got {value!r}")


def _check_user_metadata(value: object) -> dict[str, str] | None:
    """A copy of ``user_metadata`` (str -> str), or an error naming the field."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            "user_metadata",
            f"must be a dict of str to str, got {type(value).__name__}",
            "e.g. {'step': '100'}",
        )
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InvalidInputError(
                f"user_metadata[{key!r}]",
                f"keys and values must be str, got {type(item).__name__}",
                "convert numbers with str()",
            )
    return dict(value)


def _check_recipients(value: object) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInputError(
            "age_encryption_recipients",
            f"must be a list of public keys, got {type(value).__name__}",
            "e.g. ['age1...']",
        )
    recipients = list(value)
    if not recipients or len(recipients) > _MAX_AGE_RECIPIENTS:
        raise InvalidInputError(
            "age_encryption_recipients",
            f"must hold 1 to {_MAX_AGE_RECIPIENTS} keys, got {len(recipients)}",
            "pass None for unencrypted files",
        )
    for index, key in enumerate(recipients):
        if not isinstance(key, str) or not key:
            raise InvalidInputError(
                f"age_encryption_recipients[{index}]", f"must be a public key, got {key!r}"
            )
    return recipients


def _with_weights(data: list[types.Datum], weights: Sequence[Any]) -> list[types.Datum]:
    """``data`` with ``weights`` (one numpy array per datum) as their cross-entropy weights."""
    return [
        attrs.evolve(
            datum,
            loss_fn_inputs={
                "target_tokens": datum.loss_fn_inputs["target_tokens"],
                "weights": types.TensorData.from_numpy(weight),
            },
        )
        for datum, weight in zip(data, weights, strict=True)
    ]


def _zero_weights(datum: types.Datum) -> types.Datum:
    """``datum`` with zero cross-entropy weights: a backward pass that changes nothing."""
    targets = datum.loss_fn_inputs["target_tokens"]
    zeros = types.TensorData(data=[0.0] * len(targets.data), dtype="float32", shape=targets.shape)
    return attrs.evolve(datum, loss_fn_inputs={"target_tokens": targets, "weights": zeros})


def _custom_forward_datum(datum: object, index: int) -> types.Datum:
    """The datum forward_backward_custom sends: targets and weights (zeros when not given)."""
    import numpy as np

    if not isinstance(datum, types.Datum):
        raise InvalidInputError(f"data[{index}]", f"must be a Datum, got {datum!r}")
    targets = datum.loss_fn_inputs.get("target_tokens")
    if targets is None:
        raise InvalidInputError(
            f"data[{index}].loss_fn_inputs",
            "forward_backward_custom needs 'target_tokens'",
            "give the token each position predicts",
        )
    weights = datum.loss_fn_inputs.get("weights")
    if weights is None:
        # As 0.38 sends it: zero weights shaped like the targets (the forward's loss is unused).
        weights = types.TensorData.from_numpy(np.zeros(targets.to_numpy().shape, dtype=np.float32))
    return attrs.evolve(datum, loss_fn_inputs={"target_tokens": targets, "weights": weights})


@forwarding_to(TrainingClient)
class BackcompatTrainingClientFuture(ClientFuture[TrainingClient], TrainingClient):
    """The future of a TrainingClient, as the creation methods return it (the official name).

    ``result()`` or ``await`` gives the client. Used as the client itself, it waits for the
    client and forwards, with the official deprecation warning (see :class:`ClientFuture`).
    """
