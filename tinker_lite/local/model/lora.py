"""The LoRA adapters of the tiny model: where they go, their start, PEFT config and merging.

docs/service.rst §6: every targeted linear map ``y = x W`` becomes ``y = x W + s·(x Aᵀ) Bᵀ`` with
``A`` of shape (rank, in) and ``B`` of shape (out, rank), the PEFT layout.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from tinker_lite.local.model import network
from tinker_lite.local.model.errors import UserInputError
from tinker_lite.local.model.kernels import mm

__all__ = [
    "LORA_ALPHA",
    "check_state",
    "init_lora",
    "lora_config",
    "merged_weights",
    "project_grads",
    "target_modules",
]

Array = npt.NDArray[Any]

LORA_ALPHA = 32


def target_modules(
    arch: network.Arch, *, train_attn: bool, train_mlp: bool, train_unembed: bool
) -> list[str]:
    """The PEFT names of the linear maps that carry an adapter."""
    modules: list[str] = []
    for layer in range(arch.n_layers):
        if train_attn:
            modules += [f"model.layers.{layer}.self_attn.{p}_proj" for p in "qkvo"]
        if train_mlp:
            modules += [f"model.layers.{layer}.mlp.{p}_proj" for p in ("up", "down")]
    if train_unembed:
        modules.append("lm_head")
    return modules


def init_lora(
    modules: list[str],
    base: Mapping[str, Array],
    *,
    rank: int,
    seed: int | None,
    dtype: np.dtype[Any],
) -> dict[str, Array]:
    """``A`` uniform in ±1/√in (drawn from the LoRA seed, 0 when none), ``B`` zero."""
    lora_seed = 0 if seed is None else int(seed) % (1 << 64)
    rng = np.random.default_rng(np.random.SeedSequence([lora_seed, 0x4C6F5241]))
    params: dict[str, Array] = {}
    for module in modules:
        d_in, d_out = base[network.module_base_key(module)].shape
        bound = 1.0 / math.sqrt(d_in)
        params[network.lora_key(module, "A")] = rng.uniform(-bound, bound, (rank, d_in)).astype(
            dtype
        )
        params[network.lora_key(module, "B")] = np.zeros((d_out, rank), dtype=dtype)
    return params


def lora_config(
    modules: list[str],
    *,
    base_model: str,
    rank: int,
    seed: int | None,
    train_attn: bool,
    train_mlp: bool,
    train_unembed: bool,
) -> dict[str, object]:
    """Describe the adapter for ``adapter_config.json`` (PEFT keys plus Tinker's flags)."""
    short_names = []
    for name in ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head"):
        if any(module.endswith(name) for module in modules):
            short_names.append(name)
    return {
        "base_model_name_or_path": base_model,
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": LORA_ALPHA,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "target_modules": short_names,
        "rank": rank,
        "seed": seed,
        "train_attn": train_attn,
        "train_mlp": train_mlp,
        "train_unembed": train_unembed,
    }


def check_state(
    what: str,
    state: Mapping[str, Array],
    expected: Mapping[str, Array],
    *,
    rank: int,
    dtype: np.dtype[Any],
) -> dict[str, Array]:
    """``state`` as arrays of ``dtype``, when its keys and shapes are those of ``expected``."""
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise UserInputError(
            f"{what} state does not match this model's LoRA config "
            f"(rank {rank}): missing {missing[:3]}, unexpected {extra[:3]}"
        )
    loaded: dict[str, Array] = {}
    for key, reference in expected.items():
        arr = np.asarray(state[key])
        if arr.shape != reference.shape:
            raise UserInputError(
                f"{what} state {key!r} has shape {arr.shape}, expected {reference.shape}"
            )
        if arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
            raise UserInputError(f"NonFiniteInTensor: {what} state {key!r} is not finite")
        loaded[key] = np.array(arr, dtype=dtype)
    return loaded


def merged_weights(
    arch: network.Arch, base: Mapping[str, Array], params: Mapping[str, Array], scale: float
) -> network.Effective:
    """The weights the network runs with: each base weight plus its adapter's ``s·Aᵀ·Bᵀ``."""

    def merged(module: str) -> Array:
        weight = base[network.module_base_key(module)]
        a_key = network.lora_key(module, "A")
        if a_key not in params:
            return weight
        delta = mm(params[a_key].T, params[network.lora_key(module, "B")].T)
        return np.ascontiguousarray(weight + scale * delta)

    n = arch.n_layers
    attn = [[merged(f"model.layers.{i}.self_attn.{p}_proj") for p in "qkvo"] for i in range(n)]
    return network.Effective(
        embed=base["embed"],
        pos=base["pos"],
        qkv=[np.ascontiguousarray(np.concatenate(a[:3], axis=1)) for a in attn],
        o=[a[3] for a in attn],
        up=[merged(f"model.layers.{i}.mlp.up_proj") for i in range(n)],
        down=[merged(f"model.layers.{i}.mlp.down_proj") for i in range(n)],
        unembed=merged("lm_head"),
    )


def project_grads(
    weight_grads: Mapping[str, Array],
    params: Mapping[str, Array],
    grads: dict[str, Array],
    scale: float,
) -> None:
    """Project full-weight gradients G onto LoRA: dB = s·G·Aᵀ, dA = s·Bᵀ·G."""
    for module, weight_grad in weight_grads.items():
        a_key, b_key = network.lora_key(module, "A"), network.lora_key(module, "B")
        grads[b_key] += scale * mm(weight_grad, params[a_key].T)
        grads[a_key] += scale * mm(params[b_key].T, weight_grad)
