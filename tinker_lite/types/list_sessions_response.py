"""``ListSessionsResponse`` (official module ``tinker.types.list_sessions_response``)."""

from __future__ import annotations

import attrs

from .cursor import Cursor


@attrs.frozen(kw_only=True)
class ListSessionsResponse:
    """Session ids of the caller."""

    sessions: list[str]
    cursor: Cursor | None = None
