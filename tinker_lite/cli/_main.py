"""The ``tinker-lite`` parser and entry point: run one command, print one line on failure."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from tinker_lite import _logging
from tinker_lite._errors import APIConnectionError, APITimeoutError
from tinker_lite.cli import auth, billing, check, checkpoint, local, model, run, session
from tinker_lite.cli._context import DEFAULT_STARTUP_TIMEOUT_S, STARTUP_TIMEOUT_ENV, Context
from tinker_lite.cli._exit import (
    EXIT_CODES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    error_message,
    exit_code_for,
)
from tinker_lite.cli._output import Output
from tinker_lite.cli._parser import Parser, common_options

__all__ = ["build_parser", "main"]

_EPILOG = "exit codes:\n" + "\n".join(
    f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES.items()
)
_EPILOG += f"""

environment:
  TINKER_API_KEY          API key (never printed; `auth status` says where the key comes from)
  TINKER_CREDENTIAL_CMD   command printing a fresh credential (services with token exchange)
  ~/.tinker/credentials.json
                          the stored login (`auth login`), used when neither of the above is set
  TINKER_BASE_URL         service URL (default: the hosted service; local:// = in-process server)
  TINKER_LOG=debug|info   log to stderr at that level (debug: tracebacks too)
  TINKER_LITE_PROGRESS=0  no progress bar or progress lines
  TINKER_LITE_JOURNAL     append one JSON line per completed operation to this file
  {STARTUP_TIMEOUT_ENV}
                          seconds to retry a refused connection, DNS or TLS failure before the
                          service has answered once (default {DEFAULT_STARTUP_TIMEOUT_S:.0f})

examples:
  tinker-lite check
  tinker-lite auth login
  tinker-lite run list --format json
  tinker-lite --base-url local:// checkpoint list --all
  tinker-lite checkpoint prune --keep-last 3 --dry-run
"""


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of ``tinker-lite`` (used by :func:`main` and the docs)."""
    common = common_options()
    parser = Parser(
        prog=PROG,
        description="Inspect and manage Tinker training runs, checkpoints and sessions,\n"
        "run the offline local server, and check the configuration.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    check.register(commands, common)
    auth.register(commands, common)
    run.register(commands, common)
    checkpoint.register(commands, common)
    session.register(commands, common)
    model.register(commands, common)
    billing.register(commands, common)
    local.register(commands)
    return parser


def _debug_requested(args: argparse.Namespace | None) -> bool:
    if args is not None and getattr(args, "debug", False):
        return True
    return os.environ.get(_logging.ENV_VAR, "").strip().lower() == "debug"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tinker-lite`` with ``argv`` (default: the process arguments); return the exit code."""
    stdout, stderr = sys.stdout, sys.stderr
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(list(argv) if argv is not None else None)
        if getattr(args, "handler", None) is local.cmd_local_serve:
            args.server_args = extras
        elif extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    debug = _debug_requested(args)
    output = Output(getattr(args, "format", "table"), stdout, stderr)
    handler: Callable[[Context], int] = args.handler
    with _debug_logging(stderr, enabled=debug):
        ctx: Context | None = None
        try:
            ctx = Context(args, output)
            try:
                return handler(ctx)
            finally:
                ctx.close()
        except KeyboardInterrupt:
            stderr.write(f"{PROG}: interrupted\n")
            return EXIT_INTERRUPTED
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly.
            return EXIT_OK
        except Exception as exc:
            if debug:
                traceback.print_exception(exc, file=stderr)
            message = error_message(exc)
            if ctx is not None and _before_first_answer(ctx, exc):
                message += (
                    f" Nothing answered within the start-up budget of {ctx.startup_timeout:g} s "
                    f"(--startup-timeout or {STARTUP_TIMEOUT_ENV} to wait longer)."
                )
            stderr.write(f"{PROG}: error: {message}\n")
            return exit_code_for(exc)


def _before_first_answer(ctx: Context, exc: BaseException) -> bool:
    """Whether ``exc`` is a connection failure of a command the service never answered."""
    return (
        isinstance(exc, APIConnectionError)
        and not isinstance(exc, APITimeoutError)
        and not ctx.answered
        and "start-up budget" not in str(exc)  # the library's own error already says it
    )


@contextlib.contextmanager
def _debug_logging(stream: TextIO, *, enabled: bool) -> Iterator[None]:
    """Send tinker_lite's debug log to ``stream`` while a command runs (``--debug``).

    When ``TINKER_LOG`` already set logging up, only the level changes (no second handler).
    """
    if not enabled:
        yield
        return
    package_logger = logging.getLogger("tinker_lite")
    handler: logging.Handler | None = None
    if _logging.configured_level is None:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter(_logging.LOG_FORMAT))
        package_logger.addHandler(handler)
    previous = package_logger.level
    package_logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        if handler is not None:
            package_logger.removeHandler(handler)
        package_logger.setLevel(previous)
