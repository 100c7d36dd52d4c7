"""Credentials never reach a message: every secret sent is registered, and texts shown to
anyone (logs, reprs, errors, telemetry) are redacted first.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections.abc import Mapping

__all__ = [
    "CREDENTIAL_HEADERS",
    "redact",
    "redact_headers",
    "redact_url",
    "redact_value",
    "register_secret",
    "register_url_credentials",
]

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
_ORDERED: tuple[str, ...] = ()

PARTIAL_ECHO = 16  # a run of this many characters of a secret is redacted too
_BLOCK = PARTIAL_ECHO // 2
# scheme://userinfo@ : the userinfo stops at the first '/', '?', '#', '@' or space.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]+@")
MASK = "***"

# Headers that always hold a credential: sent by the auth handler, never across origins.
CREDENTIAL_HEADERS: frozenset[str] = frozenset(
    {"x-api-key", "authorization", "cf-access-client-id", "cf-access-client-secret"}
)
# Those, and the headers that carry other credentials: shown masked whole, whatever they hold.
_MASKED_HEADERS = CREDENTIAL_HEADERS | {"proxy-authorization", "cookie", "set-cookie"}


def register_secret(value: str | None) -> None:
    """Remember a credential so :func:`redact` removes it from any text shown to users."""
    global _ORDERED
    if value and len(value) >= 4:
        with _SECRETS_LOCK:
            if value not in _SECRETS:
                _SECRETS.add(value)
                _ORDERED = tuple(sorted(_SECRETS, key=len, reverse=True))


def register_url_credentials(url: str) -> None:
    """Register the userinfo of ``url`` (``user:password@``), if any, as secrets."""
    userinfo, at, _ = urllib.parse.urlsplit(url).netloc.rpartition("@")
    if at and userinfo:
        register_secret(userinfo)
        register_secret(userinfo.partition(":")[2])


def redact_url(url: str) -> str:
    """``url`` with its userinfo, if any, shown as ``***`` (``https://***@host/path``)."""
    return _USERINFO.sub(rf"\1{MASK}@", url) if "@" in url else url


def redact(text: str) -> str:
    """``text`` without any registered credential, run of 16 characters of one, or URL
    userinfo (each replaced by ``***``)."""
    if "@" in text and "://" in text:
        text = _USERINFO.sub(rf"\1{MASK}@", text)
    secrets = _ORDERED
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    for secret in secrets:
        if len(secret) >= PARTIAL_ECHO and len(text) >= PARTIAL_ECHO:
            text = _redact_partial(text, secret)
    return text


def _redact_partial(text: str, secret: str) -> str:
    """``text`` with every run of ``PARTIAL_ECHO`` or more characters of ``secret`` masked.

    Any such run holds one of the secret's 8-character blocks: each found is grown both ways.
    """
    spans: list[tuple[int, int]] = []
    size = len(secret)
    for offset in range(0, size - _BLOCK + 1, _BLOCK):
        block = secret[offset : offset + _BLOCK]
        at = text.find(block)
        while at != -1:
            start, end = at, at + _BLOCK
            left, right = offset, offset + _BLOCK
            while start > 0 and left > 0 and text[start - 1] == secret[left - 1]:
                start, left = start - 1, left - 1
            while end < len(text) and right < size and text[end] == secret[right]:
                end, right = end + 1, right + 1
            if end - start >= PARTIAL_ECHO:
                spans.append((start, end))
            at = text.find(block, at + 1)
    if not spans:
        return text
    spans.sort()
    parts: list[str] = []
    kept = 0
    for start, end in spans:
        if start < kept:  # overlaps the run just masked
            kept = max(kept, end)
            continue
        parts += (text[kept:start], MASK)
        kept = end
    parts.append(text[kept:])
    return "".join(parts)


def redact_value(value: object) -> object:
    """A copy of a decoded body (JSON-like values, bytes) or mapping with every string redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", errors="replace")
        cleaned = redact(text)
        return value if cleaned == text else cleaned.encode()
    if isinstance(value, Mapping):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_value(item) for item in value)
    return value


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` to show: a credential or cookie header's value as ``***``, every
    other name and value redacted."""
    return {
        redact(name): MASK if name.lower() in _MASKED_HEADERS else redact(value)
        for name, value in headers.items()
    }
