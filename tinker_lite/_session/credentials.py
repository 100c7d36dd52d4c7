"""Credentials sent as ``X-API-Key``: the API key, or a JWT obtained with it (WIRE.md §13.2).

When the service's client config sets ``pjwt_auth_enabled``, the API key is exchanged for a JWT
(``POST /api/v1/auth/token``), refreshed before its ``exp`` and once after a 401. The token is
registered as a secret, so it never reaches a log or an error message.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Mapping

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import decode_json
from tinker_lite._errors import APIResponseValidationError, TinkerError, WireFormatError
from tinker_lite._transport.http import HttpResponse, redact, register_secret

__all__ = ["AUTH_TOKEN_PATH", "Credentials", "jwt_expiry", "token_fetcher"]

AUTH_TOKEN_PATH = "/api/v1/auth/token"

logger = logging.getLogger("tinker_lite.session")


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT in epoch seconds (the signature is not checked), or ``None``."""
    parts = token.split(".")
    if len(parts) < 2:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = _wire.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, TinkerError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, (int, float)) and not isinstance(exp, bool):
        return float(exp)
    return None


class Credentials:
    """The credential sent as ``X-API-Key``: the API key, or a JWT refreshed before it expires."""

    def __init__(
        self,
        api_key: str | None,
        *,
        wall_clock: Callable[[], float],
        refresh_margin: float = 300.0,
        retry_pause: float = 60.0,
    ) -> None:
        self.api_key = api_key
        self._wall_clock = wall_clock
        self._refresh_margin = refresh_margin
        self._retry_pause = retry_pause
        self._lock = threading.Lock()
        self._jwt: str | None = None
        self._exp: float | None = None
        self._fetch: Callable[[], str] | None = None
        self._next_attempt = 0.0
        self._fetching = threading.local()

    def __repr__(self) -> str:
        return f"Credentials(jwt={'***' if self._jwt else None})"

    @property
    def uses_jwt(self) -> bool:
        return self._jwt is not None

    def enable_jwt(self, fetch: Callable[[], str]) -> None:
        """Exchange the API key for a JWT now; later requests carry the JWT."""
        token = self._fetch_token(fetch)
        with self._lock:
            self._fetch = fetch
            self._install(token)

    def _fetch_token(self, fetch: Callable[[], str]) -> str:
        """Call ``fetch``; requests this thread sends meanwhile carry the API key, not the JWT."""
        self._fetching.active = True
        try:
            return fetch()
        finally:
            self._fetching.active = False

    def _install(self, token: str) -> None:
        register_secret(token)
        self._jwt = token
        self._exp = jwt_expiry(token)

    def current(self) -> str | None:
        """The credential to send now: the API key, or the JWT (refreshed before it expires)."""
        token = self._jwt
        # WIRE.md §13.2: auth/token itself is authenticated with the API key, never the JWT.
        if token is None or getattr(self._fetching, "active", False):
            return self.api_key
        exp = self._exp
        if exp is not None:
            now = self._wall_clock()
            # WIRE.md §13.2: refresh ahead of expiry (a stale JWT is answered 401).
            if exp - now <= self._refresh_margin and now >= self._next_attempt:
                self._refresh(token, force=False)
        return self._jwt

    def reauth(self, rejected: str) -> bool:
        """After a 401: fetch a new JWT (once per rejected token); True if one is available."""
        if self._fetch is None:
            return False
        self._refresh(rejected, force=True)
        return self._jwt is not None and self._jwt != rejected

    def _refresh(self, stale: str, *, force: bool) -> None:
        with self._lock:
            if self._jwt != stale or self._fetch is None:
                return
            if not force and self._wall_clock() < self._next_attempt:
                return
            try:
                token = self._fetch_token(self._fetch)
            except TinkerError as e:
                self._next_attempt = self._wall_clock() + self._retry_pause
                logger.warning("Could not refresh the access token: %s", redact(str(e)))
                return
            self._install(token)


def token_fetcher(
    post: Callable[[str, bytes, Mapping[str, str]], HttpResponse], api_key: str | None
) -> Callable[[], str]:
    """A function exchanging the API key for a JWT: ``POST /api/v1/auth/token {}``.

    ``post(path, body, headers)`` sends with the start-up retries. The request carries the API
    key explicitly (WIRE.md §13.2: never the JWT being replaced).
    """

    def fetch() -> str:
        headers = {"X-API-Key": api_key} if api_key else {}
        resp = post(AUTH_TOKEN_PATH, b"{}", headers)
        data = decode_json(resp, what="auth/token")
        try:
            return _wire.structure(data, types.AuthTokenResponse).jwt
        except WireFormatError as e:
            raise APIResponseValidationError(
                f"auth/token answered without a usable jwt: {e}", status_code=resp.status
            ) from e

    return fetch
