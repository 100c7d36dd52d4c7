"""``FutureMetadataResponse`` (official module ``tinker.types.future_retrieve_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class FutureMetadataResponse:
    """retrieve_future: result ready, payload withheld (re-poll with allow_metadata_only=False)."""

    status: str
    response_payload_size: int | None = None
