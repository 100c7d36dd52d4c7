"""``SampledSequence`` (official module ``tinker.types.sampled_sequence``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from tinker_lite._errors import InvalidInputError

from .stop_reason import StopReason
from .topk_logprobs import TopkLogprobs, topk_from_lists, topk_to_lists

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["SampledSequence"]


@attrs.frozen(init=False)
class SampledSequence:
    """One sampled continuation: its tokens and, when asked for, their logprobs and top-k.

    ``topk_logprobs`` holds up to k ``(token_id, logprob)`` pairs per generated position (None
    where the service reported nothing) when ``topk_sample_logprobs`` was set. ``sequence_id``
    names the sequence for later requests (provenance spans). The ``*_np`` properties give the
    same values as numpy arrays (importing numpy); as in 0.38, a sequence may also be built from
    them (``tokens_np=``, ``logprobs_np=``, ``topk_logprobs_np=``).
    """

    stop_reason: StopReason = attrs.field(converter=StopReason)
    tokens: list[int]
    logprobs: list[float] | None = None
    topk_logprobs: list[list[tuple[int, float]] | None] | None = attrs.field(
        default=None, kw_only=True
    )
    sequence_id: str | None = attrs.field(default=None, kw_only=True)

    def __init__(
        self,
        stop_reason: StopReason | str,
        tokens: list[int] | None = None,
        logprobs: list[float] | None = None,
        *,
        topk_logprobs: list[list[tuple[int, float]] | None] | None = None,
        sequence_id: str | None = None,
        tokens_np: Any = None,
        logprobs_np: Any = None,
        topk_logprobs_np: TopkLogprobs | None = None,
    ) -> None:
        self.__attrs_init__(
            stop_reason,
            _from_array("tokens", tokens, tokens_np) or [],
            _from_array("logprobs", logprobs, logprobs_np),
            topk_logprobs=_from_topk("topk_logprobs", topk_logprobs, topk_logprobs_np),
            sequence_id=sequence_id,
        )

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


def _from_array(name: str, values: Any, array: Any) -> Any:
    """``values``, or the list of ``array`` (a ``*_np`` argument); not both."""
    if array is None:
        return values
    if values is not None:
        raise InvalidInputError(name, f"both {name} and {name}_np are given", "pass one of them")
    return array.tolist()


def _from_topk(name: str, rows: Any, matrices: TopkLogprobs | None) -> Any:
    if matrices is None:
        return rows
    if rows is not None:
        raise InvalidInputError(name, f"both {name} and {name}_np are given", "pass one of them")
    return topk_to_lists(matrices)
