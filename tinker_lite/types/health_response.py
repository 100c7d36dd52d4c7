"""``HealthResponse`` (official module ``tinker.types.health_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen
class HealthResponse:
    """GET /api/v1/healthz."""

    status: str = "ok"
