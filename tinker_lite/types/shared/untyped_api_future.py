"""``UntypedAPIFuture`` (official module ``tinker.types.shared.untyped_api_future``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class UntypedAPIFuture:
    """The answer to a submit: the request id to poll with retrieve_future.

    ``sample_sequence_ids`` (sample submits) names each sequence the result will hold.
    """

    request_id: str
    model_id: str | None = None
    sample_sequence_ids: list[str] | None = None
