"""``ModelData`` and ``GetInfoResponse`` (official module ``tinker.types.get_info_response``)."""

from __future__ import annotations

import attrs

from .optimizer import AdamOptimizerConfig, DimuonOptimizerConfig


@attrs.frozen(kw_only=True)
class ModelData:
    """Architecture and tokenizer of a model."""

    arch: str | None = None
    model_name: str | None = None
    tokenizer_id: str | None = None


@attrs.frozen(kw_only=True)
class GetInfoResponse:
    """Result of get_info."""

    model_id: str
    model_data: ModelData = attrs.field(factory=ModelData)
    is_lora: bool | None = None
    lora_rank: int | None = None
    model_name: str | None = None
    optimizer_config: AdamOptimizerConfig | DimuonOptimizerConfig = attrs.field(
        factory=AdamOptimizerConfig
    )
    type: str | None = None
