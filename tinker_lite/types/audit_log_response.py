"""``AuditLogResponse`` (official module ``tinker.types.audit_log_response``)."""

from __future__ import annotations

import attrs

from .audit_log_entry import AuditLogEntry

__all__ = ["AuditLogResponse"]


@attrs.frozen(kw_only=True)
class AuditLogResponse:
    """Audit log entries."""

    entries: list[AuditLogEntry]
