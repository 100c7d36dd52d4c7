"""``WeightsInfoResponse`` (official module ``tinker.types.weights_info_response``)."""

from __future__ import annotations

import attrs

from .optimizer import AdamOptimizerConfig, DimuonOptimizerConfig


@attrs.frozen(kw_only=True)
class WeightsInfoResponse:
    """What a checkpoint holds: base model and LoRA settings."""

    base_model: str
    is_lora: bool
    lora_rank: int | None = None
    train_unembed: bool | None = None
    train_mlp: bool | None = None
    train_attn: bool | None = None
    optimizer_config: AdamOptimizerConfig | DimuonOptimizerConfig = attrs.field(
        factory=AdamOptimizerConfig
    )
