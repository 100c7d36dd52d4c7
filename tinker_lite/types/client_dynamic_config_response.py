"""``ClientDynamicConfigResponse``.

Official module ``tinker.types.client_dynamic_config_response``.
"""

from __future__ import annotations

import attrs

__all__ = ["ClientDynamicConfigResponse", "DynamicConfigResponse"]


@attrs.frozen(kw_only=True)
class ClientDynamicConfigResponse:
    """POST /api/v1/client/dynamic_config: flags the service may change while a client runs."""

    refresh_interval_sec: float = 300.0
    sample_cancel_enabled: bool = False
    sample_cancel_max_batch_size: int = 64


# The name of earlier tinker_lite releases.
DynamicConfigResponse = ClientDynamicConfigResponse
