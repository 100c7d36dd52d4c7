"""``SessionSummary`` (official module ``tinker.types.session_summary``)."""

from __future__ import annotations

from datetime import datetime

import attrs

from .session_status import ClientSessionFinished, SessionActive, SessionCancelled, SessionFailed

__all__ = ["SessionSummary"]


@attrs.frozen(kw_only=True)
class SessionSummary:
    """One session found by a search: owner, project, status and checkpoint usage."""

    session_id: str
    created_at: datetime
    owner: str
    project_id: str
    status: SessionFailed | SessionCancelled | ClientSessionFinished | SessionActive | None = None
    checkpoints_count: int
    display_name: str | None = None
    user_metadata: dict[str, str] | None = None
    checkpoint_storage_bytes: int | None = None
