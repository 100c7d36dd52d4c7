"""What the local server records about its own activity: the audit log and usage.

Answers the REST views of today's service from the server's real state: ``GET audit`` (checkpoint
and project events), ``GET billing/usage/events`` (hourly usage buckets: training tokens, sampling
prefill and sample tokens, checkpoints saved) and ``GET billing/usage/checkpoints/current``. Costs
are not estimated (the local server bills nothing): the cost fields stay absent. With a data dir,
both are appended to ``ledger/audit.jsonl`` and ``ledger/usage.jsonl`` and read back at start.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from tinker_lite.local.storage.durable import DataDir

__all__ = ["AUDIT_EVENT_TYPES", "Ledger"]

# audit event_type filter -> the event name prefixes it selects
AUDIT_EVENT_TYPES = {
    "all": ("",),
    "checkpoints": ("checkpoint.",),
    "projects": ("project.", "session.project"),
    "teams": ("team.",),
    "organizations": ("organization.",),
}
_HOUR = 3600.0
_AUDIT_LOG = "ledger/audit.jsonl"
_USAGE_LOG = "ledger/usage.jsonl"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class _Usage:
    ts: float
    kind: str  # training | sampling_prefill | sampling_sample | checkpoint
    amount: int
    base_model: str | None
    session_id: str | None
    project_id: str | None


class Ledger:
    """Append-only, thread-safe audit and usage records of one server."""

    def __init__(self, user_urn: str, data: DataDir | None = None) -> None:
        self._user_urn = user_urn
        self._data = data
        self._lock = threading.Lock()
        self._audit: list[dict[str, Any]] = []
        self._usage: list[_Usage] = []
        if data is not None:
            self._audit = [e for e in data.lines(_AUDIT_LOG) if isinstance(e, dict)]
            for record in data.lines(_USAGE_LOG):
                try:
                    self._usage.append(_Usage(**record))
                except TypeError:
                    continue

    def audit(self, ts: float, event: str, **details: Any) -> None:
        """Record one audit event (``checkpoint.created``, ``session.project_assigned``...)."""
        entry: dict[str, Any] = {"timestamp": _iso(ts), "event": event, "_ts": ts}
        for key in ("model_id", "tinker_path", "purpose"):
            if key in details:
                entry[key] = details.pop(key)
        entry["event_details"] = details
        with self._lock:
            self._audit.append(entry)
            if self._data is not None:
                self._data.append(_AUDIT_LOG, entry)

    def use(
        self,
        ts: float,
        kind: str,
        amount: int,
        *,
        base_model: str | None,
        session_id: str | None,
        project_id: str | None,
    ) -> None:
        """Record usage: tokens trained or sampled, or checkpoints saved."""
        usage = _Usage(ts, kind, amount, base_model, session_id, project_id)
        with self._lock:
            self._usage.append(usage)
            if self._data is not None:
                self._data.append(_USAGE_LOG, dataclasses.asdict(usage))

    def audit_log(self, event_type: str, day: str | None) -> dict[str, Any]:
        """``AuditLogResponse``: events of ``event_type`` (on ``day``, YYYY-MM-DD, if given)."""
        prefixes = AUDIT_EVENT_TYPES[event_type]
        with self._lock:
            entries = list(self._audit)
        out = []
        for entry in entries:
            if not entry["event"].startswith(prefixes):
                continue
            if day is not None and not entry["timestamp"].startswith(day):
                continue
            out.append({k: v for k, v in entry.items() if k != "_ts"})
        return {"entries": out}

    def billing_usage(
        self, start: float, end: float, session_metadata: dict[str, dict[str, str] | None]
    ) -> dict[str, Any]:
        """``BillingUsageResponse``: usage in [start, end) summed per hour, model and session."""
        buckets: dict[tuple[float, str, str | None, str | None, str | None], int] = defaultdict(int)
        with self._lock:
            usage = [u for u in self._usage if start <= u.ts < end]
        for u in usage:
            bucket = (u.ts // _HOUR) * _HOUR
            buckets[(bucket, u.kind, u.base_model, u.session_id, u.project_id)] += u.amount
        data = []
        for (bucket, kind, base_model, session_id, project_id), amount in sorted(
            buckets.items(), key=lambda item: (item[0][0], item[0][1], str(item[0][3]))
        ):
            info: dict[str, Any] = {"type": kind}
            if kind == "checkpoint":
                info["count"] = amount
            else:
                info["token_count"] = amount
            if kind == "sampling_prefill":
                info["cached"] = False
            data.append(
                {
                    "bucket_start": _iso(bucket),
                    "bucket_end": _iso(bucket + _HOUR),
                    "base_model": base_model,
                    "user_id": self._user_urn,
                    "session_id": session_id,
                    "project_id": project_id,
                    "event_info": info,
                }
            )
        sessions = {
            str(event["session_id"]): {
                "user_metadata": session_metadata.get(str(event["session_id"]))
            }
            for event in data
            if event["session_id"] is not None
        }
        return {"data": data, "sessions": sessions, "cost_data_through": _iso(end)}
