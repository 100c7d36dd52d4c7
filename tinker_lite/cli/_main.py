"""The ``tinker-lite`` parser and entry point: run one command, print one line on failure."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from tinker_lite import _logging
from tinker_lite._errors import _STATUS_HINTS, APIConnectionError, APITimeoutError, NotFoundError
from tinker_lite.cli import auth, billing, check, checkpoint, local, model, run, session
from tinker_lite.cli._context import (
    DEFAULT_STARTUP_TIMEOUT_S,
    LOCAL_URL,
    STARTUP_TIMEOUT_ENV,
    Context,
)
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

__all__ = ["LONG_RETRY_S", "build_parser", "main"]

LONG_RETRY_S = 10.0
"""A retry announced at WARNING is shown only when it may wait this long (or with --debug):
a shorter one ends in the command's own error line, which says the same."""

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
    for group in commands.choices.values():
        _gather_examples(group)
    return parser


def _gather_examples(group: argparse.ArgumentParser) -> None:
    """End a command group's --help with the first example of each of its commands."""
    if group.epilog:
        return
    firsts: list[str] = []
    for action in group._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                lines = (sub.epilog or "").split("examples:\n", 1)[-1].splitlines()
                firsts.extend(line for line in lines[:1] if line.strip())
    if firsts:
        group.epilog = "examples:\n" + "\n".join(firsts)
        group.formatter_class = argparse.RawDescriptionHelpFormatter


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
    # TINKER_LOG=info or debug asks for the log: every retry is shown then.
    quiet = not debug and _logging.configured_level is None
    with _debug_logging(stderr, enabled=debug), _quiet_short_retries(enabled=quiet):
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
            if ctx is not None and isinstance(exc, NotFoundError):
                message = _not_found_message(ctx, message)
            if ctx is not None and _before_first_answer(ctx, exc):
                message += (
                    f" Nothing answered within the start-up budget of {ctx.startup_timeout:g} s "
                    f"(--startup-timeout or {STARTUP_TIMEOUT_ENV} to wait longer)."
                )
            stderr.write(f"{PROG}: error: {message}\n")
            return exit_code_for(exc)


def _not_found_message(ctx: Context, message: str) -> str:
    """A 404's message, its hint replaced when the base URL itself is wrong (health is 404 too).

    A base URL with a stray path (``http://host:8000/v1``) makes every request 404; "check the
    id" would send the user after the wrong thing.
    """
    from tinker_lite.cli.check import health_status, not_a_tinker_url

    base_url = ctx.service_url()[0]
    if base_url.startswith(LOCAL_URL):
        return message
    status = health_status(base_url, timeout=ctx.timeout, connect_timeout=ctx.startup_timeout)
    if status != 404:
        return message
    advice = not_a_tinker_url(base_url)
    text = message.removesuffix(_STATUS_HINTS[404]).rstrip(". ")
    return f"{text}. {advice[:1].upper()}{advice[1:]}."


class _ShortRetryFilter(logging.Filter):
    """Drops retry WARNINGs whose wait is short: the command's error line will say it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not hasattr(record, "retry_delay_s"):
            return True
        until = getattr(record, "retry_until_s", None)
        longest = max(float(record.retry_delay_s), math.inf if until is None else float(until))
        return longest >= LONG_RETRY_S


@contextlib.contextmanager
def _quiet_short_retries(*, enabled: bool) -> Iterator[None]:
    """While a command runs, show a retry WARNING only when its wait is long (see above)."""
    if not enabled:
        yield
        return
    retry_logger = logging.getLogger("tinker_lite.retry")
    quiet = _ShortRetryFilter()
    retry_logger.addFilter(quiet)
    try:
        yield
    finally:
        retry_logger.removeFilter(quiet)


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
