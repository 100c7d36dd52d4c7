"""The tiny transformer's arithmetic: frozen base weights, forward and backward passes, decoding.

Pure functions over :class:`Effective` weights (the base with the LoRA deltas merged in); the
model (:class:`~tinker_lite.local.model.tiny_lm.TinyLM`) owns the parameters, the locking and the
projection of the full-weight gradients computed here onto its LoRA adapters.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tinker_lite.local.model.kernels import (
    bmm,
    gelu,
    gelu_with_derivative,
    mm,
    mm_tn,
    rms_norm,
    rms_norm_backward,
    softmax_inplace,
)

__all__ = [
    "Arch",
    "Effective",
    "backward",
    "base_weights",
    "decode_step",
    "forward",
    "lora_key",
    "module_base_key",
]

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Arch:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_mlp: int
    context_length: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


def _stable_seed(*parts: object) -> int:
    text = "\x1f".join(str(part) for part in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:16], "little")


# The context length the weights are drawn for; a model with another one has the same weights,
# its position table cut, or extended by rows drawn apart (so checkpoints fit every length).
DRAWN_CONTEXT = 512


@functools.lru_cache(maxsize=16)
def base_weights(base_model: str, arch: Arch, dtype_name: str) -> dict[str, Array]:
    """Draw the frozen base weights; a pure function of the name and the architecture."""
    drawn = dataclasses.replace(arch, context_length=DRAWN_CONTEXT)
    rng = np.random.default_rng(
        _stable_seed("tinker-lite-tiny-lm", base_model, *vars(drawn).values())
    )
    d, f, v = arch.d_model, arch.d_mlp, arch.vocab_size
    weights: dict[str, Array] = {
        "embed": rng.standard_normal((v, d)),
        "pos": 0.5 * rng.standard_normal((DRAWN_CONTEXT, d)),
        "unembed": rng.standard_normal((d, v)) / math.sqrt(d),
    }
    extra = arch.context_length - DRAWN_CONTEXT
    if extra > 0:
        seed = _stable_seed("tinker-lite-tiny-lm-pos", base_model, *vars(drawn).values())
        more = np.random.default_rng(seed)  # row i is the same for every longer context
        weights["pos"] = np.concatenate([weights["pos"], 0.5 * more.standard_normal((extra, d))])
    weights["pos"] = weights["pos"][: arch.context_length]
    residual_scale = 1.0 / math.sqrt(2.0 * arch.n_layers)
    for layer in range(arch.n_layers):
        for name in ("q", "k", "v"):
            weights[f"{layer}.{name}"] = rng.standard_normal((d, d)) / math.sqrt(d)
        weights[f"{layer}.o"] = rng.standard_normal((d, d)) / math.sqrt(d) * residual_scale
        weights[f"{layer}.up"] = rng.standard_normal((d, f)) / math.sqrt(d)
        weights[f"{layer}.down"] = rng.standard_normal((f, d)) / math.sqrt(f) * residual_scale
    frozen: dict[str, Array] = {}
    for key, value in weights.items():
        arr = np.ascontiguousarray(value, dtype=dtype_name)
        arr.flags.writeable = False
        frozen[key] = arr
    return frozen


def module_base_key(module: str) -> str:
    """Map a PEFT module path to its base weight key (``model.layers.0.mlp.up_proj``: ``0.up``)."""
    if module == "lm_head":
        return "unembed"
    parts = module.split(".")
    return f"{parts[2]}.{parts[4].removesuffix('_proj')}"


def lora_key(module: str, which: str) -> str:
    return f"base_model.model.{module}.lora_{which}.weight"


@dataclass(frozen=True)
class Effective:
    """Base weights with the LoRA deltas merged in, laid out (in, out), for one params version."""

    embed: Array
    pos: Array
    qkv: list[Array]
    o: list[Array]
    up: list[Array]
    down: list[Array]
    unembed: Array


def forward(
    arch: Arch, eff: Effective, tokens: Array, *, record: bool, dtype: np.dtype[Any]
) -> tuple[Array, list[dict[str, Array]], list[tuple[Array, Array]]]:
    """Run the network on padded tokens (B, T): logits (B·T, V), activations, per-layer K/V.

    Right padding needs no attention mask beyond causality: real positions never attend to
    the padding after them.
    """
    batch, length = tokens.shape
    d, heads, hd = arch.d_model, arch.n_heads, arch.head_dim
    x = (eff.embed[tokens] + eff.pos[:length]).reshape(batch * length, d)
    causal = np.triu(np.full((length, length), -np.inf, dtype=dtype), k=1)
    q_scale = 1.0 / math.sqrt(hd)
    records: list[dict[str, Array]] = []
    kv: list[tuple[Array, Array]] = []
    for layer in range(arch.n_layers):
        h, h_inv = rms_norm(x)
        qkv = mm(h, eff.qkv[layer]).reshape(batch, length, 3, heads, hd)
        q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3)) * q_scale
        k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 1, 3))
        v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
        probs = bmm(q, k.transpose(0, 1, 3, 2))
        probs += causal
        softmax_inplace(probs)
        attn = bmm(probs, v).transpose(0, 2, 1, 3).reshape(batch * length, d)
        x = x + mm(attn, eff.o[layer])
        h2, h2_inv = rms_norm(x)
        u = mm(h2, eff.up[layer])
        if record:
            g, gelu_grad = gelu_with_derivative(u)
            records.append(
                {"h": h, "h_inv": h_inv, "q": q, "k": k, "v": v, "probs": probs}
                | {"attn": attn, "h2": h2, "h2_inv": h2_inv, "gelu_grad": gelu_grad, "g": g}
            )
        else:
            g = gelu(u)
        x = x + mm(g, eff.down[layer])
        kv.append((k, v))
    hf, hf_inv = rms_norm(x)
    logits = mm(hf, eff.unembed)
    if record:
        records.append({"hf": hf, "hf_inv": hf_inv})
    return logits, records, kv


def _weight_grad(
    trained: frozenset[str], module: str, x: Array, dy: Array, weight_grads: dict[str, Array]
) -> None:
    """Add dloss/dW = dyᵀ·x (out, in) of a LoRA-targeted linear map to ``weight_grads``."""
    if module in trained:
        _weight_grad_add(module, mm_tn(dy, x), weight_grads)


def _weight_grad_add(module: str, grad: Array, weight_grads: dict[str, Array]) -> None:
    if module in weight_grads:
        weight_grads[module] += grad
    else:
        weight_grads[module] = np.array(grad)


def backward(
    arch: Arch,
    eff: Effective,
    records: list[dict[str, Array]],
    dlogits: Array,
    *,
    shape: tuple[int, int],
    weight_grads: dict[str, Array],
    trained: frozenset[str],
    train_attn: bool,
    train_mlp: bool,
) -> None:
    """Accumulate the LoRA-targeted weights' gradients from dloss/dlogits (B·T, V).

    LoRA gradients are linear in the full-weight gradient G = dyᵀ·x, so one long reduction
    per module (summed over groups) replaces four thin rank-r products per module and group.
    """
    batch, length = shape
    heads, hd, d = arch.n_heads, arch.head_dim, arch.d_model
    q_scale = 1.0 / math.sqrt(hd)
    final = records[-1]
    _weight_grad(trained, "lm_head", final["hf"], dlogits, weight_grads)
    if not (train_attn or train_mlp):
        return  # only the unembedding trains: nothing below it needs a gradient
    dx = rms_norm_backward(mm(dlogits, eff.unembed.T), final["hf"], final["hf_inv"])
    for layer in range(arch.n_layers - 1, -1, -1):
        rec = records[layer]
        prefix = f"model.layers.{layer}"
        # MLP block: x += gelu(h2 W_up) W_down
        _weight_grad(trained, f"{prefix}.mlp.down_proj", rec["g"], dx, weight_grads)
        du = mm(dx, eff.down[layer].T)
        du *= rec["gelu_grad"]
        _weight_grad(trained, f"{prefix}.mlp.up_proj", rec["h2"], du, weight_grads)
        if layer == 0 and not train_attn:
            return
        dx = dx + rms_norm_backward(mm(du, eff.up[layer].T), rec["h2"], rec["h2_inv"])
        # attention block: x += attn(h W_qkv) W_o
        _weight_grad(trained, f"{prefix}.self_attn.o_proj", rec["attn"], dx, weight_grads)
        dattn = mm(dx, eff.o[layer].T).reshape(batch, length, heads, hd).transpose(0, 2, 1, 3)
        dattn = np.ascontiguousarray(dattn)
        probs = rec["probs"]
        dv = bmm(probs.transpose(0, 1, 3, 2), dattn)
        dscores = bmm(dattn, rec["v"].transpose(0, 1, 3, 2))
        dscores -= np.einsum("bhij,bhij->bhi", dscores, probs)[..., None]
        dscores *= probs
        dq = bmm(dscores, rec["k"]) * q_scale
        dk = bmm(dscores.transpose(0, 1, 3, 2), rec["q"])
        dqkv = np.stack([dq, dk, dv], axis=2)  # (B, H, 3, T, hd)
        dqkv = dqkv.transpose(0, 3, 2, 1, 4).reshape(batch * length, 3 * d)
        h = rec["h"]
        if train_attn:
            qkv_grad = mm_tn(dqkv, h)  # (3d, d): q, k, v stacked
            for index, proj in enumerate("qkv"):
                block = qkv_grad[index * d : (index + 1) * d]
                _weight_grad_add(f"{prefix}.self_attn.{proj}_proj", block, weight_grads)
        if layer == 0:
            return
        dx = dx + rms_norm_backward(mm(dqkv, eff.qkv[layer].T), h, rec["h_inv"])


def decode_step(
    arch: Arch,
    eff: Effective,
    caches: list[tuple[Array, Array]],
    chosen: Array,
    position: int,
) -> Array:
    """Feed one token per sample (``chosen``) at ``position``; return the next logits (S, V).

    ``caches`` holds each layer's K/V cache (S, H, cache_len, hd), written at ``position``.
    """
    num_samples = chosen.shape[0]
    heads, hd, d = arch.n_heads, arch.head_dim, arch.d_model
    q_scale = 1.0 / math.sqrt(hd)
    x = eff.embed[chosen] + eff.pos[position]
    for layer, (k_cache, v_cache) in enumerate(caches):
        h, _ = rms_norm(x)
        qkv = mm(h, eff.qkv[layer]).reshape(num_samples, 3, heads, hd)
        k_cache[:, :, position] = qkv[:, 1]
        v_cache[:, :, position] = qkv[:, 2]
        q = qkv[:, 0, :, None, :] * q_scale  # (S, H, 1, hd)
        scores = bmm(q, k_cache[:, :, : position + 1].transpose(0, 1, 3, 2))
        softmax_inplace(scores)
        attn = bmm(scores, v_cache[:, :, : position + 1]).reshape(num_samples, d)
        x = x + mm(attn, eff.o[layer])
        h2, _ = rms_norm(x)
        g = gelu(mm(h2, eff.up[layer]))
        x = x + mm(g, eff.down[layer])
    hf, _ = rms_norm(x)
    return mm(hf, eff.unembed)
