"""The ordered submit queue of one training client (docs/protocol.rst §7.2)."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from tinker_lite._api import TrainingRequest
from tinker_lite._context import ClientContext
from tinker_lite._errors import APIConnectionError, APIError, APIStatusError, ClientClosedError
from tinker_lite._futures.answers import QueueStateLogger
from tinker_lite._futures.future import APIFuture
from tinker_lite._session.journal import SeqOrder

if TYPE_CHECKING:
    from tinker_lite._futures.pending import PendingRequest

__all__ = ["Deferred", "TrainingQueue"]

logger = logging.getLogger("tinker_lite.training_client")


@attrs.frozen
class Deferred:
    """A training request whose ``seq_id`` is reserved at the call but whose body is built
    when its turn comes (the backward pass of ``forward_backward_custom``)."""

    request_type: str
    tokens: int | None
    build: Callable[[int], TrainingRequest]


@attrs.frozen
class _Operation:
    """How one training request is named in the run journal (it holds no request body)."""

    kind: str
    seq_id: int
    created_at: float
    tokens: int | None = None  # input tokens of a forward/forward_backward chunk


class TrainingQueue:
    """The request ids and the single-thread submit executor of one training run (the thread ends
    once ``owner``, the client, is garbage and its submits are sent)."""

    def __init__(self, context: ClientContext, model_id: str, owner: object) -> None:
        self._context = context
        self._model_id = model_id
        self.executor = context.new_train_executor(owner)
        # Held across several schedule() calls whose seq_ids must be contiguous.
        self.order_lock = threading.RLock()
        # (seq_id, what, error) of a submit the service may never have received; read and
        # written only on the executor's single thread.
        self._lost_submit: tuple[int, str, BaseException] | None = None
        self._next_request_id = 0
        # Journal lines in seq_id order (results may be polled back out of order).
        self._journal_order = SeqOrder(first=self._next_request_id + 1)
        self._queue_logger = QueueStateLogger("Training", model_id, kind="training")
        # Starts the thread here, on the REST threads, not in a first call from an event loop.
        self.executor.submit(int)

    def schedule(
        self,
        builds: Sequence[Callable[[int], TrainingRequest] | Deferred],
        *,
        created_at: float,
        kind: str,
        first_last: bool = False,
    ) -> list[APIFuture[Any]]:
        """Reserve one ``seq_id`` per build, in call order, and queue the submits (``first_last``:
        the first is sent last); the futures in ``seq_id`` order."""
        with self.order_lock:
            self._context.check_open()
            first_seq = self._next_request_id + 1
            # Encoded before any id is consumed: an encoding error leaves no gap in seq_ids.
            submissions = [
                build if isinstance(build, Deferred) else build(first_seq + index)
                for index, build in enumerate(builds)
            ]
            self._next_request_id += len(submissions)
            futures: list[APIFuture[Any]] = [
                APIFuture(request_type=submission.request_type) for submission in submissions
            ]
            order = list(range(len(submissions)))
            if first_last and len(order) > 1:
                order = [*order[1:], 0]
            for index in order:
                submission, out = submissions[index], futures[index]
                op = _Operation(kind, first_seq + index, created_at, submission.tokens)
                # Registered for close(): finished on a normal close, named if dropped. Its
                # entry lives until the result arrives, so it does not hold the encoded body
                # (freed once the request is sent).
                pending = self._context.pending.track(
                    kind,
                    out,
                    owner=f"training run {self._model_id}",
                    seq_id=op.seq_id,
                    on_drop=functools.partial(self._deliver_error, out=out, op=op),
                )
                try:
                    self.executor.submit(self._send, submission, out, op, pending)
                except RuntimeError:
                    if pending.claim():
                        self._deliver_error(
                            ClientClosedError("The ServiceClient is closed."), out, op
                        )
        return futures

    def _deliver(self, source: APIFuture[Any], out: APIFuture[Any], op: _Operation) -> None:
        """Journal ``source``'s outcome, then hand it to ``out``; called exactly once per request
        (journal lines are released in ``seq_id`` order)."""
        # Watched first: the line is written (or queued behind an earlier seq_id still
        # pending) before ``out`` completes.
        self._context.journal_watch(
            source,
            op.kind,
            seq_id=op.seq_id,
            tokens=op.tokens,
            model_id=self._model_id,
            started=op.created_at,
            defer=self._journal_order.slot(op.seq_id),
        )
        out.forward_from(source)

    def _deliver_error(self, error: BaseException, out: APIFuture[Any], op: _Operation) -> None:
        self._deliver(APIFuture.failed(error), out, op)

    def _send(
        self,
        request: TrainingRequest | Deferred,
        out: APIFuture[Any],
        op: _Operation,
        pending: PendingRequest,
    ) -> None:
        """Submit one request (its turn has come) and hand its polling to the poller."""
        if not pending.claim():
            return  # dropped by close(): its future already holds a ClientClosedError
        if self._lost_submit is not None:
            held = _held_back(self._lost_submit, op.seq_id, request.request_type)
            self._deliver(APIFuture.failed(held), out, op)
            return
        if isinstance(request, Deferred):
            deferred = request
            try:
                request = deferred.build(op.seq_id)
            except BaseException as e:
                # Nothing was sent: the service would wait for this seq_id forever.
                self._lost_submit = (op.seq_id, deferred.request_type, e)
                self._deliver(APIFuture.failed(e), out, op)
                return
        try:
            request_id = self._context.api.training.submit_training(
                request, sdk_method=request.sdk_method
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
                sdk_method=request.sdk_method,
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
