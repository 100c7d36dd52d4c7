"""One ``retrieve_futures`` long-poll per sampling session serving all of its samples.

docs/protocol.rst §5.5 gives the rules; docs/architecture.rst, "The poller", the threading.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import APIConnectionError, APITimeoutError
from tinker_lite._futures.future import APIFuture
from tinker_lite._futures.poller import Poller
from tinker_lite._futures.tasks import IDLE_TIMEOUT, join_all, pace, poll_wait
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import ClientClosedError, Timeout, redact
from tinker_lite._transport.loops import retry_loop
from tinker_lite._transport.retry import DEFAULT_RETRY_POLICY, StallWatch

__all__ = [
    "ACK_POLL_TIMEOUT",
    "LONG_POLL_TIMEOUT",
    "BatchPoller",
]

logger = logging.getLogger("tinker_lite.futures")

T = TypeVar("T")

# golden-0.38: a long poll waits 45 s, an acknowledgement only 5 s.
LONG_POLL_TIMEOUT = Timeout(connect=5.0, read=45.0)
ACK_POLL_TIMEOUT = Timeout(connect=5.0, read=5.0)
DEFAULT_FETCH_THREADS = 16  # results are ready when fetched: a few threads serve any fan-out

Target = tuple[str, int]


@attrs.define(eq=False)
class _Session:
    """The long-poll loop of one (sampling session, cloned sampler), and what waits on it."""

    target: Target
    # The loop's state between polls (reset when a thread starts it).
    stall: StallWatch
    failures: int = 0
    fast_answers: int = 0  # empty answers in a row that did not hold the poll
    pause: float = 0.0
    cursor: int = 0
    # request id -> (the sample's future, its fetch)
    waiters: dict[str, tuple[APIFuture[Any], Callable[[], object]]] = attrs.Factory(dict)
    early: set[str] = attrs.Factory(set)  # completions seen before their waiter registered
    retrieved: set[str] = attrs.Factory(set)
    fallback: str | None = None  # why this session polls per request now
    thread: threading.Thread | None = None

    def has_work(self) -> bool:  # under the owner's condition
        return bool(self.waiters or self.retrieved)


class BatchPoller:
    """Awaits sample completions with ``retrieve_futures``; ``fetcher`` (closed by its owner)
    fetches each finished result, and polls per request after a fall-back."""

    def __init__(
        self,
        send: Callable[[types.FuturesRetrieveRequest, Timeout], HttpResponse],
        fetcher: Poller,
        *,
        stall_timeout: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._send = send
        self.fetcher = fetcher
        self._stall_timeout = stall_timeout
        self._clock = clock
        self._cond = threading.Condition()
        self._closing = threading.Event()
        self._sessions: dict[Target, _Session] = {}
        self._turns = retry_loop(
            wait=poll_wait(DEFAULT_RETRY_POLICY, rand),
            stop=lambda state: self._closing.is_set(),
            retry_on=lambda error: isinstance(error, APIConnectionError),
            retry_result=lambda answer: answer is _AGAIN,
            sleep=self._sleep,
        )

    @tolerant_repr
    def __repr__(self) -> str:
        return f"BatchPoller(sessions={len(self._sessions)}, closed={self._closing.is_set()})"

    @property
    def thread_count(self) -> int:
        """Long-poll threads alive now."""
        with self._cond:
            return sum(
                1 for s in self._sessions.values() if s.thread is not None and s.thread.is_alive()
            )

    def wait(
        self,
        sampling_session_id: str,
        cloned_sampler_id: int,
        future: APIFuture[T],
        fetch: Callable[[], object],
    ) -> None:
        """Call ``fetch()`` once ``future.request_id`` completes (at once if it already has)."""
        request_id = future.request_id
        assert request_id is not None  # the sample's job sets it before it waits
        target = (sampling_session_id, cloned_sampler_id)
        with self._cond:
            if self._closing.is_set():
                future.try_set_exception(
                    ClientClosedError(f"The client is closed; cannot wait for {request_id}.")
                )
                return
            session = self._sessions.get(target)
            if session is None:
                stall = StallWatch(self._stall_timeout, self._clock)
                session = self._sessions[target] = _Session(target, stall)
            now = session.fallback is not None or request_id in session.early
            if now:
                session.early.discard(request_id)
            else:
                session.waiters[request_id] = (future, fetch)
                future._cancel_hook = lambda: self._forget(session, request_id)
                self._ensure_thread_locked(session)
                self._cond.notify_all()
        if now:
            fetch()

    def mark_retrieved(self, sampling_session_id: str, cloned_sampler_id: int, rid: str) -> None:
        """Report ``rid``'s result as fetched on the session's next poll."""
        with self._cond:
            session = self._sessions.get((sampling_session_id, cloned_sampler_id))
            if session is None or session.fallback is not None or self._closing.is_set():
                return
            session.retrieved.add(rid)
            self._ensure_thread_locked(session)
            self._cond.notify_all()

    def _forget(self, session: _Session, request_id: str) -> None:
        with self._cond:
            session.waiters.pop(request_id, None)

    def _ensure_thread_locked(self, session: _Session) -> None:
        if session.thread is not None:
            return
        clone = session.target[1]
        thread = threading.Thread(
            target=self._loop,
            args=(session,),
            name=f"tinker-lite-futures-{clone}",
            daemon=True,
        )
        session.thread = thread
        try:
            thread.start()
        except RuntimeError as e:
            session.thread = None
            self._fall_back_locked(session, f"no thread could be started ({e})")

    def _loop(self, session: _Session) -> None:
        """The session's long-poll loop; its waits are :class:`ServiceWait`'s (§5.2)."""
        session.stall = StallWatch(self._stall_timeout, self._clock)
        session.failures = session.fast_answers = 0
        session.pause = 0.0
        try:
            self._turns(self._turn, session)
        except APIConnectionError:  # the poller is closing
            return
        except BaseException as e:  # pragma: no cover - §6.6: a dying thread resolves all
            with self._cond:
                session.thread = None
                self._fall_back_locked(session, f"its thread died ({type(e).__name__}: {e})")
            raise

    def _turn(self, session: _Session) -> object:
        """Wait for work, then poll once: :data:`_AGAIN` to go on, or :data:`_DONE`."""
        stall = session.stall
        with self._cond:
            while not session.has_work() and not self._closing.is_set():
                if not self._cond.wait(IDLE_TIMEOUT) and not session.has_work():
                    session.thread = None
                    return _DONE
            if self._closing.is_set():
                return _DONE
            if not session.waiters:
                stall.answered()  # an acknowledgement alone never stalls anyone
            retrieved = sorted(session.retrieved)
            ack_only = not session.waiters
            cursor = session.cursor
        sent_at = self._clock()
        outcome = self._poll_once(session, cursor, retrieved, ack_only)
        if isinstance(outcome, types.FuturesRetrieveResponse):
            session.failures = 0
            stall.answered()
            self._deliver(session, outcome, retrieved)
            if outcome.completions or ack_only:
                session.fast_answers = 0
                session.pause = 0.0
            else:  # a service that does not hold the long poll must not be polled in a loop
                pace(session, DEFAULT_RETRY_POLICY, self._clock() - sent_at)
            return _AGAIN
        if isinstance(outcome, str):  # not retryable: poll per request from now on
            with self._cond:
                self._fall_back_locked(session, outcome)
                session.thread = None
            return _DONE
        session.failures += 1
        if stall.expired():
            self._fail_waiters(session, stall, outcome)
        raise outcome

    def _sleep(self, seconds: float) -> None:
        self._closing.wait(seconds)

    def _poll_once(
        self, session: _Session, cursor: int, retrieved: list[str], ack_only: bool
    ) -> types.FuturesRetrieveResponse | str | BaseException:
        """One retrieve_futures: the answer, a reason to fall back (str) or a retryable error."""
        sid, clone = session.target
        request = types.FuturesRetrieveRequest(
            target=types.SamplingSessionFuturesTarget(
                sampling_session_id=sid, cloned_sampler_id=clone
            ),
            prev_cursor=cursor,
            timeout=0.0 if ack_only else None,
            retrieved_request_ids=retrieved,
        )
        timeout = ACK_POLL_TIMEOUT if ack_only else LONG_POLL_TIMEOUT
        try:
            resp = self._send(request, timeout)
        except APIConnectionError as e:  # ClientClosedError too: the loop sees the closing
            return e
        return _read_answer(resp)

    def _deliver(
        self, session: _Session, answer: types.FuturesRetrieveResponse, acked: list[str]
    ) -> None:
        ready: list[Callable[[], object]] = []
        with self._cond:
            session.retrieved.difference_update(acked)
            session.cursor = max(session.cursor, answer.cursor)
            for completion in answer.completions:
                waiter = session.waiters.pop(completion.request_id, None)
                if waiter is None:
                    session.early.add(completion.request_id)
                else:
                    ready.append(waiter[1])
        for fetch in ready:
            fetch()

    def _fail_waiters(self, session: _Session, stall: StallWatch, last: BaseException) -> None:
        with self._cond:
            waiters = list(session.waiters.items())
            session.waiters.clear()
        for request_id, (future, _) in waiters:
            error = APITimeoutError(
                f"No answer from the service for {stall.silent_for():.0f}s while waiting for "
                f"request {request_id} (Sample) with retrieve_futures (stall timeout "
                f"{stall.stall_timeout:g}s; last problem: {redact(str(last))}).",
                request_id=request_id,
                elapsed=stall.silent_for(),
            )
            error.__cause__ = last
            future.try_set_exception(error)
        stall.answered()

    def _fall_back_locked(self, session: _Session, why: str) -> None:
        if session.fallback is None:
            logger.warning(
                "retrieve_futures failed for sampling session %s (%s); polling each sample "
                "with retrieve_future instead",
                session.target[0],
                redact(why),
            )
        session.fallback = why
        waiters = list(session.waiters.values())
        session.waiters.clear()
        session.retrieved.clear()
        session.early.clear()
        # A fetch is a per-request poll: it waits for the result when it is not ready yet.
        for _, fetch in waiters:
            fetch()

    def close(self, timeout: float = 5.0) -> None:
        """Fail every waiting sample, stop the loops and join their threads (idempotent)."""
        with self._cond:
            self._closing.set()
            sessions = list(self._sessions.values())
            waiters = [w for s in sessions for w in s.waiters.values()]
            for session in sessions:
                session.waiters.clear()
            threads = [s.thread for s in sessions if s.thread is not None]
            self._cond.notify_all()
        for future, _ in waiters:
            future.try_set_exception(
                ClientClosedError(
                    f"The client was closed before request {future.request_id} completed."
                )
            )
        join_all(threads, timeout, warn=False)


_AGAIN = object()  # a turn's answer: poll again (after its pause)
_DONE = object()  # a turn's answer: the loop is over


def _read_answer(resp: HttpResponse) -> types.FuturesRetrieveResponse | str | BaseException:
    status = resp.status
    if 200 <= status < 300:
        try:
            return _wire.structure(resp.json(), types.FuturesRetrieveResponse)
        except Exception as e:
            return f"unreadable answer ({type(e).__name__}: {e})"
    if status in (408, 429) or status >= 500:
        return APIConnectionError(f"retrieve_futures answered HTTP {status}")
    return f"HTTP {status}: {resp.text(300)}"
