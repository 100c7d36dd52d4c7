"""``ClientConfigRequest`` (official module ``tinker.types.client_config_request``)."""

from __future__ import annotations

import attrs

from ._common import _check_str


@attrs.frozen(kw_only=True)
class ClientConfigRequest:
    """POST /api/v1/client/config (also the body of /api/v1/client/dynamic_config)."""

    sdk_version: str

    def __attrs_post_init__(self) -> None:
        _check_str("sdk_version", self.sdk_version)
