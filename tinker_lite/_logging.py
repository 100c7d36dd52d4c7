"""``TINKER_LOG`` (read once, at import, as the official SDK does) and the warnings shown while
the application configures no logging; docs/cli.rst, "Logging", tells both.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping

__all__ = [
    "ENV_VAR",
    "LOG_FORMAT",
    "UnconfiguredWarningsHandler",
    "configured_level",
    "level_from_env",
    "one_line",
    "setup_logging",
    "warn_once",
]

ENV_VAR = "TINKER_LOG"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO}

_warned: set[object] = set()
_warned_lock = threading.Lock()

configured_level: int | None = None  # what setup_logging applied (None: left alone)


class UnconfiguredWarningsHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Show WARNING and above on stderr while the root logger has no handler of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(logging.WARNING)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        self.stream = sys.stderr  # the stderr of the moment (tests and daemons replace it)
        super().emit(record)


def level_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """The level ``TINKER_LOG`` asks for (``debug`` or ``info``, any case), else ``None``."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return _LEVELS.get(value.strip().lower())


def setup_logging(environ: Mapping[str, str] | None = None) -> int | None:
    """Apply ``TINKER_LOG``; return the level set, or ``None`` when it asks for nothing."""
    global configured_level
    level = level_from_env(environ)
    if level is None:
        return None
    logging.basicConfig(format=LOG_FORMAT)  # a no-op when the application set up logging
    logging.getLogger("tinker_lite").setLevel(level)
    if level == logging.DEBUG:
        logging.getLogger("urllib3").setLevel(logging.DEBUG)
    configured_level = level
    return level


def warn_once(logger: logging.Logger, key: object, message: str, *args: object) -> None:
    """Log ``message`` as a WARNING the first time this process sees ``key``."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message, *args)


def one_line(error: BaseException, limit: int | None = None) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters with ``...``."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."
