"""``FuturesRetrieveRequest`` (official module ``tinker.types.futures_retrieve_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_int, _check_str

__all__ = ["FuturesRetrieveRequest", "SamplingSessionFuturesTarget"]


@attrs.frozen(kw_only=True)
class SamplingSessionFuturesTarget:
    """Wait for the requests of one sampling session (and clone)."""

    type: Literal["sampling_session"] = "sampling_session"
    sampling_session_id: str
    cloned_sampler_id: int = 0

    def __attrs_post_init__(self) -> None:
        _check_str("sampling_session_id", self.sampling_session_id)
        _check_int("cloned_sampler_id", self.cloned_sampler_id, minimum=0)


@attrs.frozen(kw_only=True)
class FuturesRetrieveRequest:
    """Long-poll for completions of ``target`` after ``prev_cursor``."""

    target: SamplingSessionFuturesTarget
    prev_cursor: int = 0
    timeout: float | None = None
    retrieved_request_ids: list[str] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        _check_int("prev_cursor", self.prev_cursor, minimum=0)
