"""The sampling completion log behind ``retrieve_futures`` (the 0.38 session long-poll).

A client with ``sample_use_retrieve_futures`` waits for its samples through one long-poll per
(sampling session, cloned sampler) instead of one poll per request: each answer lists the
requests that finished or failed after the client's cursor, and the client then fetches each
payload with ``retrieve_future``. ``cloned_sampler_id`` is ``seq_id // 1_000_000_000``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["CLONE_STRIDE", "CompletionLog", "Target"]

# A cloned SamplingClient numbers its samples from client_counter * CLONE_STRIDE.
CLONE_STRIDE = 1_000_000_000

Target = tuple[str, int]


class CompletionLog:
    """Completions per target, each under an increasing cursor; long-polls wait for new ones."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._cond = threading.Condition()
        self._cursor = 0
        self._events: dict[Target, list[tuple[int, dict[str, Any]]]] = {}
        self._clock = clock

    @staticmethod
    def target_of(sampling_session_id: str | None, seq_id: int | None) -> Target | None:
        """The (session, clone) a sample request reports to; None without a session seq_id."""
        if sampling_session_id is None or seq_id is None:
            return None
        return sampling_session_id, seq_id // CLONE_STRIDE

    def record(self, target: Target, request_id: str, failed: bool) -> None:
        """Log one request's completion and wake the long-polls of its target."""
        event: dict[str, Any] = {"request_id": request_id}
        event["state"] = "failed" if failed else "finished"
        with self._cond:
            self._cursor += 1
            self._events.setdefault(target, []).append((self._cursor, event))
            self._cond.notify_all()

    def poll(self, target: Target, prev_cursor: int, wait_s: float) -> dict[str, Any]:
        """Completions after ``prev_cursor`` (waiting up to ``wait_s`` for one) and the new cursor.

        Events at or before ``prev_cursor`` were seen by the client and are dropped.
        """
        deadline = self._clock() + max(0.0, wait_s)
        with self._cond:
            while True:
                events = self._events.get(target, [])
                kept = [(c, e) for c, e in events if c > prev_cursor]
                if len(kept) != len(events):
                    self._events[target] = kept
                remaining = deadline - self._clock()
                if kept or remaining <= 0:
                    break
                self._cond.wait(remaining)
            cursor = max([prev_cursor, *(c for c, _ in kept)])
            return {"completions": [dict(e) for _, e in kept], "cursor": cursor}
