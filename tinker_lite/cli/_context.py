"""What a command runs with: its arguments, its output, and the client (created on first use)."""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tinker_lite._errors import APIConnectionError, APIError, InvalidInputError
from tinker_lite.cli._client import open_rest_client
from tinker_lite.cli._output import Output

if TYPE_CHECKING:
    from tinker_lite import types
    from tinker_lite.rest_client import RestClient

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_STARTUP_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "LOCAL_URL",
    "STARTUP_TIMEOUT_ENV",
    "Context",
    "parse_path",
]

DEFAULT_BASE_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_STARTUP_TIMEOUT_S = 5.0
STARTUP_TIMEOUT_ENV = "TINKER_LITE_STARTUP_TIMEOUT"
LOCAL_URL = "local://"
# Extra wait for a future whose retries are bounded by --timeout (see Context.wait).
_WAIT_GRACE_S = 1.0

T = TypeVar("T")


class Context:
    """Parsed arguments, output, and the client a command needs (created on first use)."""

    def __init__(self, args: argparse.Namespace, output: Output) -> None:
        self.args = args
        self.output = output
        self.timeout: float = float(getattr(args, "timeout", None) or DEFAULT_TIMEOUT_S)
        self.startup_timeout: float = startup_timeout(args)
        self.answered = False
        """Whether the service has answered a request of this command."""
        self._rest: RestClient | None = None

    @property
    def base_url(self) -> str | None:
        """``--base-url``, else ``TINKER_BASE_URL`` (left to the client), else the default."""
        value = getattr(self.args, "base_url", None)
        return str(value) if value else None

    def service_url(self) -> tuple[str, str]:
        """The service URL and where it came from (``--base-url``, ``TINKER_BASE_URL``, default)."""
        if self.base_url is not None:
            return self.base_url, "--base-url"
        if os.environ.get("TINKER_BASE_URL"):
            return os.environ["TINKER_BASE_URL"], "TINKER_BASE_URL"
        return DEFAULT_BASE_URL, "default"

    def rest(self) -> RestClient:
        """The command's RestClient: no session, no heartbeat (closed when the command ends)."""
        if self._rest is None:
            self._rest = open_rest_client(
                self.base_url, startup_timeout=self.startup_timeout, stall_timeout=self.timeout
            )
        return self._rest

    def wait(self, future: concurrent.futures.Future[T]) -> T:
        """Wait for an API future with the command's timeout.

        The request's retries end within the timeout; the short grace lets its own error
        (e.g. connection refused) arrive rather than a bare "timed out waiting".
        """
        return self.call(lambda: future.result(timeout=self.page_timeout))

    @property
    def page_timeout(self) -> float:
        """How long to wait for one request (or one page of a listing that pages through all).

        Until the service has answered once, the first request also starts the connection
        (client config), which the start-up budget bounds.
        """
        startup = 0.0 if self.answered else self.startup_timeout
        return startup + self.timeout + _WAIT_GRACE_S

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (a wait on the service); note whether the service answered it."""
        try:
            result = fn()
        except (APIConnectionError, InvalidInputError):
            raise
        except APIError:
            self._note_answer()
            raise
        self._note_answer()
        return result

    def _note_answer(self) -> None:
        self.answered = True

    def close(self) -> None:
        """Close the client."""
        rest, self._rest = self._rest, None
        if rest is not None:
            rest.close()


def startup_timeout(args: argparse.Namespace) -> float:
    """``--startup-timeout``, else ``TINKER_LITE_STARTUP_TIMEOUT``, else 5 s."""
    value = getattr(args, "startup_timeout", None)
    if value is not None:
        return float(value)
    text = os.environ.get(STARTUP_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_STARTUP_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidInputError(
            STARTUP_TIMEOUT_ENV, f"must be a positive number of seconds, got {text!r}", "e.g. 10"
        )
    return seconds


def parse_path(path: str) -> types.ParsedCheckpointTinkerPath:
    """Parse a ``tinker://`` checkpoint path (InvalidInputError naming the problem)."""
    from tinker_lite.types import ParsedCheckpointTinkerPath

    return ParsedCheckpointTinkerPath.from_tinker_path(path)
