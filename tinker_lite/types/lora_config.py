"""``LoraConfig`` (official module ``tinker.types.lora_config``)."""

from __future__ import annotations

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_bool, _check_int, _check_opt_int, _set


@attrs.frozen
class LoraConfig:
    """LoRA settings of a training run."""

    rank: int = 32
    seed: int | None = None
    train_unembed: bool = True
    train_mlp: bool = True
    train_attn: bool = True

    def __attrs_post_init__(self) -> None:
        _set(self, "rank", _check_int("rank", self.rank, minimum=1, hint="use e.g. rank=32"))
        _set(self, "seed", _check_opt_int("seed", self.seed))
        for name in ("train_unembed", "train_mlp", "train_attn"):
            _set(self, name, _check_bool(name, getattr(self, name)))
        if not (self.train_unembed or self.train_mlp or self.train_attn):
            raise InvalidInputError(
                "train_unembed/train_mlp/train_attn",
                "all are False, so nothing would be trained",
                "set at least one of them to True",
            )
