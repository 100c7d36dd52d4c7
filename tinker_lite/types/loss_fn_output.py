"""``LossFnOutput`` (official module ``tinker.types.loss_fn_output``)."""

from __future__ import annotations

from typing import TypeAlias

from .tensor_data import TensorData

__all__ = ["LossFnOutput"]

# One datum's outputs of forward / forward_backward, e.g. {"logprobs": TensorData}.
LossFnOutput: TypeAlias = dict[str, TensorData]
