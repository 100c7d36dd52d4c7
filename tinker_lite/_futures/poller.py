"""Polling ``retrieve_future`` until each pending future resolves, on a bounded pool of threads.

The § sections are docs/protocol.rst's (§5.2 the rules); docs/architecture.rst, "The poller",
tells the threading.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tinker_lite._errors import (
    APIConnectionError,
    APIError,
    InvalidInputError,
    TinkerError,
)
from tinker_lite._futures.answers import (
    QueueKind,
    QueueStateLogger,
    expired_error,
    json_object,
    note_queue_state,
    result_of,
    stall_error,
    unexpected_error,
)
from tinker_lite._futures.future import APIFuture
from tinker_lite._futures.tasks import IDLE_TIMEOUT, Poll, PollTask, join_all, pace, poll_wait
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.answers import JSON, HttpResponse, raise_for_status
from tinker_lite._transport.http import RETRIEVE_FUTURE_TIMEOUT, ClientClosedError, Timeout, redact
from tinker_lite._transport.loops import (
    RetryableStatus,
    RetryCallState,
    attempt_error,
    call_of,
    retry_loop,
)
from tinker_lite._transport.retry import (
    DEFAULT_RETRY_POLICY,
    MIN_ATTEMPT_DEADLINE,
    RetryPolicy,
    StallWatch,
    announce_retry,
    describe_error,
    is_invisible_failure,
)

__all__ = ["Poll", "Poller"]

logger = logging.getLogger("tinker_lite.futures")

T = TypeVar("T")


class Poller:
    """Resolves :class:`APIFuture` objects by polling ``retrieve_future`` on a bounded pool.

    ``created_at`` given to :meth:`poll` is of ``clock``; ``sleep`` ends early on close by default.
    """

    def __init__(
        self,
        send: Callable[[Poll], HttpResponse],
        *,
        abort: Callable[[], None] | None = None,
        max_workers: int = 32,
        stall_timeout: float = 300.0,
        poll_timeout: Timeout = RETRIEVE_FUTURE_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
        rand: Callable[[], float] = random.random,
        wall_clock: Callable[[], float] = time.time,
        max_resubmits: int = 10,
        thread_name: str = "tinker-lite-poll",
        policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        if max_workers < 1:
            raise InvalidInputError("max_workers", f"must be >= 1, got {max_workers}")
        self._send = send
        self._abort = abort
        self._max_workers = max_workers
        self._stall_timeout = stall_timeout
        self._poll_timeout = poll_timeout
        self._clock = clock
        self._closing = threading.Event()
        self._sleep: Callable[[float], object] = sleep if sleep is not None else self._closing.wait
        self._wall_clock = wall_clock
        self._policy = policy
        self._max_resubmits = max_resubmits
        self._thread_name = thread_name
        self._cond = threading.Condition()
        self._ready: collections.deque[PollTask] = collections.deque()
        self._live: set[PollTask] = set()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._starting = 0  # threads started that have not yet looked at the queue
        self._spawned = 0
        self._default_loggers: dict[str, QueueStateLogger] = {}
        # One loop for every step of every task (the task is its first argument).
        self._polls = retry_loop(
            wait=poll_wait(policy, rand, wall_clock=wall_clock),
            stop=self._stops,
            retry_on=_transient,
            retry_result=lambda answer: answer is _AGAIN,
            sleep=self._sleep,
            before=self._before_poll,
            before_sleep=self._before_sleep,
        )

    @tolerant_repr
    def __repr__(self) -> str:
        return (
            f"Poller(pending={len(self._live)}, threads={len(self._threads)}, "
            f"max_workers={self._max_workers}, closed={self._closing.is_set()})"
        )

    @property
    def max_workers(self) -> int:
        """The most polling threads this poller runs at once."""
        return self._max_workers

    def set_max_workers(self, value: int) -> None:
        """Change the thread cap (e.g. to the sampling concurrency the user asked for)."""
        if value < 1:
            raise InvalidInputError("max_workers", f"must be >= 1, got {value}")
        with self._cond:
            self._max_workers = value
            while self._should_spawn_locked():
                if not self._spawn_locked():
                    break

    @property
    def thread_count(self) -> int:
        """Polling threads alive now."""
        with self._cond:
            return len(self._threads)

    @property
    def parked_count(self) -> int:
        """Futures parked because nobody waits on them (not polled until someone does)."""
        with self._cond:
            return sum(1 for task in self._live if task.idle)

    def wait_parked(self, count: int, timeout: float) -> bool:
        """Block until at least ``count`` futures are parked; False on timeout (for tests)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.parked_count >= count, timeout)

    def poll(
        self,
        request_id: str,
        request_type: str,
        decode: Callable[[HttpResponse], T],
        *,
        created_at: float,
        resubmit: Callable[[], str] | None = None,
        accept: str = JSON,
        on_queue_state: Callable[[str, str | None], None] | None = None,
        sdk_method: str | None = None,
        future: APIFuture[T] | None = None,
        metadata_only: bool = True,
    ) -> APIFuture[T]:
        """Start polling ``request_id`` and return its future (``future``, named after it).

        ``decode`` reads the final 2xx answer; ``created_at`` is when the caller started (§2.3);
        ``resubmit`` re-sends after a 410 and returns the new id (§5.3); ``metadata_only`` is
        the first poll's ``allow_metadata_only`` (§5.4).
        """
        now = self._clock()
        if future is None:
            future = APIFuture(request_id, request_type=request_type, clock=self._clock)
        elif future.done():  # cancelled before its request was accepted
            return future
        task = PollTask(
            future=future,
            request_id=request_id,
            request_type=request_type,
            decode=decode,
            accept=accept,
            sdk_method=sdk_method,
            resubmit=resubmit,
            on_queue_state=on_queue_state or self._default_logger(request_type),
            created_at=created_at,
            registered_at=now,
            stall=StallWatch(self._stall_timeout, self._clock),
            metadata_only=metadata_only,
        )
        future._cancel_hook = lambda: self._forget(task)
        future._demand_hook = lambda wanted: self._set_demand(task, wanted)
        with self._cond:
            if self._closing.is_set():
                future.try_set_exception(
                    ClientClosedError(f"The client is closed; cannot wait for {task.describe()}.")
                )
                return future
            self._live.add(task)
            self._enqueue_locked(task)
        return future

    def _default_logger(self, request_type: str) -> QueueStateLogger:
        with self._cond:
            if request_type not in self._default_loggers:
                kind = _QUEUE_KINDS.get(request_type, "training")
                self._default_loggers[request_type] = QueueStateLogger(
                    f"{request_type} request", "this client", kind=kind, clock=self._clock
                )
            return self._default_loggers[request_type]

    def _forget(self, task: PollTask) -> None:
        with self._cond:
            self._live.discard(task)

    def _set_demand(self, task: PollTask, wanted: bool) -> None:
        with self._cond:
            if not wanted:
                task.parked = True
                return
            task.parked = False
            if task.idle and task in self._live and not self._closing.is_set():
                task.idle = False
                task.stall.unpark()
                task.fast_answers = 0
                self._enqueue_locked(task)

    def _park_if_hot_locked(self, task: PollTask) -> bool:
        """Park ``task`` when nobody waits and the service answers at once (§6.6)."""
        if not (task.parked and task.fast_answers > 0):
            return False
        task.idle = True
        task.stall.park()
        self._cond.notify_all()
        logger.debug("Stopped polling %s: nobody waits for it", task.describe())
        return True

    def _should_spawn_locked(self) -> bool:
        return (
            len(self._ready) > self._idle + self._starting
            and len(self._threads) < self._max_workers
            and not self._closing.is_set()
        )

    def _enqueue_locked(self, task: PollTask) -> None:
        self._ready.append(task)
        if self._should_spawn_locked():
            self._spawn_locked()
        self._cond.notify()

    def _spawn_locked(self) -> bool:
        self._spawned += 1
        thread = threading.Thread(
            target=self._worker, name=f"{self._thread_name}-{self._spawned}", daemon=True
        )
        self._threads.add(thread)
        self._starting += 1
        try:
            thread.start()
        except RuntimeError as e:
            self._threads.discard(thread)
            self._starting -= 1
            error = APIConnectionError(f"Could not start a thread to poll for results: {e}")
            while not self._threads and self._ready:
                task = self._ready.popleft()
                self._live.discard(task)
                task.future.try_set_exception(error)
            return False
        return True

    def _next_task(self) -> PollTask | None:
        with self._cond:
            while True:
                if self._closing.is_set():
                    return None
                while self._ready:
                    task = self._ready.popleft()
                    if task.future.done():
                        self._live.discard(task)
                    elif not self._park_if_hot_locked(task):
                        return task
                self._idle += 1
                try:
                    notified = self._cond.wait(IDLE_TIMEOUT)
                finally:
                    self._idle -= 1
                if not notified and not self._ready:
                    return None

    def _worker(self) -> None:
        me = threading.current_thread()
        task: PollTask | None = None
        with self._cond:
            self._starting -= 1
        try:
            while True:
                task = self._next_task()
                if task is None:
                    return
                try:
                    self._step(task)
                except Exception as e:
                    self._finish(task, error=unexpected_error(task, e))
                task = None
        except BaseException as e:
            # §6.6: a dying thread resolves the future it was working on.
            logger.error("A polling thread died: %s: %s", type(e).__name__, redact(str(e)))
            if task is not None:
                error = TinkerError(
                    f"The thread polling {task.describe()} died: {type(e).__name__}: "
                    f"{redact(str(e))}"
                )
                error.__cause__ = e
                self._finish(task, error=error)
        finally:
            with self._cond:
                self._threads.discard(me)
                if self._should_spawn_locked():
                    self._spawn_locked()

    def _finish(
        self, task: PollTask, *, value: Any = None, error: BaseException | None = None
    ) -> None:
        with self._cond:
            self._live.discard(task)
        if error is not None:
            task.future.try_set_exception(error)
        else:
            task.future.try_set_result(value)

    def _requeue(self, task: PollTask) -> None:
        with self._cond:
            if self._closing.is_set() or task.future.done():
                self._live.discard(task)
                task.future.try_set_exception(_closed(task))
                return
            if self._park_if_hot_locked(task):
                return
            self._enqueue_locked(task)

    def _step(self, task: PollTask) -> None:
        """Poll ``task`` until it resolves, stalls, parks or yields its thread (§5.2)."""
        try:
            answer = self._polls(self._poll_once, task)
        except _Yield:
            self._requeue(task)
            return
        except (APIError, RetryableStatus) as e:  # e.g. an answer larger than the client reads
            failure: BaseException = e
            if _transient(e):  # past the stall timeout, or the poller is closing
                elapsed = self._clock() - task.registered_at
                closed = self._closing.is_set()
                failure = _closed(task) if closed else stall_error(task, e, elapsed=elapsed)
            self._finish(task, error=failure)
            return
        if answer is _AGAIN:  # parked, or the poller is closing
            self._requeue(task)
            return
        assert isinstance(answer, HttpResponse)
        if answer.status == 410:
            self._handle_expired(task, answer)
        elif 200 <= answer.status < 300:
            value, error = result_of(task, answer)
            self._finish(task, value=value, error=error)
        else:
            try:
                raise_for_status(answer, request_id=task.request_id)  # raises for every non-2xx
            except APIError as e:
                self._finish(task, error=e)

    def _poll_once(self, task: PollTask) -> HttpResponse | object:
        """One ``retrieve_future``: the final answer, :data:`_AGAIN`, or a retryable failure."""
        iteration = task.iteration
        task.iteration += 1
        # §6.6: the stall timeout is overshot by at most the poll in flight (<= 1 s).
        read = min(self._poll_timeout.read, max(task.stall.remaining(), 1.0))
        poll = Poll(
            request_id=task.request_id,
            request_type=task.request_type,
            iteration=iteration,
            accept=task.accept,
            metadata_only=task.metadata_only,
            # One deadline for the whole poll: a trickled answer cannot hold it past the bound.
            timeout=Timeout(
                connect=min(self._poll_timeout.connect, read),
                read=read,
                total=max(read, MIN_ATTEMPT_DEADLINE),
            ),
            sdk_method=task.sdk_method,
            roundtrip_s=max(0.0, task.registered_at - task.created_at) if iteration == 0 else None,
        )
        sent_at = self._clock()
        try:
            resp = self._send(poll)
        except ClientClosedError:
            raise
        except APIConnectionError:
            self._failed(task)
            raise
        status = resp.status
        if status == 429 or status >= 500:
            self._failed(task)
            raise RetryableStatus(resp)
        task.stall.answered()
        task.failures = 0
        if status == 408:
            note_queue_state(task, json_object(resp))
            pace(task, self._policy, self._clock() - sent_at)
            return _AGAIN
        if 200 <= status < 300 and not resp.is_protobuf:
            data = json_object(resp)
            if data is not None and data.get("type") == "try_again":
                note_queue_state(task, data)
                pace(task, self._policy, self._clock() - sent_at)
                return _AGAIN
            if data is not None and data.get("status") == "complete_metadata":
                # §5.4: the result is ready; the next poll asks for it.
                task.metadata_only = False
                task.fast_answers = 0
                task.pause = 0.0
                return _AGAIN
        return resp

    def _failed(self, task: PollTask) -> None:
        task.failures += 1
        task.fast_answers = 0

    def _stops(self, state: RetryCallState) -> bool:
        task: PollTask = call_of(state)
        if self._closing.is_set():
            return True
        if attempt_error(state) is not None:
            return task.stall.expired()
        return task.parked and task.fast_answers > 0 and task.pause > 0

    def _before_poll(self, state: RetryCallState) -> None:
        if state.attempt_number > 1 and self._ready:
            raise _Yield

    def _before_sleep(self, state: RetryCallState) -> None:
        error = attempt_error(state)
        if error is None:
            return
        task: PollTask = call_of(state)
        resp = error.response if isinstance(error, RetryableStatus) else None
        announce_retry(
            f"Polling {task.describe()}",
            f"HTTP {resp.status}" if resp is not None else describe_error(error),
            delay=state.upcoming_sleep,
            until_s=task.stall.remaining(),
            wall_now=self._wall_clock(),
            invisible=is_invisible_failure(error, resp.status if resp is not None else None),
            notice=task.notice,
        )

    def _handle_expired(self, task: PollTask, resp: HttpResponse) -> None:
        if task.resubmit is None or task.resubmits >= self._max_resubmits:
            self._finish(task, error=expired_error(task, resp))
            return
        # §5.3: sampling re-runs the request (a new request id, a new seq_id).
        logger.info("%s expired on the service (HTTP 410); re-submitting it", task.describe())
        task.resubmits += 1
        started = self._clock()
        try:
            new_id = task.resubmit()
        except Exception as e:
            self._finish(task, error=e)
            return
        now = self._clock()
        task.request_id = new_id
        task.future.request_id = new_id
        task.created_at = started
        task.registered_at = now
        task.stall.answered()
        task.iteration = 0
        task.metadata_only = True
        self._requeue(task)

    def close(self, timeout: float = 10.0) -> None:
        """Fail every pending future, abort polls in flight and join the threads. Idempotent."""
        with self._cond:
            self._closing.set()
            tasks = list(self._live)
            self._live.clear()
            self._ready.clear()
            threads = list(self._threads)
            self._cond.notify_all()
        for task in tasks:
            task.future.try_set_exception(_closed(task))
        if self._abort is not None:
            self._abort()
        join_all(threads, timeout)


_AGAIN = object()  # what a poll answers when the service asks to be polled again
_QUEUE_KINDS: dict[str, QueueKind] = {"Sample": "sampling", "CreateModel": "model_creation"}


def _closed(task: PollTask) -> ClientClosedError:
    return ClientClosedError(f"The client was closed before {task.describe()} completed.")


class _Yield(Exception):
    """Ends a poll loop so that the thread serves another task (the task is queued again)."""


def _transient(error: BaseException) -> bool:
    return isinstance(error, RetryableStatus) or (
        isinstance(error, APIConnectionError) and not isinstance(error, ClientClosedError)
    )
