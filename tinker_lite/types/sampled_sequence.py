"""``SampledSequence`` (official module ``tinker.types.sampled_sequence``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .stop_reason import StopReason
from .topk_logprobs import TopkLogprobs, topk_from_lists

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["SampledSequence"]


@attrs.frozen
class SampledSequence:
    """One sampled continuation: its tokens and, when asked for, their logprobs and top-k.

    ``topk_logprobs`` holds up to k ``(token_id, logprob)`` pairs per generated position (None
    where the service reported nothing) when ``topk_sample_logprobs`` was set. ``sequence_id``
    names the sequence for later requests (provenance spans). The ``*_np`` properties give the
    same values as numpy arrays (importing numpy).
    """

    stop_reason: StopReason = attrs.field(converter=StopReason)
    tokens: list[int]
    logprobs: list[float] | None = None
    topk_logprobs: list[list[tuple[int, float]] | None] | None = attrs.field(
        default=None, kw_only=True
    )
    sequence_id: str | None = attrs.field(default=None, kw_only=True)

    @property
    def tokens_np(self) -> npt.NDArray[np.int32]:
        """The generated token ids as a 1-D int32 array."""
        import numpy as np

        return np.asarray(self.tokens, dtype=np.int32)

    @property
    def logprobs_np(self) -> npt.NDArray[np.float32] | None:
        """The logprobs as a 1-D float32 array, None when they were not asked for."""
        import numpy as np

        return None if self.logprobs is None else np.asarray(self.logprobs, dtype=np.float32)

    @property
    def topk_logprobs_np(self) -> TopkLogprobs | None:
        """``topk_logprobs`` as two dense ``(num_tokens, k)`` matrices, None when not asked for."""
        return None if self.topk_logprobs is None else topk_from_lists(self.topk_logprobs)
