"""``FutureRetrieveRequest`` (official module ``tinker.types.future_retrieve_request``)."""

from __future__ import annotations

import attrs

from ._common import _check_bool, _check_str


@attrs.frozen(kw_only=True)
class FutureRetrieveRequest:
    """POST /api/v1/retrieve_future (``allow_metadata_only`` is always sent,
    docs/protocol.rst §3.1)."""

    request_id: str
    allow_metadata_only: bool | None = False

    def __attrs_post_init__(self) -> None:
        _check_str("request_id", self.request_id)
        if self.allow_metadata_only is not None:
            _check_bool("allow_metadata_only", self.allow_metadata_only)
