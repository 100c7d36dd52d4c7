"""The run journal: one JSON line per completed operation, for audits and resumable jobs.

docs/configuration.rst, "The run journal", gives its keys and how lines are written.
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tinker_lite._logging import one_line, warn_once
from tinker_lite._repr import tolerant_repr

__all__ = [
    "ENV_VAR",
    "JOURNAL_KEYS",
    "JOURNAL_OPTIONAL_KEYS",
    "Journal",
    "SeqOrder",
]

ENV_VAR = "TINKER_LITE_JOURNAL"
JOURNAL_KEYS: tuple[str, ...] = (
    "ts",
    "kind",
    "status",
    "request_id",
    "seq_id",
    "duration_s",
    "tokens",
)
JOURNAL_OPTIONAL_KEYS: tuple[str, ...] = ("model_id", "error")  # written after, when they apply

_logger = logging.getLogger("tinker_lite")


class Journal:
    """Append one JSON line per completed operation to ``path``; a failed write warns once."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._monotonic = monotonic
        self._lock = threading.Lock()

    @tolerant_repr
    def __repr__(self) -> str:
        return f"Journal({str(self.path)!r})"

    def record(  # noqa: PLR0917 - the clients' hook takes these six positionally
        self,
        kind: str,
        request_id: str | None,
        seq_id: int | None,
        duration_s: float,
        tokens: int | None,
        status: str,
        *,
        model_id: str | None = None,
        error: str | None = None,
    ) -> None:
        """Append one line for a completed operation (see the module docs for the keys)."""
        moment = _dt.datetime.fromtimestamp(self._clock(), tz=_dt.timezone.utc)
        entry: dict[str, Any] = {
            "ts": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "kind": kind,
            "status": status,
            "request_id": request_id,
            "seq_id": None if seq_id is None else int(seq_id),
            "duration_s": round(float(duration_s), 6),
            "tokens": None if tokens is None else int(tokens),
        }
        if model_id is not None:
            entry["model_id"] = model_id
        if error is not None:
            entry["error"] = error
        line = json.dumps(entry, separators=(", ", ": "), allow_nan=False) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode("utf-8"))
                finally:
                    os.close(fd)
            except OSError as exc:
                message = "cannot write the journal %s: %s"
                warn_once(_logger, ("journal", str(self.path)), message, self.path, exc)

    def watch(
        self,
        future: concurrent.futures.Future[Any],
        kind: str,
        *,
        seq_id: int | None = None,
        tokens: int | Callable[[Any], int | None] | None = None,
        model_id: str | None = None,
        started: float | None = None,
        defer: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        """Record ``future``'s outcome when it completes; ``defer`` takes the write (SeqOrder).

        ``started`` is a ``time.monotonic()`` reading; ``tokens`` a count or a function of the
        result.
        """
        begin = self._monotonic() if started is None else started

        def on_done(done: Any) -> None:
            duration = max(self._monotonic() - begin, 0.0)
            rid = getattr(done, "request_id", None)
            count: int | None = tokens if isinstance(tokens, int) or tokens is None else None
            error: str | None = None
            if done.cancelled():
                status = "cancelled"
            else:
                exc = done.exception()
                if exc is not None:
                    status, error = "error", one_line(exc)
                else:
                    status = "ok"
                    if callable(tokens):
                        try:
                            count = tokens(done.result())
                        except Exception:
                            count = None

            def write() -> None:
                self.record(
                    kind,
                    rid if isinstance(rid, str) else None,
                    seq_id,
                    duration,
                    count,
                    status,
                    model_id=model_id,
                    error=error,
                )

            if defer is None:
                write()
            else:
                defer(write)

        future.add_done_callback(on_done)


class SeqOrder:
    """Releases journal writes in sequence-number order (``first``, ``first + 1``, ...).

    Results are polled in parallel, so they complete out of order; every number must get exactly
    one write, or later lines wait for it.
    """

    def __init__(self, first: int = 1) -> None:
        self._next = first
        self._waiting: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()

    def slot(self, number: int) -> Callable[[Callable[[], None]], None]:
        """The ``defer`` hook of the write numbered ``number``."""

        def release(write: Callable[[], None]) -> None:
            with self._lock:
                self._waiting[number] = write
                # Written under the lock: two threads releasing at once keep the order.
                while self._next in self._waiting:
                    pending = self._waiting.pop(self._next)
                    self._next += 1
                    try:
                        pending()
                    except Exception:  # pragma: no cover - record() never raises
                        _logger.warning("a journal write failed", exc_info=True)

        return release

    @property
    def waiting(self) -> int:
        """Writes held back until an earlier number completes."""
        with self._lock:
            return len(self._waiting)
