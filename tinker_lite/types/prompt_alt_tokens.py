"""``PromptAltTokens`` (official module ``tinker.types.prompt_alt_tokens``)."""

from __future__ import annotations

import attrs

from .tensor_data import TensorData

__all__ = ["PromptAltTokens"]


@attrs.frozen
class PromptAltTokens:
    """Draws from the model at every prompt position after the first (``prompt_alt_tokens_k``).

    ``tokens`` (int64) and ``logprobs`` (float32) both have shape ``[len(prompt) - 1, k]``:
    row ``i`` holds ``k`` alternatives to prompt token ``i + 1`` and their logprobs.
    """

    tokens: TensorData
    logprobs: TensorData
