"""Argument parsing shared by every command group: options, number types, leaf commands."""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from tinker_lite.cli._context import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    STARTUP_TIMEOUT_ENV,
    Context,
)
from tinker_lite.cli._exit import EXIT_USAGE, PROG

__all__ = [
    "Handler",
    "Parser",
    "add_group",
    "add_paging",
    "common_options",
    "leaf",
    "non_negative_int",
    "positive_int",
]

Handler = Callable[[Context], int]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors say ``tinker-lite: error: ...`` and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}\n")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def common_options() -> argparse.ArgumentParser:
    """The options every command takes, before or after the command's name."""
    # SUPPRESS defaults let the options appear before or after the subcommand.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-f",
        "--format",
        choices=("table", "json"),
        default=argparse.SUPPRESS,
        help="output format (default: table)",
    )
    common.add_argument(
        "--base-url",
        default=argparse.SUPPRESS,
        metavar="URL",
        help="service URL (default: $TINKER_BASE_URL or the hosted service; local:// for an "
        "in-process server)",
    )
    common.add_argument(
        "--timeout",
        type=_seconds,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help="how long to wait for each service answer, retries included "
        f"(default: {DEFAULT_TIMEOUT_S:.0f})",
    )
    common.add_argument(
        "--startup-timeout",
        type=_seconds,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help="how long to retry a refused connection, DNS or TLS failure before the service "
        f"has answered once (default: ${STARTUP_TIMEOUT_ENV} or "
        f"{DEFAULT_STARTUP_TIMEOUT_S:.0f})",
    )
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="debug logging, and a traceback on errors",
    )
    return common


def leaf(
    group: Any,
    name: str,
    handler: Handler,
    help_text: str,
    *,
    common: argparse.ArgumentParser,
    examples: Sequence[str] = (),
) -> argparse.ArgumentParser:
    """Add command ``name`` to ``group``; ``examples`` are shown at the end of its --help."""
    epilog = None
    if examples:
        epilog = "examples:\n" + "\n".join(f"  {textwrap.dedent(line)}" for line in examples)
    sub: argparse.ArgumentParser = group.add_parser(
        name,
        help=help_text,
        description=help_text[:1].upper() + help_text[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    sub.set_defaults(handler=handler)
    return sub


def add_group(commands: Any, name: str, help_text: str, description: str) -> Any:
    """Add a command group (``run``, ``checkpoint``, ...); return its subcommand collection."""
    group = commands.add_parser(name, help=help_text, description=description)
    subcommands = group.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=Parser)
    subcommands.required = True
    return subcommands


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def add_paging(sub: argparse.ArgumentParser, *, default_limit: int, every: str = "") -> None:
    """Add ``--limit`` and ``--offset`` to a list command (and ``--all`` when ``every`` names
    what it lists; then ``--limit 0`` means ``--all``, as in the official CLI)."""
    sub.add_argument(
        "--limit",
        type=non_negative_int if every else positive_int,
        default=default_limit,
        help=f"page size (default: {default_limit}{'; 0: every ' + every if every else ''})",
    )
    sub.add_argument("--offset", type=non_negative_int, default=0, help="page start")
    if every:
        sub.add_argument(
            "--all", action="store_true", help=f"list every {every} (pages through all)"
        )
