"""Exit codes of ``tinker-lite``, which error maps to which, and the one line printed for it."""

from __future__ import annotations

import concurrent.futures
import sys
from typing import TypeGuard

from tinker_lite._errors import (
    APIConnectionError,
    APIResponseValidationError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    RequestErrorCategory,
    RequestFailedError,
    TinkerError,
    UnprocessableEntityError,
    WireFormatError,
    describe_error,
)

__all__ = [
    "EXIT_AUTH",
    "EXIT_CODES",
    "EXIT_CONFLICT",
    "EXIT_CONNECTION",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_SERVICE",
    "EXIT_USAGE",
    "PROG",
    "CLIError",
    "error_message",
    "exit_code_for",
]

PROG = "tinker-lite"

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_CONNECTION = 6
EXIT_SERVICE = 7
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_ERROR: "unexpected error",
    EXIT_USAGE: "usage error (bad arguments or a request the service rejected as invalid)",
    EXIT_AUTH: "authentication or permission error (missing or rejected API key)",
    EXIT_NOT_FOUND: "not found (run, checkpoint, session, model; no identity for auth whoami)",
    EXIT_CONFLICT: "conflict (already public/private, file exists)",
    EXIT_CONNECTION: "connection error or timeout",
    EXIT_SERVICE: "service error (5xx, failed request, unexpected response)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}
"""Exit codes of ``tinker-lite`` and what they mean."""


class CLIError(Exception):
    """An expected failure of a command: a one-line message and an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def exit_code_for(exc: BaseException) -> int:
    """Map an exception to the exit code ``tinker-lite`` (and scripts built like it) uses.

    See :data:`EXIT_CODES`. Scripts and cron jobs can reuse it to exit consistently.
    """
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, CLIError):
        return exc.exit_code
    if isinstance(exc, AuthenticationError | PermissionDeniedError):
        return EXIT_AUTH
    if isinstance(exc, InvalidInputError) and exc.field in ("api_key", "TINKER_API_KEY"):
        return EXIT_AUTH  # no usable API key: an authentication problem, not a bad argument
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, ConflictError):
        return EXIT_CONFLICT
    if isinstance(exc, BadRequestError | UnprocessableEntityError | InvalidInputError):
        return EXIT_USAGE
    if isinstance(exc, APIConnectionError | TimeoutError | concurrent.futures.TimeoutError):
        return EXIT_CONNECTION
    if isinstance(exc, RequestFailedError):
        return EXIT_USAGE if exc.category == RequestErrorCategory.USER else EXIT_SERVICE
    if isinstance(exc, APIStatusError | APIResponseValidationError | WireFormatError):
        return EXIT_SERVICE
    if isinstance(exc, FileExistsError):
        return EXIT_CONFLICT
    if isinstance(exc, FileNotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, PermissionError):
        return EXIT_AUTH
    if _is_download_error(exc):
        return EXIT_SERVICE
    return EXIT_ERROR


def _is_missing_key(exc: BaseException) -> TypeGuard[InvalidInputError]:
    return (
        isinstance(exc, InvalidInputError)
        and exc.field == "api_key"
        and exc.problem.startswith("no API key")
    )


def _is_download_error(exc: BaseException) -> bool:
    module = sys.modules.get("tinker_lite._transport.download")
    return module is not None and isinstance(exc, module.DownloadError)


def error_message(exc: BaseException) -> str:
    """The text after ``tinker-lite: error:`` for ``exc``: what failed, where, what to try.

    tinker_lite's errors render through :func:`tinker_lite._errors.describe_error` (the same
    sentence a script sees); anything unexpected says so and points at ``--debug``.
    """
    if isinstance(exc, CLIError):
        return exc.message
    if _is_missing_key(exc):
        # In a shell the key comes from the environment: no api_key= argument to pass.
        return f"{exc.problem}: set TINKER_API_KEY (export TINKER_API_KEY=...) and run it again."
    if isinstance(exc, TinkerError | OSError):
        return describe_error(exc)
    text = " ".join(str(exc).split())
    if isinstance(exc, TimeoutError | concurrent.futures.TimeoutError):
        return f"timed out{': ' + text if text else ''}; raise --timeout to wait longer."
    return f"unexpected {type(exc).__name__}: {text or '-'} (rerun with --debug for a traceback)"
