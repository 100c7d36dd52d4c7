"""``SessionSearchResponse`` (official module ``tinker.types.session_search_response``)."""

from __future__ import annotations

import attrs

from .session_search_cursor import SessionSearchCursor
from .session_summary import SessionSummary

__all__ = ["SessionSearchResponse"]


@attrs.frozen(kw_only=True)
class SessionSearchResponse:
    """A page of sessions and the cursor of the next page (None on the last)."""

    sessions: list[SessionSummary]
    next_cursor: SessionSearchCursor | None = None
