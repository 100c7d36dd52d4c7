"""Helpers for inspecting tinker_lite's authentication state (the official ``tinker.auth``).

They report on the order in which a client finds its credential: the ``api_key=`` argument,
``TINKER_API_KEY``, ``TINKER_CREDENTIAL_CMD``, then the default key of
``~/.tinker/credentials.json`` (the stored login of ``tinker-lite auth login`` or the official
``tinker auth login``).
"""

from __future__ import annotations

import os

from tinker_lite._errors import TinkerError
from tinker_lite._session.credentials import ENV_API_KEY, resolve_credential
from tinker_lite._session.credentials_file import CredentialsFile

__all__ = ["get_tinker_token", "raise_if_tinker_not_accessible", "tinker_has_credentials"]


def get_tinker_token() -> str | None:
    """The configured static key: ``TINKER_API_KEY``, else the stored default key, else ``None``.

    Reads only local state: it never runs ``TINKER_CREDENTIAL_CMD`` nor sends anything, and an
    unreadable or malformed credentials file counts as no key.
    """
    key = os.environ.get(ENV_API_KEY)
    if key:
        return key
    try:
        stored = CredentialsFile().default()
    except (OSError, ValueError):
        return None
    return stored[1].key if stored is not None else None


def tinker_has_credentials() -> bool:
    """Whether a client would find a credential (see the module docstring). Sends nothing.

    A configured ``TINKER_CREDENTIAL_CMD`` counts without running it; an unreadable or
    malformed credentials file counts as none.
    """
    try:
        return resolve_credential().source is not None
    except (OSError, ValueError):
        return False


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
