"""The session heartbeat, every 10 s on its own thread (docs/protocol.rst §8.4).

It warns after two minutes of failures and stops at HTTP 410 (the session expired).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tinker_lite._errors import ClientClosedError, TinkerError
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import redact

__all__ = ["HEARTBEAT_INTERVAL", "Heartbeat"]

logger = logging.getLogger("tinker_lite.session")

HEARTBEAT_INTERVAL = 10.0
HEARTBEAT_WARN_AFTER = 120.0


class Heartbeat:
    """Calls ``beat()`` (one heartbeat; its answer, whatever the status) every ``interval`` s."""

    def __init__(
        self,
        beat: Callable[[], HttpResponse],
        session_id: str,
        *,
        interval: float = HEARTBEAT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self._send_beat = beat
        self._session_id = session_id
        self._interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._wait = wait if wait is not None else self._stop.wait
        self.expired = False
        self.thread = threading.Thread(target=self._run, name="tinker-lite-heartbeat", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def _run(self) -> None:
        last_success = self._clock()
        next_due = last_success + self._interval
        while True:
            if self._wait(max(0.0, next_due - self._clock())) or self._stop.is_set():
                return
            problem = self._beat()
            if problem is None:
                last_success = self._clock()
            elif problem == "expired":
                return
            else:
                failing_for = self._clock() - last_success
                if failing_for > HEARTBEAT_WARN_AFTER:
                    logger.warning(
                        "Session heartbeat failed for %.0f seconds for session %s. Last exception:"
                        " %s.\nYour connection may be unreliable or Tinker is down. If this "
                        "persists, the session will be terminated.",
                        failing_for,
                        self._session_id,
                        problem,
                    )
            # Fixed-rate schedule: a slow heartbeat does not shift the following ones.
            next_due = max(next_due + self._interval, self._clock())

    def _beat(self) -> str | None:
        try:
            resp = self._send_beat()
        except ClientClosedError:
            self._stop.set()
            return "expired"
        except TinkerError as e:
            return f"{type(e).__name__}: {redact(str(e))}"
        if 200 <= resp.status < 300:
            return None
        if resp.status == 410:
            self.expired = True
            logger.warning(
                "Session %s has expired on the service (HTTP 410); heartbeats stopped. "
                "Create a new ServiceClient to continue.",
                self._session_id,
            )
            return "expired"
        return f"HTTP {resp.status}"
