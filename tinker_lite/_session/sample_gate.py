"""The in-flight cap and the 429 back-off window shared by every sampler of one service and key.

docs/protocol.rst §6.4: one :class:`SampleGate` per ``(base_url, api_key)`` in the process.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Callable

from tinker_lite._errors import InvalidInputError
from tinker_lite._repr import tolerant_repr

__all__ = ["THROTTLE_WARNING_INTERVAL_S", "SampleGate", "sample_gate_for"]

logger = logging.getLogger("tinker_lite.sample_gate")

THROTTLE_WARNING_INTERVAL_S = 60.0  # docs/protocol.rst §6.6


class SampleGate:
    """The in-flight cap and the 429 back-off window of one ``(base_url, api_key)``."""

    def __init__(self, limit: int = 400, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self.set_limit(limit)  # self.limit: the most sample requests in flight at once
        self.in_flight = 0  # sample requests holding a place now
        self._backoff_until = 0.0
        self._throttled_since: float | None = None
        self._last_throttle_warning: float | None = None

    @tolerant_repr
    def __repr__(self) -> str:
        return f"SampleGate(limit={self.limit}, in_flight={self.in_flight})"

    def set_limit(self, limit: int) -> None:
        """Change the cap (e.g. from the service's ``sample_max_concurrent_requests``)."""
        if limit < 1:
            raise InvalidInputError("limit", f"must be >= 1, got {limit}")
        with self._cond:
            self.limit = limit
            self._cond.notify_all()

    def acquire(self, timeout: float | None = None) -> bool:
        """Take an in-flight place, waiting up to ``timeout`` s (``None``: until one frees)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.in_flight < self.limit, timeout=timeout):
                return False
            self.in_flight += 1
            return True

    def release(self) -> None:
        """Give back a place taken with :meth:`acquire`."""
        with self._cond:
            self.in_flight = max(0, self.in_flight - 1)
            self._cond.notify()

    def hold(self, seconds: float) -> None:
        """After a 429: no sampler sends for ``seconds`` (the window is opened or extended)."""
        now = self._clock()
        with self._cond:
            self._backoff_until = max(self._backoff_until, now + seconds)
            if self._throttled_since is None:
                self._throttled_since = now
            warn = now - self._throttled_since >= THROTTLE_WARNING_INTERVAL_S and (
                self._last_throttle_warning is None
                or now - self._last_throttle_warning >= THROTTLE_WARNING_INTERVAL_S
            )
            if warn:
                self._last_throttle_warning = now
                throttled_for = now - self._throttled_since
        if warn:
            logger.warning(
                "Sampling has been held back by the service (HTTP 429) for %.0f s; "
                "%d sample requests in flight. Waiting and re-sending.",
                throttled_for,
                self.in_flight,
            )

    def note_accepted(self) -> None:
        """Record that the service accepted a sample request: any 429 episode is over."""
        with self._cond:
            self._throttled_since = None
            self._last_throttle_warning = None

    def backoff_remaining(self) -> float:
        """Seconds left in the back-off window (0 when sampling may proceed)."""
        return max(0.0, self._backoff_until - self._clock())


_GATES: weakref.WeakValueDictionary[tuple[str, str], SampleGate] = weakref.WeakValueDictionary()
_GATES_LOCK = threading.Lock()


def sample_gate_for(base_url: str, api_key: str | None, *, limit: int = 400) -> SampleGate:
    """The process-wide :class:`SampleGate` of ``(base_url, api_key)`` (created on first use)."""
    digest = hashlib.sha256((api_key or "").encode("utf-8")).hexdigest()
    key = (base_url.rstrip("/"), digest)
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = SampleGate(limit)
            _GATES[key] = gate
        return gate
