"""Credentials never reach a message: every secret sent is registered, and texts built from
answers are redacted before anyone sees them (logs, reprs, errors, telemetry)."""

from __future__ import annotations

import threading

__all__ = ["redact", "register_secret"]

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a credential so :func:`redact` removes it from any text shown to users."""
    if value and len(value) >= 4:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """Replace every registered credential in ``text`` by ``***``."""
    if not _SECRETS:
        return text
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text
