"""The local server's store of asynchronous results (what ``retrieve_future`` answers from).

Every submit creates a :class:`FutureEntry` and returns its request id at once; a worker thread
completes it later and wakes the long-polls waiting on it. Completed results are kept for
``result_ttl`` seconds of the server clock, then forgotten, after which a poll gets 410
(docs/service.rst §8: "410 for unknown or expired ids").
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tinker_lite._errors import TinkerError
from tinker_lite.local.refusals import CheckpointError

__all__ = ["FutureEntry", "FutureStore", "failure_of"]

log = logging.getLogger("tinker_lite.local")


def failure_of(exc: BaseException) -> tuple[str, str]:
    """The stored failure of a job that raised: (message, category).

    Bad input (ValueError, CheckpointError, TinkerError) fails as category "user"; anything
    else is logged and fails as "server".
    """
    if isinstance(exc, CheckpointError | TinkerError | ValueError):
        return str(exc), "user"
    log.exception("local server: request failed with an internal error")
    return f"Internal error in the local server: {type(exc).__name__}: {exc}", "server"


class FutureEntry:
    """One asynchronous request: its state, its result and when it became ready."""

    __slots__ = (
        "_cache",
        "cancelled",
        "category",
        "created_perf",
        "done",
        "error",
        "event",
        "ready_perf",
        "ready_wall",
        "request_id",
        "result",
        "waiting_reason",
    )

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.created_perf = time.perf_counter()
        self.event = threading.Event()
        self.done = False
        self.cancelled = False
        self.result: Any = None
        self.error: str | None = None
        self.category: str | None = None
        self.ready_perf: float | None = None
        self.ready_wall: float | None = None
        self.waiting_reason: Callable[[], str | None] | None = None
        self._cache: dict[str, bytes] = {}

    def encoded(self, fmt: str, encode: Callable[[], bytes]) -> bytes:
        """The result encoded as ``fmt`` (computed once, then cached)."""
        cached = self._cache.get(fmt)
        if cached is None:
            cached = encode()
            self._cache[fmt] = cached
        return cached


class FutureStore:
    """Thread-safe map of request id -> entry, with expiry of completed results."""

    def __init__(self, result_ttl: float, clock: Callable[[], float]) -> None:
        self.result_ttl = result_ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, FutureEntry] = {}
        self._completed: collections.deque[tuple[float, str]] = collections.deque()
        self.completed_count = 0

    def create(self) -> FutureEntry:
        """Register a new pending request and return it."""
        entry = FutureEntry(f"req-{uuid.uuid4().hex}")
        with self._lock:
            self._purge()
            self._entries[entry.request_id] = entry
        return entry

    def _purge(self) -> None:
        now = self._clock()
        while self._completed and self._completed[0][0] + self.result_ttl <= now:
            _, request_id = self._completed.popleft()
            self._entries.pop(request_id, None)

    def get(self, request_id: str) -> FutureEntry | None:
        """The entry, or None when unknown, expired or forgotten."""
        with self._lock:
            self._purge()
            return self._entries.get(request_id)

    def forget(self, request_id: str) -> bool:
        """Drop an entry at once (fault injection: "410 for a future"); True if it existed."""
        with self._lock:
            return self._entries.pop(request_id, None) is not None

    def _finish(self, entry: FutureEntry) -> None:
        entry.ready_perf = time.perf_counter()
        entry.ready_wall = time.time()
        entry.done = True
        with self._lock:
            self._completed.append((self._clock(), entry.request_id))
            self.completed_count += 1
        entry.event.set()

    def complete(self, entry: FutureEntry, result: Any) -> None:
        """Store the result and wake every poll waiting on it."""
        entry.result = result
        self._finish(entry)

    def fail(self, entry: FutureEntry, error: str, category: str) -> None:
        """Store a failure (``category`` user / server / unknown) and wake the polls."""
        entry.error = error
        entry.category = category
        self._finish(entry)

    def fail_from(self, entry: FutureEntry, exc: BaseException) -> str:
        """Fail ``entry`` with an exception raised by its job; return the message stored."""
        error, category = failure_of(exc)
        self.fail(entry, error, category)
        return error

    def restore(self, done: list[tuple[float, str, Any, str | None, str | None]]) -> None:
        """Put back results kept by a previous server: ``(done_at, request_id, result, error,
        category)`` each; those older than ``result_ttl`` are left out."""
        now = self._clock()
        with self._lock:
            for done_at, request_id, result, error, category in sorted(done, key=lambda d: d[0]):
                if done_at + self.result_ttl <= now:
                    continue
                entry = FutureEntry(request_id)
                entry.result, entry.error, entry.category = result, error, category
                entry.ready_perf = entry.created_perf
                entry.ready_wall = done_at
                entry.done = True
                entry.event.set()
                self._entries[request_id] = entry
                self._completed.append((done_at, request_id))

    def pending(self) -> list[FutureEntry]:
        """Entries not yet completed."""
        with self._lock:
            return [e for e in self._entries.values() if not e.done]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def wake_all(self) -> None:
        """Release every waiting poll (server shutdown)."""
        for entry in self.pending():
            entry.cancelled = True
            entry.event.set()
