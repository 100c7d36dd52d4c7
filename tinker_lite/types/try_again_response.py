"""``QueueState`` and ``TryAgainResponse`` (official module ``tinker.types.try_again_response``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _LenientStrEnum


class QueueState(_LenientStrEnum):
    """The service's queue state for a waiting request (docs/protocol.rst §5.6)."""

    ACTIVE = "active"
    PAUSED_RATE_LIMIT = "paused_rate_limit"
    PAUSED_CAPACITY = "paused_capacity"
    UNKNOWN = "unknown"


@attrs.frozen(kw_only=True)
class TryAgainResponse:
    """retrieve_future: the result is not ready yet."""

    type: Literal["try_again"] = "try_again"
    request_id: str
    queue_state: str
    queue_state_reason: str | None = None
