"""The requests a connection has queued: what ``close()`` finishes, or names when it drops them
(docs/architecture.rst, "Closing and queued work").
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any

import attrs

from tinker_lite._errors import ClientClosedError
from tinker_lite._futures.future import APIFuture
from tinker_lite._logging import one_line
from tinker_lite._repr import tolerant_repr

__all__ = ["PROGRESS_LOG_INTERVAL", "PendingRegistry", "PendingRequest", "describe_requests"]

logger = logging.getLogger("tinker_lite.context")

PROGRESS_LOG_INTERVAL = 30.0
"""Seconds between the INFO lines of a drain that is still waiting."""
# After a request's own stall timeout (at most a second late, §6.6): it fails first.
_STALL_GRACE_S = 2.0

_QUEUED = "queued"
_SENT = "sent"
_DROPPED = "dropped"


@attrs.define(eq=False, repr=False)
class PendingRequest:
    """One queued request: its kind, ``seq_id`` (training requests), owner, future and state."""

    _registry: PendingRegistry
    kind: str
    future: Future[Any]
    owner: str
    seq_id: int | None
    _on_drop: Callable[[BaseException], object]
    state: str = _QUEUED

    @tolerant_repr
    def __repr__(self) -> str:
        return f"PendingRequest({self.label()!r}, state={self.state!r})"

    def label(self) -> str:
        """``forward_backward (seq_id 3)``, or the kind alone when it has no ``seq_id``."""
        return self.kind if self.seq_id is None else f"{self.kind} (seq_id {self.seq_id})"

    def claim(self) -> bool:
        """Take this request's turn to be sent (or failed); False when close dropped it."""
        with self._registry._cond:
            if self.state != _QUEUED:
                return False
            self.state = _SENT
            return True


