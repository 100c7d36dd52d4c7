"""Short-lived JSON Web Tokens (HS256) issued by ``POST /api/v1/auth/token`` of the local server.

The server signs with a random secret drawn at start-up (kept in its data dir when one is given,
so tokens outlive a restart), so a token is valid only for the server that issued it and only
until its ``exp`` claim (docs/protocol.rst §8.3: the client sends it in the same ``X-API-Key``
header and refreshes it before it expires).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any

__all__ = ["LOCAL_EMAIL", "LOCAL_ORG_ID", "LOCAL_USER_URN", "JwtIssuer"]


# The one principal of the local server (docs/service.rst §7: live owners look like
# "tml:organization_user:<uuid>").
LOCAL_ORG_ID = "tinker-lite-local"
LOCAL_USER_URN = "tml:organization_user:tinker-lite-local"
LOCAL_EMAIL = "local@tinker-lite.invalid"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class JwtIssuer:
    """Issue and verify HS256 tokens with a per-server random secret."""

    def __init__(self, ttl_s: float = 3600.0, secret: bytes | None = None) -> None:
        self.ttl_s = ttl_s
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def _sign(self, signing_input: bytes) -> str:
        return _b64url(hmac.new(self._secret, signing_input, hashlib.sha256).digest())

    def issue(self, now: float, subject: str = LOCAL_USER_URN) -> str:
        """Return a token for ``subject`` valid for ``ttl_s`` seconds from ``now`` (epoch s)."""
        header = {"alg": "HS256", "typ": "JWT"}
        payload = {
            "iss": "tinker-lite-local",
            "sub": subject,
            # the official whoami() reads org_id (org_urn = "tml:organization:<org_id>")
            "org_id": LOCAL_ORG_ID,
            "email": LOCAL_EMAIL,
            "iat": int(now),
            "exp": int(now + self.ttl_s),
            "jti": secrets.token_hex(8),
        }
        signing_input = (
            _b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64url(json.dumps(payload, separators=(",", ":")).encode())
        )
        return signing_input + "." + self._sign(signing_input.encode("ascii"))

    def verify(self, token: str, now: float) -> dict[str, Any] | None:
        """Return the claims of a valid, unexpired token issued here; None otherwise."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        signing_input = (parts[0] + "." + parts[1]).encode("ascii", "replace")
        if not hmac.compare_digest(self._sign(signing_input), parts[2]):
            return None
        try:
            claims = json.loads(_b64url_decode(parts[1]))
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(claims, dict):
            return None
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or exp <= now:
            return None
        return claims
