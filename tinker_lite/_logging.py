"""``TINKER_LOG``: tinker_lite's log level from the environment, as the official SDK reads it.

Quiet by default, but never silent about trouble: without ``TINKER_LOG`` only WARNING and ERROR
records are shown, on stderr, and only while the application has configured no logging of its
own (like Python's last-resort handler, which a library's ``NullHandler`` would hide): a retry
the caller cannot see (docs/protocol.rst §6.6) or queued work dropped at exit is never
invisible. With ``TINKER_LOG=info`` or ``TINKER_LOG=debug`` the ``tinker_lite`` logger (and, for
``debug``, urllib3's connection log) is set to that level and, when the application has not
configured logging itself, a stderr handler is added to the root logger (``logging.basicConfig``).
It is applied once, when ``tinker_lite`` is imported; the API key never appears in a record.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

__all__ = [
    "ENV_VAR",
    "LOG_FORMAT",
    "UnconfiguredWarningsHandler",
    "configured_level",
    "level_from_env",
    "setup_logging",
]

ENV_VAR = "TINKER_LOG"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO}

configured_level: int | None = None
"""The level :func:`setup_logging` applied from ``TINKER_LOG`` (``None``: left alone)."""


class UnconfiguredWarningsHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Show WARNING and above on stderr while the root logger has no handler of its own.

    Once the application (or ``TINKER_LOG``) configures logging, records reach its handlers
    through propagation and this handler stays quiet, so nothing is printed twice.
    """

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
