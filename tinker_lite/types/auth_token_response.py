"""``AuthTokenResponse`` (official module ``tinker.types.auth_token_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class AuthTokenResponse:
    """POST /api/v1/auth/token: a JWT sent in place of the API key."""

    jwt: str = attrs.field(repr=False)
