"""``CreateModelRequest`` (official module ``tinker.types.create_model_request``)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_int, _check_mapping, _check_str, _set
from .lora_config import LoraConfig
from .optimizer import optimizer_config_dict


def _adamw() -> dict[str, Any]:
    return {"type": "adamw"}


@attrs.frozen(kw_only=True)
class CreateModelRequest:
    """POST /api/v1/create_model."""

    session_id: str
    model_seq_id: int
    base_model: str
    user_metadata: dict[str, Any] | None = None
    lora_config: LoraConfig | None = None
    # 0.38 always sends the optimizer, AdamW by default (docs/protocol.rst §3.1). Kept as its
    # wire dict; an AdamOptimizerConfig / DimuonOptimizerConfig is accepted and converted.
    optimizer_config: dict[str, Any] | None = attrs.field(
        factory=_adamw, converter=optimizer_config_dict
    )
    type: Literal["create_model"] = attrs.field(default="create_model", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("session_id", self.session_id)
        _check_int("model_seq_id", self.model_seq_id, minimum=0)
        _check_str("base_model", self.base_model, hint="e.g. 'Qwen/Qwen3-8B'")
        if self.user_metadata is not None:
            _set(self, "user_metadata", _check_mapping("user_metadata", self.user_metadata))
        if self.lora_config is not None and not isinstance(self.lora_config, LoraConfig):
            raise InvalidInputError("lora_config", "must be a LoraConfig")
