"""Helpers for inspecting tinker_lite's authentication state (the official ``tinker.auth``).

tinker_lite takes its credential from ``api_key=...`` or ``TINKER_API_KEY`` only (no stored
credentials file, no credential command): these helpers report on that same source.
"""

from __future__ import annotations

import os

from tinker_lite._errors import TinkerError

__all__ = ["get_tinker_token", "raise_if_tinker_not_accessible", "tinker_has_credentials"]

ENV_API_KEY = "TINKER_API_KEY"


def get_tinker_token() -> str | None:
    """The configured API key (``TINKER_API_KEY``), or ``None``. Sends nothing."""
    return os.environ.get(ENV_API_KEY, "").strip() or None


def tinker_has_credentials() -> bool:
    """Whether a credential is configured (``TINKER_API_KEY``). Sends nothing."""
    return get_tinker_token() is not None


def raise_if_tinker_not_accessible() -> None:
    """Raise unless the service accepts the configured credential; return when it does.

    One request, not retried, to the server capabilities (which needs billing set up):
    :class:`~tinker_lite.TinkerError` when no credential is configured,
    :class:`~tinker_lite.AuthenticationError` when it is rejected,
    :class:`~tinker_lite.BillingError` when the account is not set up (402), or
    :class:`~tinker_lite.APIConnectionError` when the service is unreachable.
    """
    from tinker_lite.rest_client import RestClient

    try:
        with RestClient(max_retries=0) as rest:
            rest.get_server_capabilities().result()
    except TinkerError:
        raise
    except Exception as e:
        raise TinkerError(str(e)) from e
