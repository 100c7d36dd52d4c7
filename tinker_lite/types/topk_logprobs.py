"""``TopkLogprobs``: top-k candidates per position as two dense matrices.

Official module ``tinker.types.topk_logprobs``. Empty cells hold the sentinel
``(token_id=0, logprob=MASK_LOGPROB)`` (docs/protocol.rst §3.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["MASK_LOGPROB", "TopkLogprobs", "topk_from_lists", "topk_to_lists"]

MASK_LOGPROB = -99999.0

TopkRows = list[list[tuple[int, float]] | None]


@attrs.frozen(eq=False)
class TopkLogprobs:
    """``token_ids`` (int32) and ``logprobs`` (float32), both of shape ``(length, k)``."""

    token_ids: npt.NDArray[Any]
    logprobs: npt.NDArray[Any]


def topk_to_lists(topk: TopkLogprobs) -> TopkRows:
    """Return one list of ``(token_id, logprob)`` per position, None for an all-sentinel row.

    Trailing sentinel cells of a row are dropped.
    """
    import numpy as np

    ids = np.asarray(topk.token_ids)
    if ids.ndim != 2 or not ids.size:
        return []
    k = ids.shape[1]
    flat_ids = ids.reshape(-1).tolist()
    flat_lps = np.asarray(topk.logprobs, dtype=np.float32).reshape(-1).tolist()
    rows: TopkRows = []
    for start in range(0, len(flat_ids), k):
        end = start + k
        while end > start and flat_ids[end - 1] == 0 and flat_lps[end - 1] == MASK_LOGPROB:
            end -= 1
        rows.append(
            list(zip(flat_ids[start:end], flat_lps[start:end], strict=True))
            if end > start
            else None
        )
    return rows


def topk_from_lists(rows: Sequence[Sequence[tuple[int, float]] | None]) -> TopkLogprobs:
    """Return the dense matrices of ``rows``, padding short and None rows with the sentinel."""
    import numpy as np

    k = max((len(row) for row in rows if row), default=0)
    ids = np.zeros((len(rows), k), dtype=np.int32)
    lps = np.full((len(rows), k), MASK_LOGPROB, dtype=np.float32)
    for i, row in enumerate(rows):
        for j, (token, logprob) in enumerate(row or ()):
            ids[i, j] = token
            lps[i, j] = logprob
    return TopkLogprobs(token_ids=ids, logprobs=lps)
