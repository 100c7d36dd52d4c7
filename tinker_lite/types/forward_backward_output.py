"""``ForwardBackwardOutput`` (official module ``tinker.types.forward_backward_output``)."""

from __future__ import annotations

import attrs

from .tensor_data import TensorData


@attrs.frozen
class ForwardBackwardOutput:
    """Result of forward / forward_backward: per-datum outputs (e.g. ``logprobs``) and metrics."""

    loss_fn_output_type: str
    loss_fn_outputs: list[dict[str, TensorData]]
    metrics: dict[str, float]