class PendingRegistry:
    """The unfinished requests of one connection, in the order they were queued."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # Insertion-ordered; the request itself is the key (identity hash).
        self._items: dict[PendingRequest, None] = {}
        self._completed = 0
        self._cancelled: str | None = None  # why, once cancel() ran
        self._watching_failures = False
        self._failures: list[tuple[PendingRequest, BaseException]] = []

    def track(
        self,
        kind: str,
        future: Future[Any],
        *,
        owner: str = "",
        seq_id: int | None = None,
        on_drop: Callable[[BaseException], object],
    ) -> PendingRequest:
        """Register a queued request; ``on_drop(error)`` fails it if close drops it (at once,
        with a WARNING, after a cancel)."""
        request = PendingRequest(self, kind, future, owner=owner, seq_id=seq_id, on_drop=on_drop)
        with self._cond:
            self._items[request] = None
            why = self._cancelled
            if why is not None:
                request.state = _DROPPED
        future.add_done_callback(functools.partial(self._finished, request))
        if why is not None:
            logger.warning("%s: dropped %s (queued while closing).", why, request.label())
            request._on_drop(_dropped_error(request, why))
        return request

    def _finished(self, request: PendingRequest, done: Future[Any]) -> None:
        with self._cond:
            del self._items[request]  # tracked once, finished once
            self._completed += 1
            if self._watching_failures and not done.cancelled():
                error = done.exception(0)
                if error is not None and request.state != _DROPPED:
                    self._failures.append((request, error))
            self._cond.notify_all()

    def _unfinished_locked(self) -> list[PendingRequest]:
        return [r for r in self._items if not r.future.done()]

    def drain(
        self,
        *,
        stall_timeout: float,
        budget: float | None = None,
        what: str = "Closing",
    ) -> str | None:
        """Wait until every registered request has completed; ``None`` when they all did, else
        why it gave up (no progress within ``stall_timeout``, or past ``budget``).

        docs/architecture.rst, "Closing and queued work", tells what it logs.
        """
        with self._cond:
            waiting = self._unfinished_locked()
            self._watching_failures = True
        if not waiting:
            return None
        futures = [r.future for r in waiting if isinstance(r.future, APIFuture)]
        for future in futures:
            future._wait_begins()
        bound = f"up to {budget:g} s " if budget is not None else ""
        logger.info(
            "%s: waiting %sfor %s (%s).",
            what,
            bound,
            _count(len(waiting), "queued request"),
            describe_requests(waiting),
        )
        try:
            stopped = self._wait_all(len(waiting), stall_timeout, budget, what)
            with self._cond:
                failed = len(self._failures)
            if stopped is None and not failed:
                logger.info("%s: the %s completed.", what, _count(len(waiting), "queued request"))
            return stopped
        finally:
            for future in futures:
                future._wait_ends(expired=False)
            self._log_failures(what)

    def _wait_all(
        self,
        total: int,
        stall_timeout: float,
        budget: float | None,
        what: str,
    ) -> str | None:
        clock = time.monotonic
        start = last_progress = last_log = clock()
        give_up_after = stall_timeout + _STALL_GRACE_S
        with self._cond:
            completed = self._completed
            while True:
                waiting = self._unfinished_locked()
                if not waiting:
                    return None
                now = clock()
                if self._completed != completed:
                    completed, last_progress = self._completed, now
                if now - last_progress >= give_up_after:
                    return (
                        f"{what}: no queued request completed within the stall timeout "
                        f"({stall_timeout:g} s)"
                    )
                if budget is not None and now - start >= budget:
                    return f"{what}: gave up after {budget:g} s (the exit budget)"
                if now - last_log >= PROGRESS_LOG_INTERVAL:
                    last_log = now
                    logger.info(
                        "%s: still waiting for %d of %d queued requests after %.0f s (%s).",
                        what,
                        len(waiting),
                        total,
                        now - start,
                        describe_requests(waiting),
                    )
                wait = min(
                    give_up_after - (now - last_progress),
                    PROGRESS_LOG_INTERVAL - (now - last_log),
                    float("inf") if budget is None else budget - (now - start),
                )
                self._cond.wait(max(wait, 0.01))

    def _log_failures(self, what: str) -> None:
        with self._cond:
            failures, self._failures = self._failures, []
        if failures:
            listed = "; ".join(f"{r.label()}: {one_line(e, 200).rstrip('.')}" for r, e in failures)
            logger.warning(
                "%s: %s failed while closing: %s.",
                what,
                _count(len(failures), "queued request"),
                listed,
            )

    def cancel(self, why: str) -> list[PendingRequest]:
        """Drop (fail) every request not yet sent, with one WARNING naming them and those
        already sent; returns the dropped."""
        with self._cond:
            self._cancelled = why
            self._watching_failures = False
            waiting = self._unfinished_locked()
            dropped = [r for r in waiting if r.state == _QUEUED]
            for request in dropped:
                request.state = _DROPPED
            sent = [r for r in waiting if r.state == _SENT]
        if dropped or sent:
            parts = [f"{why}:"]
            if dropped:
                parts.append(
                    f"dropped {_count(len(dropped), 'queued request')} that "
                    f"{'was' if len(dropped) == 1 else 'were'} never sent "
                    f"({describe_requests(dropped)})."
                )
            if sent:
                parts.append(
                    f"Stopped waiting for {_count(len(sent), 'request')} already sent "
                    f"({describe_requests(sent)}); they may still complete on the service."
                )
            logger.warning(" ".join(parts))
        for request in dropped:
            try:
                request._on_drop(_dropped_error(request, why))
            except Exception:  # pragma: no cover - delivering an error never raises
                logger.debug("failing %s failed", request.label(), exc_info=True)
        return dropped


def describe_requests(requests: Iterable[PendingRequest]) -> str:
    """Name requests compactly, e.g.
    ``training run m1: forward_backward seq 1..20, save_state seq 21; 3 sample requests``."""
    by_owner: dict[str, dict[str, list[int]]] = {}
    counts: dict[str, int] = {}
    for request in requests:
        if request.seq_id is None:
            counts[request.kind] = counts.get(request.kind, 0) + 1
        else:
            kinds = by_owner.setdefault(request.owner, {})
            kinds.setdefault(request.kind, []).append(request.seq_id)
    parts: list[str] = []
    for owner, kinds in by_owner.items():
        ordered = sorted(kinds.items(), key=lambda item: min(item[1]))
        listed = ", ".join(f"{kind} seq {_ranges(ids)}" for kind, ids in ordered)
        parts.append(f"{owner}: {listed}" if owner else listed)
    parts.extend(_count(n, f"{kind} request") for kind, n in counts.items())
    return "; ".join(parts)


def _ranges(numbers: Sequence[int]) -> str:
    """``1..3,5,7..8`` for ``[1, 2, 3, 5, 7, 8]``."""
    runs = []
    for _, pairs in itertools.groupby(enumerate(sorted(set(numbers))), lambda p: p[1] - p[0]):
        run = [n for _, n in pairs]
        runs.append(str(run[0]) if len(run) == 1 else f"{run[0]}..{run[-1]}")
    return ",".join(runs)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _dropped_error(request: PendingRequest, why: str) -> ClientClosedError:
    return ClientClosedError(
        f"{request.label()} was not sent: the ServiceClient was closed ({why})."
    )
