"""A progress bar (or periodic lines) on stderr for fan-outs and downloads.

docs/configuration.rst, "Progress", says when it shows and how to turn it off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Literal, TextIO, TypeVar

from tinker_lite._environment import resolve

__all__ = ["Progress", "ProgressMode", "gather", "progress_mode"]

ProgressMode = Literal["bar", "lines", "off"]

T = TypeVar("T")

ENV_VAR = "TINKER_LITE_PROGRESS"
_BAR_WIDTH = 30


def progress_mode(
    stream: TextIO,
    *,
    non_tty: ProgressMode = "off",
    environ: Mapping[str, str] | None = None,
) -> ProgressMode:
    """A bar on a terminal, else ``non_tty``; ``TINKER_LITE_PROGRESS`` forces it off or on."""
    setting = resolve(ENV_VAR, None, "", os.environ if environ is None else environ)
    if setting is False:
        return "off"
    try:
        if stream.isatty():
            return "bar"
    except (AttributeError, ValueError, OSError):
        pass
    return "lines" if setting else non_tty


def format_bytes(n: float) -> str:
    """Format a byte count for people: ``512 B``, ``1.5 KiB``, ``3.2 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024.0 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024.0
    raise AssertionError("unreachable")  # pragma: no cover


class Progress:
    """Report the progress of ``total`` items or bytes on a stream (thread-safe updates).

    ``"lines"`` mode writes a plain line at most every ``interval_s`` seconds and at close.
    """

    def __init__(
        self,
        total: int | None = None,
        *,
        desc: str = "",
        unit: Literal["items", "bytes"] = "items",
        stream: TextIO | None = None,
        mode: ProgressMode | None = None,
        interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.count = 0
        self._stream: TextIO = stream if stream is not None else sys.stderr
        self.mode: ProgressMode = mode if mode is not None else progress_mode(self._stream)
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._started = clock()
        self._last_report: float | None = None
        self._last_width = 0
        self._closed = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def set_total(self, total: int | None) -> None:
        """Set or change the expected total (e.g. once a download's size is known)."""
        with self._lock:
            self.total = total

    def reset(self, count: int = 0) -> None:
        """Set the count back (e.g. when a download restarts from the beginning)."""
        with self._lock:
            self.count = count
            self._render(force=False)

    def update(self, n: int = 1) -> None:
        """Add ``n`` completed units and redraw when it is time to."""
        with self._lock:
            self.count += n
            self._render(force=False)

    def close(self) -> None:
        """Write the final state and end the line; later calls do nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.mode == "off":
                return
            self._render(force=True)
            if self.mode == "bar":
                self._write("\n")

    def _amount(self, n: float) -> str:
        return format_bytes(n) if self.unit == "bytes" else str(int(n))

    def describe(self) -> str:
        """The current state as one line of text, without a bar."""
        label = f"{self.desc}: " if self.desc else ""
        elapsed = max(self._clock() - self._started, 0.0)
        if self.total:
            pct = min(self.count / self.total, 1.0) * 100.0
            text = f"{label}{self._amount(self.count)}/{self._amount(self.total)} ({pct:.0f}%)"
        else:
            text = f"{label}{self._amount(self.count)}"
        if self.unit == "bytes" and elapsed > 0:
            text += f" {format_bytes(self.count / elapsed)}/s"
        return text

    def _render(self, *, force: bool) -> None:
        if self.mode == "off" or (self._closed and not force):
            return
        now = self._clock()
        if self.mode == "lines":
            due = self._last_report is None or now - self._last_report >= self._interval_s
            if force or due:
                self._last_report = now
                self._write(self.describe() + "\n")
            return
        # A terminal: redraw at most ten times a second, and always at the end.
        if not force and self._last_report is not None and now - self._last_report < 0.1:
            return
        self._last_report = now
        if self.total:
            filled = int(_BAR_WIDTH * min(self.count / self.total, 1.0))
            bar = "[" + "#" * filled + "-" * (_BAR_WIDTH - filled) + "] "
        else:
            bar = ""
        line = bar + self.describe()
        padding = " " * max(self._last_width - len(line), 0)
        self._last_width = len(line)
        self._write("\r" + line + padding)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            # A closed or broken stream must never fail the work being reported on.
            self.mode = "off"


def gather(
    futures: Iterable[Future[T]],
    *,
    desc: str = "",
    progress: Progress | None = None,
    timeout: float | None = None,
) -> list[T]:
    """Wait for every future (``timeout`` each) and return their results in order, counting them.

    The first failure is raised once all are done.
    """
    items = list(futures)
    owned = progress is None
    reporter = progress if progress is not None else Progress(len(items), desc=desc)
    if not owned and reporter.total is None:
        reporter.set_total(len(items))
    try:
        for future in items:
            future.add_done_callback(lambda _f: reporter.update(1))
        results: list[T] = []
        first_error: BaseException | None = None
        for future in items:
            try:
                results.append(future.result(timeout))
            except Exception as exc:
                if first_error is None:
                    first_error = exc
        if first_error is not None:
            raise first_error
        return results
    finally:
        if owned:
            reporter.close()
