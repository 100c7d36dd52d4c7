"""Futures of asynchronous requests (:class:`APIFuture`), and how to combine them.

:class:`APIFuture` is a :class:`concurrent.futures.Future`: ``result(timeout)``,
``exception(timeout)``, ``done()``, ``cancelled()``, ``running()``, ``cancel()`` and
``add_done_callback(fn)`` behave as documented there, and ``concurrent.futures.wait`` /
``as_completed`` accept it. Differences: a ``result(timeout=...)`` that expires raises
:class:`FutureTimeoutError` (both :class:`~tinker_lite.APITimeoutError`, carrying the request id,
the last queue state and the elapsed time, and :class:`concurrent.futures.TimeoutError`); the
request keeps going on the service and ``result()`` may be called again (when the service
answers polls at once, polling pauses until then: docs/protocol.rst §6.6, no hot poll is left
behind). ``cancel()`` succeeds while the future is pending and stops its polling; the service may
still execute the request.

The poller that resolves these futures lives in :mod:`tinker_lite._futures.poller`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import _base as _futures_base
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tinker_lite._async import AwaitableFuture
from tinker_lite._errors import FutureTimeoutError
from tinker_lite._repr import tolerant_repr

__all__ = [
    "APIFuture",
    "FutureTimeoutError",
    "chain",
    "combine",
    "flatten",
    "then",
]

T = TypeVar("T")
R = TypeVar("R")
# ---------------------------------------------------------------------------------------------
# APIFuture


_RLock: Any = type(threading.RLock())  # the C re-entrant lock type (_thread.RLock)


class _FutureCondition(_RLock):  # type: ignore[misc]
    """The condition variable of one future: its own re-entrant lock, plus waiters on demand.

    ``concurrent.futures`` uses a future's ``_condition`` only as a lock (``with``, ``acquire``,
    ``release``), to ``wait(timeout)`` and to ``notify_all()``. A ``threading.Condition`` also
    allocates a deque and six bound methods (about 1.4 KiB) for every one of thousands of
    in-flight samples, and enters its lock through Python code; this is the lock itself (C
    ``acquire``/``release``/``with``), and allocates a waiter list only while someone waits.
    """

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[Any] | None = None

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock, wait for a notify or ``timeout``, re-acquire; whether notified."""
        waiter = threading.Lock()
        waiter.acquire()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        # The lock may be held recursively: release it fully, restore it after (as Condition).
        saved = self._release_save()
        notified = False
        try:
            if timeout is None:
                notified = waiter.acquire()
            elif timeout > 0:
                notified = waiter.acquire(True, timeout)
            else:
                notified = waiter.acquire(False)
            return notified
        finally:
            self._acquire_restore(saved)
            if not notified and self._waiters is not None:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate()`` is true or ``timeout`` expires; the last predicate value."""
        deadline = None if timeout is None else time.monotonic() + timeout
        result = predicate()
        while not result:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self.wait(remaining)
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        waiters = self._waiters
        if not waiters:
            return
        for waiter in waiters[:n]:
            waiter.release()
        del waiters[:n]

    def notify_all(self) -> None:
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            waiter.release()


# The attributes concurrent.futures.Future.__init__ sets: APIFuture sets them itself, with a
# light condition, unless this Python's Future has others (then it calls Future.__init__).
_FUTURE_FIELDS = ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")
_OWN_INIT = set(vars(concurrent.futures.Future())) == set(_FUTURE_FIELDS)
_CANCELLED_STATES = frozenset({_futures_base.CANCELLED, _futures_base.CANCELLED_AND_NOTIFIED})
_DONE_STATES = _CANCELLED_STATES | {_futures_base.FINISHED}


_RESULT_FIELD_NAMES: frozenset[str] | None = None


def _result_field_names() -> frozenset[str]:
    """Public attribute names of the result types (``*Response``, ``*Output``) of ``types``."""
    global _RESULT_FIELD_NAMES
    if _RESULT_FIELD_NAMES is None:
        from tinker_lite import types

        names: set[str] = set()
        for type_name in getattr(types, "__all__", ()):
            cls = getattr(types, type_name, None)
            if isinstance(cls, type) and type_name.endswith(("Response", "Output")):
                names.update(n for n in dir(cls) if not n.startswith("_"))
        _RESULT_FIELD_NAMES = frozenset(names)
    return _RESULT_FIELD_NAMES


class APIFuture(AwaitableFuture[T], concurrent.futures.Future[T]):
    """The eventual result of an asynchronous request (see the module docstring)."""

    # Slotted (concurrent.futures' own fields too): thousands may be in flight at once.
    __slots__ = (
        *_FUTURE_FIELDS,
        "_cancel_hook",
        "_clock",
        "_demand_hook",
        "_queue_state",
        "_request_id",
        "_sources",
        "_started",
        "_waiting",
        "request_type",
    )

    def __init__(
        self,
        request_id: str | None = None,
        *,
        request_type: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if _OWN_INIT:
            self._condition = _FutureCondition()
            self._state = _futures_base.PENDING
            self._result = None
            self._exception = None
            self._waiters = []
            self._done_callbacks: list[Callable[[concurrent.futures.Future[T]], object]] = []
        else:  # pragma: no cover - a Python whose Future has other fields
            super().__init__()
        self._request_id = request_id
        self.request_type = request_type
        self._clock = clock
        self._started = clock()
        self._queue_state: str | None = None
        self._sources: tuple[concurrent.futures.Future[Any], ...] = ()
        self._cancel_hook: Callable[[], None] | None = None
        # Set by the poller: called with True when someone starts waiting, with False when the
        # last waiter's timeout expired (docs/protocol.rst §6.6: no hot poll is left behind).
        self._demand_hook: Callable[[bool], None] | None = None
        self._waiting = 0

    # -- identity ----------------------------------------------------------------------------

    @property
    def request_id(self) -> str | None:
        """The service's id of the request (of the first source for a combined future)."""
        if self._request_id is None and self._sources:
            first = self._sources[0]
            return first.request_id if isinstance(first, APIFuture) else None
        return self._request_id

    @request_id.setter
    def request_id(self, value: str | None) -> None:
        self._request_id = value

    @property
    def queue_state(self) -> str | None:
        """The last queue state the service reported for this request (``None`` if never)."""
        if self._queue_state is None:
            for source in self._sources:
                if isinstance(source, APIFuture) and not source.done():
                    return source.queue_state
        return self._queue_state

    @property
    def elapsed(self) -> float:
        """Seconds since this future was created."""
        return self._clock() - self._started

    # -- concurrent.futures.Future API ------------------------------------------------------

    def result(self, timeout: float | None = None) -> T:
        """Return the result, waiting up to ``timeout`` seconds (``None``: until resolved).

        Raises the request's error if it failed, :class:`FutureTimeoutError` when ``timeout``
        expires first, :class:`concurrent.futures.CancelledError` if cancelled.
        """
        self._wait_begins()
        expired = False
        try:
            return super().result(timeout)
        except concurrent.futures.TimeoutError as e:
            if self._is_stored(e):
                raise
            expired = True
            raise self._timeout_error(timeout) from None
        finally:
            self._wait_ends(expired=expired)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Return the request's error (``None`` on success), waiting up to ``timeout`` seconds."""
        self._wait_begins()
        expired = False
        try:
            return super().exception(timeout)
        except concurrent.futures.TimeoutError:
            expired = True
            raise self._timeout_error(timeout) from None
        finally:
            self._wait_ends(expired=expired)

    def running(self) -> bool:
        """Whether the request is still pending (submitted and not yet resolved)."""
        return not self.done()

    def done(self) -> bool:
        """Whether the future has a result or an error, or was cancelled."""
        # One attribute read is atomic: no lock needed (the poller asks this on every step).
        return self._state in _DONE_STATES

    def cancelled(self) -> bool:
        """Whether the future was cancelled."""
        return self._state in _CANCELLED_STATES

    def cancel(self) -> bool:
        """Stop waiting for this request; ``False`` if it already completed.

        Polling stops; the service may still execute the request (there is no cancel endpoint).
        Cancelling a combined future cancels its sources.
        """
        if not super().cancel():
            return False
        hook = self._cancel_hook
        if hook is not None:
            hook()
        for source in self._sources:
            source.cancel()
        self._let_go()
        return True

    def set_result(self, result: T) -> None:
        """Deliver ``result`` (``InvalidStateError`` if already done), then run the callbacks."""
        super().set_result(result)
        self._let_go()

    def set_exception(self, exception: BaseException | None) -> None:
        """Deliver the error ``exception``, then run the callbacks."""
        super().set_exception(exception)
        self._let_go()

    def _let_go(self) -> None:
        """Drop what only a pending future needs once the callbacks have run.

        A completed future may be kept for long before its result is read (a fan-out awaits
        thousands in order); its callbacks and the poller's hooks would keep the request's whole
        polling state alive with it. ``add_done_callback`` on a done future runs ``fn`` at once
        and keeps nothing.
        """
        self._cancel_hook = None
        self._demand_hook = None
        self._done_callbacks.clear()

    # -- construction helpers ----------------------------------------------------------------

    @classmethod
    def completed(cls, value: T, *, request_id: str | None = None) -> APIFuture[T]:
        """A future that already holds ``value``."""
        future: APIFuture[T] = cls(request_id)
        future.set_result(value)
        return future

    @classmethod
    def failed(cls, exc: BaseException, *, request_id: str | None = None) -> APIFuture[Any]:
        """A future that already holds the error ``exc``."""
        future: APIFuture[Any] = cls(request_id)
        future.set_exception(exc)
        return future

    # -- completing a pending future ---------------------------------------------------------

    def try_set_result(self, value: T) -> bool:
        """Deliver ``value`` unless the future is already done (e.g. cancelled).

        Returns whether it was delivered; unlike ``set_result`` it never raises
        ``InvalidStateError``, so a producer racing with ``cancel()`` needs no lock.
        """
        try:
            self.set_result(value)
        except concurrent.futures.InvalidStateError:
            return False
        return True

    def try_set_exception(self, exc: BaseException) -> bool:
        """Deliver the error ``exc`` unless the future is already done; whether it was."""
        try:
            self.set_exception(exc)
        except concurrent.futures.InvalidStateError:
            return False
        return True

    def forward_from(self, source: concurrent.futures.Future[T]) -> None:
        """Complete this future with ``source``'s outcome (result, error or cancellation).

        Meant for a future handed out before its request was sent: once the request is
        submitted, the future that tracks it becomes the ``source``. Until it completes,
        ``request_id`` and ``queue_state`` are read from ``source``. Cancelling this future
        cancels ``source`` (and stops its polling), also when it was cancelled before this call.
        Done-callbacks added to ``source`` before this call run before this future completes.
        """
        with self._condition:
            waiting = self._waiting
            self._sources = (source,)
        if isinstance(source, APIFuture):
            for _ in range(waiting):
                source._wait_begins()

        def deliver(done: concurrent.futures.Future[T]) -> None:
            if done.cancelled():
                self.cancel()
                return
            error = done.exception(0)
            if error is not None:
                self.try_set_exception(error)
            else:
                self.try_set_result(done.result(0))

        source.add_done_callback(deliver)
        if self.cancelled():
            source.cancel()

    @tolerant_repr
    def __repr__(self) -> str:
        if self.cancelled():
            state = "cancelled"
        elif not self.done():
            state = "pending"
        elif super().exception(0) is not None:
            state = "failed"
        else:
            state = "done"
        return (
            f"<APIFuture request_id={self.request_id!r} type={self.request_type!r} state={state}>"
        )

    if not TYPE_CHECKING:  # a __getattr__ would hide every misspelt attribute from mypy

        def __getattr__(self, name: str) -> Any:
            # Called only for names the future lacks. A result's field read on the future
            # itself (``training.forward_backward(...).metrics``) is told to call .result()
            # first; private and protocol names (pickle, copy, hasattr) get the plain error.
            message = f"'{type(self).__name__}' object has no attribute {name!r}"
            if not name.startswith("_") and name in _result_field_names():
                message += (
                    f"; it is the future of a result: call .result() first (.result().{name})"
                )
            raise AttributeError(message, name=name, obj=self)

    # -- internals ---------------------------------------------------------------------------

    def _wait_begins(self) -> None:
        """Someone waits on this future (and so on its sources): polling must go on."""
        if self.done():
            return
        with self._condition:
            self._waiting += 1
            sources = self._sources
        hook = self._demand_hook
        if hook is not None:
            hook(True)
        for source in sources:
            if isinstance(source, APIFuture):
                source._wait_begins()

    def _wait_ends(self, *, expired: bool) -> None:
        """A wait ended; when it expired and nobody else waits, a hot poll may stop."""
        with self._condition:
            if self._waiting == 0:
                return
            self._waiting -= 1
            idle = expired and self._waiting == 0
            sources = self._sources
        hook = self._demand_hook
        if idle and hook is not None and not self.done():
            hook(False)
        for source in sources:
            if isinstance(source, APIFuture):
                source._wait_ends(expired=expired)

    def _is_stored(self, exc: BaseException) -> bool:
        return self.done() and not self.cancelled() and super().exception(0) is exc

    def _pending_request_ids(self) -> list[str]:
        if self._sources:
            ids: list[str] = []
            for source in self._sources:
                if isinstance(source, APIFuture) and not source.done():
                    ids.extend(source._pending_request_ids())
            return ids
        return [self._request_id] if self._request_id else []

    def _timeout_error(self, timeout: float | None) -> FutureTimeoutError:
        pending = self._pending_request_ids()
        rid = pending[0] if pending else self.request_id
        what = f"request {rid}" if len(pending) <= 1 else f"requests {', '.join(pending)}"
        if self.request_type:
            what += f" ({self.request_type})"
        state = self.queue_state
        elapsed = self.elapsed
        if rid is None:
            # Nothing has reached the service yet: no id, no queue, nothing continues there.
            kind = f"the {self.request_type} request" if self.request_type else "the request"
            return FutureTimeoutError(
                f"Timed out after {timeout}s before {kind} was accepted by the service "
                f"({elapsed:.1f}s since it was made; it is still being sent or waits for an "
                "earlier request). Call result() again to keep waiting.",
                elapsed=elapsed,
            )
        return FutureTimeoutError(
            f"Timed out after {timeout}s waiting for {what}; {elapsed:.1f}s since it was "
            f"submitted; last queue state: {state or 'not reported'}. The request continues on "
            "the service: call result() again to keep waiting.",
            request_id=rid,
            queue_state=state,
            elapsed=elapsed,
        )


