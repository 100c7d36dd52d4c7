"""``AuditLogEntry`` (official module ``tinker.types.audit_log_entry``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

__all__ = ["AuditLogEntry"]


@attrs.frozen(kw_only=True)
class AuditLogEntry:
    """One audited event: when, what, and the model or checkpoint it concerns."""

    timestamp: datetime
    event: str
    event_details: dict[str, Any] = attrs.field(factory=dict)
    model_id: str | None = None
    tinker_path: str | None = None
    purpose: str | None = None
