"""``SessionSearchCursor`` (official module ``tinker.types.session_search_cursor``)."""

from __future__ import annotations

from datetime import datetime

import attrs

__all__ = ["SessionSearchCursor"]


@attrs.frozen(kw_only=True)
class SessionSearchCursor:
    """Where the next page of a session search starts."""

    last_created_at: datetime
    last_session_id: str
