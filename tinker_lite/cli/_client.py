"""The client ``tinker-lite`` talks through: a standalone RestClient with the CLI's bounds.

Two bounds keep a command from sitting silent: the start-up budget (``--startup-timeout``,
``TINKER_LITE_STARTUP_TIMEOUT``, default 5 s) for connection-level failures (refused, DNS,
TLS) before the service has answered once, and ``--timeout`` for every request after that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinker_lite.rest_client import RestClient

__all__ = ["open_rest_client"]


def open_rest_client(
    base_url: str | None, *, startup_timeout: float, stall_timeout: float
) -> RestClient:
    """A session-less RestClient: start-up failures end after ``startup_timeout`` seconds.

    Requests after the service's first answer are bounded by ``stall_timeout`` (``--timeout``).
    """
    from tinker_lite.rest_client import RestClient

    return RestClient(
        base_url=base_url, startup_timeout=startup_timeout, stall_timeout=stall_timeout
    )
