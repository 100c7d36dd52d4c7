"""Helpers for inspecting tinker_lite's authentication state (the official ``tinker.auth``).

A client takes the ``api_key=`` argument, ``TINKER_API_KEY``, ``TINKER_CREDENTIAL_CMD``, then the
default key of ``~/.tinker/credentials.json``, in that order."""

from __future__ import annotations

import os

from tinker_lite._errors import TinkerError
from tinker_lite._session.credentials import ENV_API_KEY, resolve_credential
from tinker_lite._session.credentials_file import CredentialsFile

__all__ = ["get_tinker_token", "raise_if_tinker_not_accessible", "tinker_has_credentials"]


def get_tinker_token() -> str | None:
    """The configured static key: ``TINKER_API_KEY``, else the stored default key, else ``None``
    (local state only; an unreadable credentials file counts as no key)."""
    key = os.environ.get(ENV_API_KEY)
    if key:
        return key
    try:
        stored = CredentialsFile().default()
    except (OSError, ValueError):
        return None
    return stored[1].key if stored is not None else None


def tinker_has_credentials() -> bool:
    """Whether a client would find a credential (``TINKER_CREDENTIAL_CMD`` counts without being
    run). Sends nothing."""
    try:
        return resolve_credential().source is not None
    except (OSError, ValueError):
        return False


def raise_if_tinker_not_accessible() -> None:
    """Raise unless the service accepts the configured credential: one request, not retried, to
    the server capabilities (:class:`~tinker_lite.TinkerError` or its subclass saying why)."""
    from tinker_lite.rest_client import RestClient

    try:
        with RestClient(max_retries=0) as rest:
            rest.get_server_capabilities().result()
    except TinkerError:
        raise
    except Exception as e:
        raise TinkerError(str(e)) from e
