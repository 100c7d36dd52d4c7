"""``WhoamiResponse`` (official module ``tinker.types.whoami_response``)."""

from __future__ import annotations

import attrs

__all__ = ["WhoamiResponse"]


@attrs.frozen(kw_only=True)
class WhoamiResponse:
    """Who the API key belongs to."""

    user_urn: str
    org_urn: str
    email: str | None = None
