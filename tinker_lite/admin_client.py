"""AdminClient: the REST operations that need an organization admin or billing-admin role, built
like :class:`~tinker_lite.RestClient`."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Literal, get_args

from tinker_lite import types
from tinker_lite._api import endpoints
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import InvalidInputError
from tinker_lite._futures.async_twins import async_twin
from tinker_lite._futures.future import APIFuture
from tinker_lite._rest.args import check_optional_id
from tinker_lite._rest.base import RestOnlyClient

__all__ = ["AUDIT_EVENT_TYPES", "AdminClient", "AuditEventType"]

AuditEventType = Literal["all", "checkpoints", "projects", "teams", "organizations"]
AUDIT_EVENT_TYPES: tuple[str, ...] = get_args(AuditEventType)


def _check_moment(field: str, value: object) -> datetime:
    """An RFC 3339 string or a datetime, as an aware datetime (naive means UTC)."""
    moment: datetime | None = None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            moment = None
    if moment is None:
        raise InvalidInputError(
            field,
            f"must be a datetime or an RFC 3339 string, got {value!r}",
            "e.g. '2026-07-13T00:00:00Z'",
        )
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


class AdminClient(RestOnlyClient):
    """Audit log, billing usage and checkpoint storage usage of your organization.

    Constructed like :class:`RestClient`. Billing needs the admin or billing-admin role, the
    audit log the admin role."""

    def get_audit_log(
        self, event_type: AuditEventType = "all", day: date | None = None
    ) -> APIFuture[types.AuditLogResponse]:
        """The audit log of one UTC day (default today), of one kind of resource or ``"all"``."""
        if not isinstance(event_type, str) or event_type not in AUDIT_EVENT_TYPES:
            raise InvalidInputError(
                "event_type", f"must be one of {', '.join(AUDIT_EVENT_TYPES)}, got {event_type!r}"
            )
        # datetime is a date subclass, but a moment is not a day: refuse it rather than truncate.
        if day is not None and (isinstance(day, datetime) or not isinstance(day, date)):
            raise InvalidInputError(
                "day", f"must be a datetime.date or None, got {day!r}", "e.g. date(2026, 1, 15)"
            )
        query = {"event_type": event_type, "day": None if day is None else day.isoformat()}
        return self._request(endpoints.AUDIT_LOG, query=query)

    def get_billing_usage(
        self, starting_on: datetime | str, ending_before: datetime | str
    ) -> APIFuture[types.BillingUsageResponse]:
        """Hourly billing usage events from ``starting_on`` (included) to ``ending_before``:
        datetimes (naive means UTC) or RFC 3339 strings, on UTC hours, at most 14 days apart."""
        request = types.GetBillingUsageRequest(
            starting_on=_check_moment("starting_on", starting_on),
            ending_before=_check_moment("ending_before", ending_before),
        )
        if request.ending_before <= request.starting_on:
            raise InvalidInputError(
                "ending_before",
                f"must be after starting_on ({request.starting_on.isoformat()}), "
                f"got {request.ending_before.isoformat()}",
            )
        return self._request(endpoints.BILLING_USAGE, query=_wire.loads(_wire.dumps(request)))

    def get_current_checkpoint_storage_usage(
        self, project_id: str | None = None
    ) -> APIFuture[types.CurrentCheckpointStorageUsageResponse]:
        """Checkpoint count, size and projected cost now, of the organization or a project."""
        query = {"project_id": check_optional_id("project_id", project_id)}
        return self._request(endpoints.CHECKPOINT_STORAGE_USAGE, query=query)

    # -- the official *_async twins (deprecated there too) ---------------------------------------

    get_audit_log_async = async_twin(get_audit_log)
    get_billing_usage_async = async_twin(get_billing_usage)
    get_current_checkpoint_storage_usage_async = async_twin(get_current_checkpoint_storage_usage)