def combine(
    futures: Sequence[concurrent.futures.Future[T]],
    fn: Callable[[list[T]], R],
    *,
    request_type: str | None = None,
) -> APIFuture[R]:
    """A future of ``fn([f.result() for f in futures])`` (e.g. merging chunked results).

    It fails as soon as one source fails (with that error), or if ``fn`` raises. Cancelling it
    cancels the sources. ``fn`` runs on the thread that completes the last source.
    """
    sources = list(futures)
    out: APIFuture[R] = APIFuture(request_type=request_type)
    out._sources = tuple(sources)
    if not sources:
        _finish_with(out, fn, [])
        return out
    lock = threading.Lock()
    remaining = [len(sources)]

    def on_done(source: concurrent.futures.Future[T]) -> None:
        if out.done():
            return
        if source.cancelled():
            out.try_set_exception(
                concurrent.futures.CancelledError("a combined source was cancelled")
            )
            return
        error = source.exception(0)
        if error is not None:
            out.try_set_exception(error)
            return
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            _finish_with(out, fn, [s.result(0) for s in sources])

    for source in sources:
        source.add_done_callback(on_done)
    return out


def _finish_with(out: APIFuture[R], fn: Callable[[list[T]], R], values: list[T]) -> None:
    try:
        value = fn(values)
    except Exception as e:
        out.try_set_exception(e)
    else:
        out.try_set_result(value)


