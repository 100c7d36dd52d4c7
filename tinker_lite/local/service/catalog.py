"""The base models the local server serves, their LoRA settings, and how their tiny LM is built.

Every listed name maps to :class:`~tinker_lite.local.model.tiny_lm.TinyLM`; any other name is
refused the way the service refuses it, with the list (docs/service.rst §6).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tinker_lite.local.model import tiny_lm as model_mod
from tinker_lite.local.model.vocab import token_space
from tinker_lite.local.refusals import InvalidRequest

__all__ = ["MODELS_ENV", "SUPPORTED_MODELS", "Catalog", "LoraSpec", "registered_models"]

# Names listed by get_server_capabilities and accepted as base_model, each served by TinyLM: the
# tiny model's own name and the service's lineup, today's included (docs/service.rst §6, "Today's
# lineup"). Any other name is refused like the service refuses it, with the list; more names are
# registered with ``models=`` / ``serve --model`` / $TINKER_LITE_LOCAL_MODELS (comma-separated).
SUPPORTED_MODELS = (
    "tinker-lite/tiny-64",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-8B-Base",
    "Qwen/Qwen3-4B-Instruct-2507",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-30B-A3B-Base",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "Qwen/Qwen3-VL-235B-A22B-Instruct",
    "Qwen/Qwen3.5-4B",
    "Qwen/Qwen3.5-9B",
    "Qwen/Qwen3.5-9B-Base",
    "Qwen/Qwen3.5-27B",
    "Qwen/Qwen3.5-35B-A3B",
    "Qwen/Qwen3.5-35B-A3B-Base",
    "Qwen/Qwen3.5-397B-A17B",
    "Qwen/Qwen3.6-27B",
    "Qwen/Qwen3.6-35B-A3B",
    "Qwen/Qwen3.8-27B",
    "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B",
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct",
    "deepseek-ai/DeepSeek-V3.1",
    "deepseek-ai/DeepSeek-V3.1-Base",
    "moonshotai/Kimi-K2-Thinking",
    "moonshotai/Kimi-K2.5",
    "moonshotai/Kimi-K2.6",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
)
MODELS_ENV = "TINKER_LITE_LOCAL_MODELS"


def registered_models(extra: Sequence[str] = ()) -> tuple[str, ...]:
    """SUPPORTED_MODELS plus ``extra`` and the names in $TINKER_LITE_LOCAL_MODELS, in order."""
    from_env = [n.strip() for n in os.environ.get(MODELS_ENV, "").split(",") if n.strip()]
    return tuple(dict.fromkeys([*SUPPORTED_MODELS, *extra, *from_env]))


@dataclass(frozen=True)
class LoraSpec:
    """The LoRA settings a model was created with."""

    rank: int = 32
    seed: int | None = None
    train_unembed: bool = True
    train_mlp: bool = True
    train_attn: bool = True

    def info(self, base_model: str) -> dict[str, Any]:
        """As stored beside a checkpoint (what weights_info and from-state creation read)."""
        return {
            "base_model": base_model,
            "lora_rank": self.rank,
            "seed": self.seed,
            "train_unembed": self.train_unembed,
            "train_mlp": self.train_mlp,
            "train_attn": self.train_attn,
        }

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> LoraSpec:
        """Read the LoRA settings stored beside a checkpoint."""
        seed = info.get("seed")
        return cls(
            rank=int(info.get("lora_rank", 32)),
            seed=None if seed is None else int(seed),
            train_unembed=bool(info.get("train_unembed", True)),
            train_mlp=bool(info.get("train_mlp", True)),
            train_attn=bool(info.get("train_attn", True)),
        )

    def check(self) -> None:
        """Refuse a bad LoRA config with the service's 400s (docs/service.rst §6)."""
        if self.rank <= 0:
            raise InvalidRequest("lora_config.rank must be positive")
        if self.rank & (self.rank - 1):
            raise InvalidRequest("lora_config.rank must be a power of 2")
        if not (self.train_unembed or self.train_mlp or self.train_attn):
            raise InvalidRequest(
                "At least one of train_unembed, train_mlp, or train_attn must be True"
            )


class Catalog:
    """The served base model names, and the builder of their LMs (TinyLM or its instant stub)."""

    def __init__(
        self,
        models: Sequence[str] = (),
        *,
        stub_model: bool = False,
        context_length: int = model_mod.CONTEXT_LENGTH,
    ) -> None:
        self.names = registered_models(models)
        self.stub_model = stub_model
        self.context_length = context_length

    def check(self, base_model: str) -> None:
        """Refuse a base_model this server does not serve, listing the ones it does."""
        if base_model not in self.names:
            raise InvalidRequest(
                f"Unknown base_model {base_model!r}: model names are case-sensitive. "
                f"Supported models: {', '.join(self.names)}. (The local server serves every "
                f"listed name with its tiny model; register another with `serve --model NAME`, "
                f"LocalServer(models=[...]) or ${MODELS_ENV}.)",
            )

    def make_lm(
        self, base_model: str, lora: LoraSpec, optimizer: str = "adamw"
    ) -> model_mod.TinyLM:
        """Build the model behind ``base_model`` (TinyLM, or its instant stub) and its optimizer."""
        build = model_mod.TinyLM.stub if self.stub_model else model_mod.TinyLM
        return build(
            base_model,
            rank=lora.rank,
            seed=lora.seed,
            train_attn=lora.train_attn,
            train_mlp=lora.train_mlp,
            train_unembed=lora.train_unembed,
            optimizer=optimizer,
            token_space=token_space(base_model),
            context_length=self.context_length,
        )

    @staticmethod
    def tokenizer_id(base_model: str) -> str:
        """The tokenizer ``get_info`` names for ``base_model``: the service's (vocab.py)."""
        return token_space(base_model).tokenizer_id
