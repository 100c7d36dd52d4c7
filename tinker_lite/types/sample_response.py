"""``SampleResponse`` (official module ``tinker.types.sample_response``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .prompt_alt_tokens import PromptAltTokens
from .sampled_sequence import SampledSequence, _from_array, _from_topk
from .tensor_data import TensorData
from .topk_logprobs import TopkLogprobs, topk_from_lists

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["SampleResponse"]


@attrs.frozen(init=False)
class SampleResponse:
    """Result of sample: the sequences and, when asked for, prompt-level results.

    ``prompt_logprobs`` has None where nothing was computed (the first prompt token);
    ``target_prompt_logprobs`` answers ``target_prompt_logprobs`` of the request (same shape,
    0.0 where the request had -1); ``prompt_alt_tokens`` answers ``prompt_alt_tokens_k``;
    ``prompt_cache_hit_tokens`` counts prompt tokens served from the prefix cache. As in 0.38,
    the prompt results may also be given as arrays (``prompt_logprobs_np=``, NaN where None, and
    ``topk_prompt_logprobs_np=``).
    """

    sequences: list[SampledSequence]
    prompt_logprobs: list[float | None] | None = None
    topk_prompt_logprobs: list[list[tuple[int, float]] | None] | None = None
    type: Literal["sample"] = "sample"
    target_prompt_logprobs: TensorData | None = attrs.field(default=None, kw_only=True)
    prompt_cache_hit_tokens: int = attrs.field(default=0, kw_only=True)
    prompt_alt_tokens: PromptAltTokens | None = attrs.field(default=None, kw_only=True)

    def __init__(
        self,
        sequences: list[SampledSequence],
        prompt_logprobs: list[float | None] | None = None,
        topk_prompt_logprobs: list[list[tuple[int, float]] | None] | None = None,
        type: Literal["sample"] = "sample",
        *,
        target_prompt_logprobs: TensorData | None = None,
        prompt_cache_hit_tokens: int = 0,
        prompt_alt_tokens: PromptAltTokens | None = None,
        prompt_logprobs_np: Any = None,
        topk_prompt_logprobs_np: TopkLogprobs | None = None,
    ) -> None:
        prompt = _from_array("prompt_logprobs", prompt_logprobs, prompt_logprobs_np)
        if prompt_logprobs_np is not None:
            prompt = [None if math.isnan(value) else value for value in prompt]
        self.__attrs_init__(
            list(sequences),
            prompt,
            _from_topk("topk_prompt_logprobs", topk_prompt_logprobs, topk_prompt_logprobs_np),
            type,
            target_prompt_logprobs=target_prompt_logprobs,
            prompt_cache_hit_tokens=prompt_cache_hit_tokens,
            prompt_alt_tokens=prompt_alt_tokens,
        )

    @property
    def prompt_logprobs_np(self) -> npt.NDArray[np.float32] | None:
        """``prompt_logprobs`` as a float32 array (NaN where None), None when not asked for."""
        if self.prompt_logprobs is None:
            return None
        import numpy as np

        values = [np.nan if value is None else value for value in self.prompt_logprobs]
        return np.asarray(values, dtype=np.float32)

    @property
    def topk_prompt_logprobs_np(self) -> TopkLogprobs | None:
        """``topk_prompt_logprobs`` as two dense ``(length, k)`` matrices, None when not asked."""
        if self.topk_prompt_logprobs is None:
            return None
        return topk_from_lists(self.topk_prompt_logprobs)
