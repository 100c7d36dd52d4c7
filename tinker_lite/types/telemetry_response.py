"""``TelemetryResponse`` (official module ``tinker.types.telemetry_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen
class TelemetryResponse:
    """POST /api/v1/telemetry."""

    status: str = "accepted"
