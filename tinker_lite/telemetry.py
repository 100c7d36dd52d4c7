"""Telemetry: usage and error events queued in memory and sent in batches by one daemon thread
(docs/protocol.rst §9); it never sends credentials, headers or request bodies."""

from __future__ import annotations

import collections
import datetime as _dt
import itertools
import logging
import math
import os
import platform
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import (
    APIStatusError,
    ClientClosedError,
    InvalidInputError,
    RequestErrorCategory,
    RequestFailedError,
    TinkerError,
)
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.http import redact

__all__ = [
    "PROCESS_UUID",
    "TELEMETRY_ENV",
    "Telemetry",
    "is_telemetry_enabled",
    "is_user_error",
]

logger = logging.getLogger("tinker_lite.telemetry")

TELEMETRY_ENV = "TINKER_TELEMETRY"

# docs/protocol.rst §3.1: one uuid4 per process, sent with every batch.
PROCESS_UUID = str(uuid.uuid4())

_ON_VALUES = frozenset({"1", "true", "yes", "on"})
_MAX_TEXT = 4000
_BATCH_SIZE = 100


def is_telemetry_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``TINKER_TELEMETRY`` allows telemetry (default on; docs/protocol.rst §9)."""
    env = os.environ if environ is None else environ
    return env.get(TELEMETRY_ENV, "1").strip().lower() in _ON_VALUES


def is_user_error(exc: BaseException) -> bool:
    """Whether an error, or one in its ``__cause__`` / ``__context__`` chain, is the caller's fault
    (docs/protocol.rst §9)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RequestFailedError):
            return current.category is RequestErrorCategory.USER
        if isinstance(current, InvalidInputError):
            return True
        status = getattr(current, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
            return True
        current = current.__cause__ or current.__context__
    return False


def _utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _clean(value: Any, depth: int = 0) -> Any:
    """Make ``event_data`` JSON-safe and credential-free."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return redact(value[:_MAX_TEXT])
    if depth < 4 and isinstance(value, Mapping):
        return {str(k): _clean(v, depth + 1) for k, v in value.items() if v is not None}
    if depth < 4 and isinstance(value, (list, tuple)):
        return [_clean(v, depth + 1) for v in value[:100]]
    return redact(str(value)[:_MAX_TEXT])


class Telemetry:
    """Queues telemetry events and sends them from one background thread; ``send(body)`` posts one
    encoded batch (without it nothing is recorded)."""

    def __init__(
        self,
        send: Callable[[bytes], None] | None,
        *,
        session_id: str | None,
        sdk_version: str,
        enabled: bool | None = None,
        flush_interval: float = 10.0,
        max_queue: int = 10_000,
        fatal_flush_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], _dt.datetime] = _utc_now,
    ) -> None:
        self.enabled = (is_telemetry_enabled() if enabled is None else enabled) and (
            send is not None
        )
        self._send_batch = send
        self._session_id = session_id or f"sessionless-{uuid.uuid4()}"
        self._has_session = session_id is not None
        self._sdk_version = sdk_version
        self._flush_interval = flush_interval
        self._max_queue = max_queue
        self._fatal_flush_timeout = fatal_flush_timeout
        self._stopping = threading.Event()
        self._clock = clock
        self._now = now
        self._cond = threading.Condition()
        self._queue: collections.deque[Any] = collections.deque()
        self._enqueued = 0
        self._processed = 0
        self._flush_requested = False
        self._indexes = itertools.count()  # next() on it is atomic
        self._started_at = clock()
        self._dropped_logged = False
        self._failure_logged = False
        self._gone = False
        self._session_ended = False
        self._thread: threading.Thread | None = None
        if self.enabled:
            self._thread = threading.Thread(
                target=self._run, name="tinker-lite-telemetry", daemon=True
            )
            self._thread.start()

    @tolerant_repr
    def __repr__(self) -> str:
        return f"Telemetry(enabled={self.enabled}, session_id={self._session_id!r})"

    def _common(self) -> dict[str, Any]:
        return {
            "event_id": str(uuid.uuid4()),
            "event_session_index": next(self._indexes),
            "timestamp": self._now(),
        }

    def _enqueue(self, event: Any) -> None:
        with self._cond:
            if self._stopping.is_set() and (self._thread is None or not self._thread.is_alive()):
                return
            if len(self._queue) >= self._max_queue:
                if not self._dropped_logged:
                    self._dropped_logged = True
                    logger.warning("Telemetry queue full, dropping events")
                return
            self._queue.append(event)
            self._enqueued += 1

    def session_start(self) -> None:
        """Queue the ``SESSION_START`` event (only for a real session)."""
        if not self.enabled or not self._has_session:
            return
        self._enqueue(types.SessionStartEvent(**self._common()))

    def session_end(self) -> None:
        """Queue the ``SESSION_END`` event with the session's duration (once)."""
        if not self.enabled or not self._has_session:
            return
        with self._cond:
            if self._session_ended:
                return
            self._session_ended = True
        duration = _dt.timedelta(seconds=max(0.0, self._clock() - self._started_at))
        self._enqueue(types.SessionEndEvent(duration=str(duration), **self._common()))

    def log_event(
        self,
        name: str,
        data: Mapping[str, Any] | None = None,
        *,
        severity: types.Severity = "INFO",
    ) -> None:
        """Queue a ``GENERIC_EVENT`` named ``name`` with JSON-safe ``data``."""
        if not self.enabled:
            return
        event_data = _clean(dict(data or {}))
        self._enqueue(
            types.GenericEvent(
                event_name=name, event_data=event_data, severity=severity, **self._common()
            )
        )

    def log_exception(self, exc: BaseException, *, fatal: bool = False) -> None:
        """Record an error (a user error as a ``user_error`` GENERIC_EVENT, others as
        ``UNHANDLED_EXCEPTION``); a fatal one is sent at once (docs/protocol.rst §9)."""
        if not self.enabled:
            return
        message = redact(str(exc))[:_MAX_TEXT]
        if is_user_error(exc):
            data: dict[str, Any] = {"error_type": type(exc).__name__}
            if message:
                data["message"] = message
            status = getattr(exc, "status_code", None)
            # A refusal before sending has no status of the service's to report.
            if isinstance(status, int) and not isinstance(exc, InvalidInputError):
                data["status_code"] = status
            if isinstance(exc, APIStatusError) and exc.body:
                data["body"] = exc.body
            self.log_event("user_error", data, severity="WARNING")
        else:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self._enqueue(
                types.UnhandledExceptionEvent(
                    error_message=message,
                    error_type=type(exc).__name__,
                    traceback=redact(text)[-_MAX_TEXT * 4 :] if exc.__traceback__ else None,
                    **self._common(),
                )
            )
        if fatal:
            self.flush(timeout=self._fatal_flush_timeout)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Send everything queued so far; wait at most ``timeout`` s. True if all was handled."""
        if self._thread is None:  # disabled
            return True
        with self._cond:
            if not self._thread.is_alive():
                return self._processed >= self._enqueued
            target = self._enqueued
            if self._processed >= target:
                return True
            self._flush_requested = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._processed >= target, timeout=timeout)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(
                        lambda: self._flush_requested or self._stopping.is_set(),
                        timeout=self._flush_interval,
                    )
                    self._flush_requested = False
                    events = list(self._queue)
                    self._queue.clear()
                    stopping = self._stopping.is_set()
                for start in range(0, len(events), _BATCH_SIZE):
                    batch = events[start : start + _BATCH_SIZE]
                    self._send(batch)
                    with self._cond:
                        self._processed += len(batch)
                        self._cond.notify_all()
                if stopping:
                    with self._cond:
                        if not self._queue:
                            return
        except Exception:  # pragma: no cover - never let telemetry take a thread down loudly
            logger.debug("Telemetry thread stopped on an error", exc_info=True)
        finally:
            with self._cond:
                # Whatever was not sent is dropped: waiters must not wait for it.
                self._processed = self._enqueued
                self._queue.clear()
                self._cond.notify_all()

    def _send(self, events: list[Any]) -> None:
        assert self._send_batch is not None
        request = types.TelemetrySendRequest(
            events=events,
            platform=platform.system() or "Unknown",
            sdk_version=self._sdk_version,
            session_id=self._session_id,
            process_uuid=PROCESS_UUID,
        )
        if self._gone:
            return  # the service did not answer while the client was closing: never re-sent
        try:
            self._send_batch(_wire.dumps(request))
        except TinkerError as e:
            # docs/protocol.rst §6.8: shutdown is quiet; a closed client's telemetry is just
            # dropped.
            quiet = isinstance(e, ClientClosedError) or self._stopping.is_set()
            if quiet:
                self._gone = True
            if quiet or self._failure_logged:
                logger.debug("Telemetry batch of %d events dropped: %s", len(events), e)
            else:
                self._failure_logged = True
                logger.warning(
                    "Failed to send telemetry batch (%d events): %s", len(events), redact(str(e))
                )

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (waiting at most ``timeout`` s) and stop the thread. Idempotent."""
        with self._cond:
            self._stopping.set()
            self._cond.notify_all()
        self.join(timeout)

    def abandon(self) -> None:
        """Drop what is queued and stop the thread, sending nothing (an unclosed client is gone)."""
        with self._cond:
            self._gone = True
            self._queue.clear()
            self._processed = self._enqueued
            self._stopping.set()
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the thread to end after :meth:`close`; True if it ended."""
        thread = self._thread
        if thread is None:
            return True
        if thread is not threading.current_thread():
            thread.join(timeout)
        return not thread.is_alive()
