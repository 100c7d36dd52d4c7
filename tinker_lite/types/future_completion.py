"""Completions reported by retrieve_futures (official module ``tinker.types.future_completion``)."""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["FutureCompletion", "FutureFailed", "FutureFinished"]


@attrs.frozen(kw_only=True)
class FutureFinished:
    """The request finished; its result can be retrieved."""

    state: Literal["finished"] = "finished"
    request_id: str
    response_payload_uncompressed_size: int | None = None


@attrs.frozen(kw_only=True)
class FutureFailed:
    """The request failed."""

    state: Literal["failed"] = "failed"
    request_id: str


FutureCompletion = FutureFinished | FutureFailed
