"""``FuturesRetrieveResponse`` (official module ``tinker.types.futures_retrieve_response``)."""

from __future__ import annotations

import attrs

from .future_completion import FutureFailed, FutureFinished

__all__ = ["FuturesRetrieveResponse"]


@attrs.frozen(kw_only=True)
class FuturesRetrieveResponse:
    """Completions since the request's cursor, and the cursor to poll from next."""

    completions: list[FutureFinished | FutureFailed]
    cursor: int