def chain(future: concurrent.futures.Future[T], fn: Callable[[T], R]) -> APIFuture[R]:
    """A future of ``fn(future.result())`` (errors pass through unchanged)."""
    request_type = future.request_type if isinstance(future, APIFuture) else None
    return combine([future], lambda values: fn(values[0]), request_type=request_type)


def then(
    future: concurrent.futures.Future[T],
    fn: Callable[[T], R | concurrent.futures.Future[R]],
    *,
    run: Callable[[Callable[[], Any]], concurrent.futures.Future[Any]] | None = None,
) -> APIFuture[R]:
    """A future of ``fn(future.result())``; when ``fn`` returns a future, of that one's outcome.

    The next step of a chain of requests: ``fn`` may send one and return its future. It runs on
    the thread that completes ``future``, or, for a step that blocks (a plain HTTP call), where
    ``run(call)`` runs it (an executor's ``submit``; ``run`` returns the future of ``call()``).
    Errors and cancellation pass through; cancelling the result cancels the step under way.
    """
    out: APIFuture[R] = APIFuture(
        request_type=future.request_type if isinstance(future, APIFuture) else None
    )
    out._sources = (future,)

    def settle(value: R | concurrent.futures.Future[R]) -> None:
        if isinstance(value, concurrent.futures.Future):
            out.forward_from(value)
        else:
            out.try_set_result(value)

    def on_done(done: concurrent.futures.Future[T]) -> None:
        if done.cancelled() or done.exception(0) is not None:
            # No result to map: the cancellation or the error passes through.
            out.forward_from(cast("concurrent.futures.Future[R]", done))
            return
        try:
            if run is None:
                settle(fn(done.result(0)))
            else:
                out.forward_from(flatten(run(functools.partial(fn, done.result(0)))))
        except BaseException as e:
            out.try_set_exception(e)

    future.add_done_callback(on_done)
    return out


def flatten(future: concurrent.futures.Future[concurrent.futures.Future[R]]) -> APIFuture[R]:
    """A future of the outcome of the future that ``future`` gives."""
    return then(future, _same)


def _same(value: T) -> T:
    return value
