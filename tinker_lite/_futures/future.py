"""Futures of asynchronous requests (:class:`APIFuture`, docs/api.rst "Futures"), and how to
combine them.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

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


@functools.cache
def _result_field_names() -> frozenset[str]:
    """Public attribute names of the result types (``*Response``, ``*Output``)."""
    from tinker_lite import types

    kinds = [getattr(types, n) for n in types.__all__ if n.endswith(("Response", "Output"))]
    classes = [cls for cls in kinds if isinstance(cls, type)]
    return frozenset(n for cls in classes for n in dir(cls) if not n.startswith("_"))


class APIFuture(concurrent.futures.Future[T]):
    """The eventual result of an asynchronous request: a :class:`concurrent.futures.Future`."""

    __slots__ = (
        "_cancel_hook",
        "_cancel_notified",
        "_clock",
        "_demand_hook",
        "_queue_state",
        "_request_id",
        "_sources",
        "_started",
        "_waiting",
        "request_type",
    )
    _done_callbacks: list[Callable[[concurrent.futures.Future[Any]], object]]

    def __init__(
        self,
        request_id: str | None = None,
        *,
        request_type: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        # A list for the deque the Condition preallocates (0.6 KiB): a fan-out holds thousands
        # of futures, few of them ever waited on while pending. Condition only appends,
        # removes and reads the first.
        self._condition._waiters = []  # type: ignore[attr-defined]
        self._request_id = request_id
        self.request_type = request_type
        self._clock = clock
        self._started = clock()
        self._queue_state: str | None = None
        self._sources: tuple[concurrent.futures.Future[Any], ...] = ()
        self._cancel_hook: Callable[[], None] | None = None
        self._cancel_notified = False
        # The poller's: told True when a wait begins, False when the last one expired (§6.6).
        self._demand_hook: Callable[[bool], None] | None = None
        self._waiting = 0

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

    def result(self, timeout: float | None = None) -> T:
        """Return the result, waiting up to ``timeout`` seconds (``None``: until resolved).

        Raises the request's error, :class:`FutureTimeoutError` or ``CancelledError``.
        """
        return self._wait(super().result, timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Return the request's error (``None`` on success), waiting up to ``timeout`` seconds."""
        return self._wait(super().exception, timeout)

    def _wait(self, get: Callable[[float | None], R], timeout: float | None) -> R:
        self._wait_begins()
        expired = False
        try:
            return get(timeout)
        except concurrent.futures.TimeoutError as e:
            if self.done() and not self.cancelled() and super().exception(0) is e:
                raise  # the request's own error (a TimeoutError)
            expired = True
            raise self._timeout_error(timeout) from None
        finally:
            self._wait_ends(expired=expired)

    async def result_async(self, timeout: float | None = None) -> T:
        """Await the result, up to ``timeout`` seconds; an expired timeout raises as ``result``
        does and leaves the request running (docs/architecture.rst, "The threading contract")."""
        import asyncio

        waiter = asyncio.wrap_future(self)
        if timeout is None:
            return await waiter
        try:
            # shield: an expired wait must not cancel the request (result() does not either).
            return await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except asyncio.TimeoutError:
            # Nobody awaits the abandoned waiter: retrieve its outcome so none is reported lost.
            waiter.add_done_callback(_retrieve)
            return self.result(timeout=0)

    async def coroutine(self) -> T:
        """This future as a coroutine, for APIs that need one (``asyncio.create_task``)."""
        return await self.result_async()

    def __await__(self) -> Generator[Any, None, T]:
        return self.result_async().__await__()

    def future(self) -> concurrent.futures.Future[T]:
        """The :class:`concurrent.futures.Future` of this operation: this future itself."""
        return self

    def cancel(self) -> bool:
        """Stop polling (and cancel the sources); ``False`` once completed or completing.

        The service may still execute the request: there is no cancel endpoint.
        """
        if not super().cancel():
            return False
        with self._condition:
            first, self._cancel_notified = not self._cancel_notified, True
        if not first:
            return True  # a concurrent cancel() did the rest
        # As an executor does for a cancelled work item: wait() and as_completed() now count it.
        self.set_running_or_notify_cancel()
        hook = self._cancel_hook
        if hook is not None:
            hook()
        for source in self._sources:
            source.cancel()
        self._let_go()
        return True

    def set_result(self, result: T) -> None:
        super().set_result(result)
        self._let_go()

    def set_exception(self, exception: BaseException | None) -> None:
        super().set_exception(exception)
        self._let_go()

    def _let_go(self) -> None:
        """Drop the callbacks and hooks once run: they would keep a done future's polling state."""
        self._cancel_hook = None
        self._demand_hook = None
        self._done_callbacks.clear()

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

    def try_set_result(self, value: T) -> bool:
        """Deliver ``value`` unless already done or cancelled (no ``InvalidStateError``)."""
        if not self._start_delivery():
            return False
        self.set_result(value)
        return True

    def try_set_exception(self, exc: BaseException) -> bool:
        """Deliver the error ``exc`` unless already done; whether it was."""
        if not self._start_delivery():
            return False
        self.set_exception(exc)
        return True

    def _start_delivery(self) -> bool:
        """Move a pending future to running, as an executor's worker does; False if it was not."""
        with self._condition:
            if self.running() or self.done():
                return False
            return self.set_running_or_notify_cancel()

    def forward_from(self, source: concurrent.futures.Future[T]) -> None:
        """Complete this future with ``source``'s outcome; until then its ``request_id``,
        ``queue_state`` and waits are ``source``'s, and cancelling it cancels ``source``."""
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
        state = self._state_text()
        return (
            f"<APIFuture request_id={self.request_id!r} type={self.request_type!r} state={state}>"
        )

    def _state_text(self, *, outcome: bool = False) -> str:
        """``pending``, ``cancelled``, ``failed`` or ``done``; with ``outcome``, what it holds."""
        if self.cancelled():
            return "cancelled"
        if not self.done():
            return "pending"
        error = super().exception(0)
        if error is not None:
            return f"failed: {error!r}" if outcome else "failed"
        return repr(super().result(0)) if outcome else "done"

    if not TYPE_CHECKING:  # a __getattr__ would hide every misspelt attribute from mypy

        def __getattr__(self, name: str) -> Any:
            # A result's field read on the future itself is told to call .result() first.
            message = f"'{type(self).__name__}' object has no attribute {name!r}"
            if not name.startswith("_") and name in _result_field_names():
                message += (
                    f"; it is the future of a result: call .result() first (.result().{name})"
                )
            raise AttributeError(message, name=name, obj=self)

    def _wait_begins(self) -> None:
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
    """A future of ``fn([f.result() for f in futures])``, failing with the first failure.

    ``fn`` runs on the thread that completes the last source.
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
    request_type = getattr(future, "request_type", None)
    return combine([future], lambda values: fn(values[0]), request_type=request_type)


def then(
    future: concurrent.futures.Future[T],
    fn: Callable[[T], R | concurrent.futures.Future[R]],
    *,
    run: Callable[[Callable[[], Any]], concurrent.futures.Future[Any]] | None = None,
) -> APIFuture[R]:
    """A future of ``fn(future.result())``, or of the outcome of the future ``fn`` returns.

    ``fn`` runs on the thread that completes ``future``, or in ``run`` (an executor's
    ``submit``) for a step that blocks. Errors and cancellation pass through.
    """
    out: APIFuture[R] = APIFuture(request_type=getattr(future, "request_type", None))
    out._sources = (future,)

    def on_done(done: concurrent.futures.Future[T]) -> None:
        if done.cancelled() or done.exception(0) is not None:
            out.forward_from(cast("concurrent.futures.Future[R]", done))
            return
        try:
            if run is not None:
                out.forward_from(flatten(run(functools.partial(fn, done.result(0)))))
            elif isinstance(value := fn(done.result(0)), concurrent.futures.Future):
                out.forward_from(value)
            else:
                out.try_set_result(value)
        except BaseException as e:
            out.try_set_exception(e)

    future.add_done_callback(on_done)
    return out


def flatten(future: concurrent.futures.Future[concurrent.futures.Future[R]]) -> APIFuture[R]:
    """A future of the outcome of the future that ``future`` gives."""
    return then(future, lambda inner: inner)


def _retrieve(waiter: Any) -> None:
    if not waiter.cancelled():
        waiter.exception()
