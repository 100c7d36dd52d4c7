"""``SessionSearchRequest`` (official module ``tinker.types.session_search_request``)."""

from __future__ import annotations

import attrs

from ._common import _check_int
from .search_owner import AccessibleSearchOwner, OwnSearchOwner, UserSearchOwner
from .session_search_cursor import SessionSearchCursor
from .session_status_query import (
    ActiveSessionStatusQuery,
    CancelledSessionStatusQuery,
    ClientFinishedSessionStatusQuery,
    FailedSessionStatusQuery,
)

__all__ = ["SessionSearchRequest"]


@attrs.frozen(kw_only=True)
class SessionSearchRequest:
    """Search sessions by id, project, metadata, name, owner and status (``limit`` per page)."""

    session_id: str | None = None
    project_ids: list[str] | None = None
    user_metadata: dict[str, str] = attrs.field(factory=dict)
    display_name: str | None = None
    owner: OwnSearchOwner | AccessibleSearchOwner | UserSearchOwner = attrs.field(
        factory=OwnSearchOwner
    )
    statuses: (
        list[
            ActiveSessionStatusQuery
            | CancelledSessionStatusQuery
            | FailedSessionStatusQuery
            | ClientFinishedSessionStatusQuery
        ]
        | None
    ) = None
    limit: int = 50
    cursor: SessionSearchCursor | None = None

    def __attrs_post_init__(self) -> None:
        _check_int("limit", self.limit, minimum=1)
