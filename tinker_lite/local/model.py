"""A tiny decoder-only transformer in numpy that really trains (LoRA + AdamW) and samples.

The offline server backs every base model with :class:`TinyLM`: a 2-layer, 4-head, d_model 64
transformer over the shipped byte-level tokenizer (ids 0..255 are bytes, then ``<|bos|>``,
``<|eos|>``, ``<|pad|>``), with a context of 512 tokens. The base weights are a deterministic
function of the base model name; only LoRA adapters train, with the losses of SERVER.md §1 and the
AdamW update of SERVER.md §4. Sampling follows SERVER.md §5 and uses a KV cache.

Architecture (pre-norm, no biases): token + learned position embeddings; per layer
``x += Wo·attn(RMSNorm(x))`` and ``x += W_down·gelu(W_up·RMSNorm(x))`` (tanh GELU, hidden 4·d);
a final RMSNorm, then an untied unembedding. RMSNorm has no gain (the base is frozen anyway).

LoRA (SERVER.md §6): every targeted linear map ``y = x W`` becomes ``y = x W + s·(x Aᵀ) Bᵀ``
with ``A`` of shape (rank, in), ``B`` of shape (out, rank) — the PEFT layout, so
:meth:`TinyLM.adapter_state` can be written to ``adapter_model.safetensors`` as is. ``A`` starts
uniform in ±1/√in (drawn from the LoRA seed, 0 when none is given), ``B`` starts at zero, and
``s = LORA_ALPHA / rank`` with ``LORA_ALPHA = 32``. Targets: q/k/v/o projections (``train_attn``),
MLP up/down (``train_mlp``) and the unembedding ``lm_head`` (``train_unembed``).

Where the spec leaves a choice open: cross_entropy without ``weights`` weighs every token 1;
dro's ``beta`` defaults to 0.05; dro accepts ``reference: "sampler"`` (what the 0.38 SDK may send)
and ignores it, since its reference policy always is the sampler's (the ``logprobs`` input);
unknown loss_fn_config keys or string values and extra loss_fn_inputs keys are user errors; EOS
stops sampling unless a stop list is explicitly empty.

Thread safety: mutating calls (forward_backward, optim_step, load_*, reset_optimizer) serialise on
an internal lock; :meth:`TinyLM.sample` reads a snapshot of the weights and may run concurrently.
All compute stays on one core per call (see ``_mm``), so concurrent calls scale across cores.
"""

from __future__ import annotations

import functools
import hashlib
import math
import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "BOS_TOKEN_ID",
    "CONTEXT_LENGTH",
    "DEFAULT_DRO_BETA",
    "EOS_TOKEN_ID",
    "LORA_ALPHA",
    "LOSS_FUNCTIONS",
    "PAD_TOKEN_ID",
    "TOKENIZER_ID",
    "VOCAB_SIZE",
    "DatumArrays",
    "SampleResult",
    "SampledSeq",
    "TinyLM",
    "UserInputError",
    "load_tokenizer",
    "tokenizer_path",
]

Array = npt.NDArray[Any]

TOKENIZER_ID: Final = "tinker-lite/byte-tokenizer"
VOCAB_SIZE: Final = 259
BOS_TOKEN_ID: Final = 256
EOS_TOKEN_ID: Final = 257
PAD_TOKEN_ID: Final = 258
CONTEXT_LENGTH: Final = 512
LORA_ALPHA: Final = 32
DEFAULT_DRO_BETA: Final = 0.05

_RMS_EPS: Final = 1e-5
_GELU_C: Final = math.sqrt(2.0 / math.pi)
_STUB_TOKEN_ID: Final = ord("x")
# Training runs in groups of similar-length datums (within a factor 2), padded to the group's
# longest one. Small groups keep every activation in cache; a longer datum is a group of its own.
_GROUP_MAX_TOKENS: Final = 256

# SERVER.md §1: the documented inputs per loss (required, optional) and loss_fn_config keys.
_RL_INPUTS: Final = ("target_tokens", "logprobs", "advantages")
_LOSS_INPUTS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "cross_entropy": (("target_tokens",), ("weights",)),
    "importance_sampling": (_RL_INPUTS, ()),
    "ppo": (_RL_INPUTS, ()),
    "cispo": (_RL_INPUTS, ()),
    "dro": (_RL_INPUTS, ()),
}
_LOSS_CONFIG_DEFAULTS: Final[dict[str, dict[str, float]]] = {
    "cross_entropy": {},
    "importance_sampling": {},
    # SERVER.md §1.3: absolute ratio bounds, default 0.8 / 1.2.
    "ppo": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2},
    # SERVER.md §1.4: one-sided default 0.0 / 4.0.
    "cispo": {"clip_low_threshold": 0.0, "clip_high_threshold": 4.0},
    # SERVER.md §1.5: the default beta is undocumented; 0.05 is the documented example.
    "dro": {"beta": DEFAULT_DRO_BETA},
}
# String-valued loss_fn_config keys (WIRE.md §13.7: loss_fn_config_v2 "text") and the values the
# model implements; they select behaviour but change no number.
_LOSS_CONFIG_TEXT: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    # SERVER.md §1.5: q, the sampler's logprobs, is dro's reference policy
    "dro": {"reference": ("sampler",)},
}
LOSS_FUNCTIONS: Final = tuple(_LOSS_INPUTS)


class UserInputError(ValueError):
    """Bad user input; the server reports it as a failed future with category "user"."""


@dataclass(frozen=True, eq=False)
class DatumArrays:
    """One training datum as arrays: the model input tokens and its ``loss_fn_inputs``.

    ``tokens`` is int64 of shape (N,); ``inputs`` maps each loss input name to an array whose first
    dimension is N (``target_tokens`` int64 (N,) or (N, K); float32 for the others).
    """

    tokens: Array
    inputs: dict[str, Array]


@dataclass(frozen=True)
class SampledSeq:
    """One sampled continuation: its tokens, their logprobs, and why it ended."""

    tokens: list[int]
    logprobs: list[float]
    stop_reason: str  # "stop" | "length"


@dataclass(frozen=True)
class SampleResult:
    """The result of :meth:`TinyLM.sample`."""

    sequences: list[SampledSeq]
    prompt_logprobs: list[float | None] | None
    topk_prompt_logprobs: list[list[tuple[int, float]] | None] | None


def tokenizer_path() -> Path:
    """Return the path of the shipped ``tokenizer.json``."""
    return Path(__file__).with_name("tokenizer.json")


@functools.lru_cache(maxsize=1)
def load_tokenizer() -> Tokenizer:
    """Load the shipped byte-level tokenizer (offline, cached)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_path()))


# ---------------------------------------------------------------------------------------------
# Weights


@dataclass(frozen=True)
class _Arch:
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


@functools.lru_cache(maxsize=16)
def _base_weights(base_model: str, arch: _Arch, dtype_name: str) -> dict[str, Array]:
    """Draw the frozen base weights; a pure function of the name and the architecture."""
    rng = np.random.default_rng(
        _stable_seed("tinker-lite-tiny-lm", base_model, *vars(arch).values())
    )
    d, f, v = arch.d_model, arch.d_mlp, arch.vocab_size
    weights: dict[str, Array] = {
        "embed": rng.standard_normal((v, d)),
        "pos": 0.5 * rng.standard_normal((arch.context_length, d)),
        "unembed": rng.standard_normal((d, v)) / math.sqrt(d),
    }
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


def _module_base_key(module: str) -> str:
    """Map a PEFT module path to its base weight key (``model.layers.0.mlp.up_proj``: ``0.up``)."""
    if module == "lm_head":
        return "unembed"
    parts = module.split(".")
    return f"{parts[2]}.{parts[4].removesuffix('_proj')}"


def _lora_key(module: str, which: str) -> str:
    return f"base_model.model.{module}.lora_{which}.weight"


@dataclass(frozen=True)
class _Effective:
    """Base weights with the LoRA deltas merged in, laid out (in, out), for one params version."""

    embed: Array
    pos: Array
    qkv: list[Array]
    o: list[Array]
    up: list[Array]
    down: list[Array]
    unembed: Array


# ---------------------------------------------------------------------------------------------
# Numerics


def _rms_norm(x: Array) -> tuple[Array, Array]:
    inv = 1.0 / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + _RMS_EPS)
    return x * inv, inv


def _rms_norm_backward(dy: Array, y: Array, inv: Array) -> Array:
    mean_dy_y = np.mean(dy * y, axis=-1, keepdims=True)
    result: Array = inv * (dy - y * mean_dy_y)
    return result


def _gelu_parts(u: Array) -> tuple[Array, Array, Array]:
    """Return (gelu(u), t, u²) for the tanh approximation, where t = tanh(c·(u + 0.044715·u³))."""
    u_sq = u * u
    t = u_sq * 0.044715
    t += 1.0
    t *= u
    t *= _GELU_C
    np.tanh(t, out=t)
    g = t + 1.0
    g *= u
    g *= 0.5
    return g, t, u_sq


def _gelu(u: Array) -> Array:
    return _gelu_parts(u)[0]


def _gelu_with_derivative(u: Array) -> tuple[Array, Array]:
    """Return gelu(u) and d gelu/du, reusing the forward's buffers (in place)."""
    g, t, u_sq = _gelu_parts(u)
    # d/du = 0.5(1 + t) + 0.5·u·(1 - t²)·c·(1 + 3·0.044715·u²)
    u_sq *= 3.0 * 0.044715 * _GELU_C
    u_sq += _GELU_C
    second = t * t
    np.subtract(1.0, second, out=second)
    second *= u
    second *= u_sq
    second *= 0.5
    t += 1.0
    t *= 0.5
    t += second
    return g, t


def _log_softmax(logits: Array) -> Array:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    result: Array = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return result


def _softmax_inplace(scores: Array) -> Array:
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return scores


# ---------------------------------------------------------------------------------------------
# Matrix products that stay single-threaded inside OpenBLAS
#
# OpenBLAS runs one GEMM on one thread when M·N·K is small and spreads larger ones over every
# core. On a busy machine those threads wait on each other for whole scheduler slices and a
# training step becomes several times slower than on one core, so every product here is cut
# into stacked GEMMs below that size: numpy runs the stack in one C loop, each on one thread.

_SINGLE_THREAD_MNK: Final = 1 << 18
_PARTIAL_SUM_ELEMENTS: Final = 1 << 19


def _mm(a: Array, b: Array) -> Array:
    """Return ``a @ b`` for a (n, k) and b (k, m), as stacked single-threaded GEMMs."""
    n, k = a.shape
    m = b.shape[1]
    rows = max(1, _SINGLE_THREAD_MNK // (k * m))
    if n <= rows:
        result: Array = a @ b
        return result
    out = np.empty((n, m), dtype=np.result_type(a.dtype, b.dtype))
    main = n - n % rows
    np.matmul(
        a[:main].reshape(main // rows, rows, k), b, out=out[:main].reshape(main // rows, rows, m)
    )
    if main < n:
        np.matmul(a[main:], b, out=out[main:])
    return out


def _mm_tn(a: Array, b: Array) -> Array:
    """Return ``a.T @ b`` for a (n, m) and b (n, k): stacked GEMMs over row blocks, then summed."""
    n, m = a.shape
    k = b.shape[1]
    rows = max(1, _SINGLE_THREAD_MNK // (m * k))
    if n <= rows:
        result: Array = a.T @ b
        return result
    chunks = n // rows
    main = chunks * rows
    a_blocks = a[:main].reshape(chunks, rows, m).transpose(0, 2, 1)
    b_blocks = b[:main].reshape(chunks, rows, k)
    step = max(1, _PARTIAL_SUM_ELEMENTS // (m * k))
    out = np.zeros((m, k), dtype=np.result_type(a.dtype, b.dtype))
    for start in range(0, chunks, step):
        out += np.matmul(a_blocks[start : start + step], b_blocks[start : start + step]).sum(axis=0)
    if main < n:
        out += a[main:].T @ b[main:]
    return out


def _bmm(a: Array, b: Array) -> Array:
    """Return ``a @ b`` for stacks of matrices (attention), splitting rows of large products."""
    rows_a, inner = a.shape[-2:]
    cols = b.shape[-1]
    rows = max(1, _SINGLE_THREAD_MNK // (inner * cols))
    if rows_a <= rows:
        result: Array = a @ b
        return result
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), rows_a, cols)
    out = np.empty(shape, dtype=np.result_type(a.dtype, b.dtype))
    for start in range(0, rows_a, rows):
        np.matmul(a[..., start : start + rows, :], b, out=out[..., start : start + rows, :])
    return out


# ---------------------------------------------------------------------------------------------
# Validation


def _as_int_tokens(values: Any, what: str, vocab_size: int, where: str) -> Array:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and arr.size and not np.all(np.isfinite(arr)):
            raise UserInputError(f"NonFiniteInTensor: {what} contains NaN or Inf{where}")
        if arr.dtype.kind not in "fb" and arr.size:
            raise UserInputError(
                f"{what} must hold integer token ids, got dtype {arr.dtype}{where}"
            )
        if arr.size and not np.array_equal(arr, np.round(arr)):
            raise UserInputError(f"{what} must hold integer token ids{where}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise UserInputError(
                f"{what} contains token id {bad}, outside the vocabulary [0, {vocab_size}){where}"
            )
    return arr


def _check_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise UserInputError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise UserInputError(f"NonFiniteInTensor: {name} must be finite, got {number}")
    return number


def _resolve_loss_config(
    loss_fn: str, config: Mapping[str, float | str] | None
) -> dict[str, float]:
    defaults = _LOSS_CONFIG_DEFAULTS[loss_fn]
    texts = _LOSS_CONFIG_TEXT.get(loss_fn, {})
    resolved = dict(defaults)
    for key, value in (config or {}).items():
        if key in texts:
            if value not in texts[key]:
                raise UserInputError(
                    f"loss_fn_config[{key!r}] must be one of {list(texts[key])} for loss "
                    f"{loss_fn}, got {value!r}"
                )
            continue
        if key not in defaults:
            expected = sorted([*defaults, *texts]) or "no keys"
            raise UserInputError(
                f"unexpected loss_fn_config key {key!r} for loss {loss_fn}; expected {expected}"
            )
        resolved[key] = _check_number(f"loss_fn_config[{key!r}]", value)
    if "clip_low_threshold" in resolved:
        low, high = resolved["clip_low_threshold"], resolved["clip_high_threshold"]
        if low > high:
            raise UserInputError(
                f"loss_fn_config clip_low_threshold ({low}) must not exceed "
                f"clip_high_threshold ({high})"
            )
    return resolved


@dataclass(frozen=True, eq=False)
class _Prepared:
    """A validated datum: tokens (N,), targets (N, K), float inputs (N, K) or (N,)."""

    tokens: Array
    targets: Array
    two_dim: bool
    floats: dict[str, Array]


# ---------------------------------------------------------------------------------------------
# Losses (SERVER.md §1): per-token loss and its derivative with respect to the target logprobs.


def _token_losses(
    loss_fn: str, lp: Array, floats: Mapping[str, Array], config: Mapping[str, float]
) -> tuple[Array, Array]:
    """Return (elementwise loss (M,), dloss/dlp shaped like lp (M, K)); float64 throughout.

    An extreme importance ratio (sampler logprobs far below the model's) overflows to inf and
    the loss becomes non-finite, as it would in torch; no warning is raised for it.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return _token_losses_unchecked(loss_fn, lp, floats, config)


def _token_losses_unchecked(
    loss_fn: str, lp: Array, floats: Mapping[str, Array], config: Mapping[str, float]
) -> tuple[Array, Array]:
    if loss_fn == "cross_entropy":
        weights = floats["weights"]
        return -(lp * weights).sum(axis=1), -weights
    logp = lp[:, 0]
    sampler_lp, adv = floats["logprobs"], floats["advantages"]
    if loss_fn == "dro":
        # SERVER.md §1.5: loss = -(lp·A - ½β(lp-q)²)
        beta = config["beta"]
        diff = logp - sampler_lp
        loss = -(logp * adv - 0.5 * beta * diff * diff)
        grad = -(adv - beta * diff)
        return loss, grad[:, None]
    ratio = np.exp(logp - sampler_lp)
    if loss_fn == "importance_sampling":
        # SERVER.md §1.2: loss = -r·A
        return -ratio * adv, (-adv * ratio)[:, None]
    low, high = config["clip_low_threshold"], config["clip_high_threshold"]
    clipped = np.clip(ratio, low, high)
    if loss_fn == "ppo":
        # SERVER.md §1.3: loss = -min(r·A, clamp(r)·A); no gradient through the clipped branch.
        unclipped_obj, clipped_obj = ratio * adv, clipped * adv
        loss = -np.minimum(unclipped_obj, clipped_obj)
        grad = np.where(unclipped_obj <= clipped_obj, -adv * ratio, 0.0)
        return loss, grad[:, None]
    # SERVER.md §1.4 cispo: loss = -stopgrad(clamp(r))·lp·A
    return -clipped * logp * adv, (-clipped * adv)[:, None]


# ---------------------------------------------------------------------------------------------
# The model


class TinyLM:
    """A tiny numpy transformer with LoRA adapters, for the offline Tinker server.

    :param base_model: any name; the frozen base weights are derived from its SHA-256.
    :param rank: the LoRA rank (> 0).
    :param seed: the LoRA init seed (None means 0, so the default init is reproducible).
    :param train_attn, train_mlp, train_unembed: where LoRA adapters go (at least one).
    The keyword-only architecture arguments exist for tests (e.g. ``dtype=np.float64`` for
    finite-difference gradient checks); the server uses the defaults.
    """

    base_model: str
    rank: int
    vocab_size: int
    context_length: int

    def __init__(
        self,
        base_model: str,
        *,
        rank: int = 32,
        seed: int | None = None,
        train_attn: bool = True,
        train_mlp: bool = True,
        train_unembed: bool = True,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_mlp: int | None = None,
        context_length: int = CONTEXT_LENGTH,
        dtype: npt.DTypeLike = np.float32,
    ) -> None:
        if not isinstance(base_model, str) or not base_model:
            raise UserInputError("base_model is required")
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank <= 0:
            raise UserInputError(f"lora_config.rank must be positive, got {rank!r}")
        if not (train_attn or train_mlp or train_unembed):
            raise UserInputError(
                "At least one of train_unembed, train_mlp, or train_attn must be True"
            )
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.base_model = base_model
        self.rank = int(rank)
        self.seed = seed
        self.train_attn = bool(train_attn)
        self.train_mlp = bool(train_mlp)
        self.train_unembed = bool(train_unembed)
        self.vocab_size = VOCAB_SIZE
        self.context_length = int(context_length)
        self._dtype = np.dtype(dtype)
        self._arch = _Arch(
            vocab_size=VOCAB_SIZE,
            d_model=d_model,
            n_layers=n_layers,
            n_heads=n_heads,
            d_mlp=4 * d_model if d_mlp is None else d_mlp,
            context_length=self.context_length,
        )
        self._scale = LORA_ALPHA / self.rank
        self._stub = False
        self._lock = threading.RLock()
        self._base = _base_weights(base_model, self._arch, self._dtype.name)
        self._modules = self._target_modules()
        self._module_set = frozenset(self._modules)
        self._params = self._init_lora()
        self._grads = {key: np.zeros_like(value) for key, value in self._params.items()}
        self._exp_avg: dict[str, Array] = {}
        self._exp_avg_sq: dict[str, Array] = {}
        self._step = 0
        self._effective_cache: _Effective | None = None

    @classmethod
    def stub(
        cls,
        base_model: str,
        *,
        rank: int = 32,
        seed: int | None = None,
        train_attn: bool = True,
        train_mlp: bool = True,
        train_unembed: bool = True,
    ) -> TinyLM:
        """Return an instant variant for benchmarks: no network runs.

        Inputs are validated as usual. Sampling returns ``max_tokens`` copies of one fixed token
        (``"x"``) with logprob 0 (stopping early only when "x" is a stop token or completes a stop
        string); forward_backward reports every logprob as 0 and accumulates no gradient;
        the adapter and optimizer state behave as in the real model.
        """
        model = cls(
            base_model,
            rank=rank,
            seed=seed,
            train_attn=train_attn,
            train_mlp=train_mlp,
            train_unembed=train_unembed,
        )
        model._stub = True
        return model

    # -- configuration -------------------------------------------------------------------------

    def _target_modules(self) -> list[str]:
        modules: list[str] = []
        for layer in range(self._arch.n_layers):
            if self.train_attn:
                modules += [f"model.layers.{layer}.self_attn.{p}_proj" for p in "qkvo"]
            if self.train_mlp:
                modules += [f"model.layers.{layer}.mlp.{p}_proj" for p in ("up", "down")]
        if self.train_unembed:
            modules.append("lm_head")
        return modules

    def _init_lora(self) -> dict[str, Array]:
        lora_seed = 0 if self.seed is None else int(self.seed) % (1 << 64)
        rng = np.random.default_rng(np.random.SeedSequence([lora_seed, 0x4C6F5241]))
        params: dict[str, Array] = {}
        for module in self._modules:
            d_in, d_out = self._base[_module_base_key(module)].shape
            bound = 1.0 / math.sqrt(d_in)
            params[_lora_key(module, "A")] = rng.uniform(-bound, bound, (self.rank, d_in)).astype(
                self._dtype
            )
            params[_lora_key(module, "B")] = np.zeros((d_out, self.rank), dtype=self._dtype)
        return params

    def lora_config(self) -> dict[str, object]:
        """Describe the adapter for ``adapter_config.json`` (PEFT keys plus Tinker's flags)."""
        short_names = []
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head"):
            if any(module.endswith(name) for module in self._modules):
                short_names.append(name)
        return {
            "base_model_name_or_path": self.base_model,
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "r": self.rank,
            "lora_alpha": LORA_ALPHA,
            "lora_dropout": 0.0,
            "bias": "none",
            "fan_in_fan_out": False,
            "target_modules": short_names,
            "rank": self.rank,
            "seed": self.seed,
            "train_attn": self.train_attn,
            "train_mlp": self.train_mlp,
            "train_unembed": self.train_unembed,
        }

    # -- state ---------------------------------------------------------------------------------

    def adapter_state(self) -> dict[str, Array]:
        """Return copies of the LoRA weights, PEFT-named: ``lora_A`` (r, in), ``lora_B`` (out, r).

        Always float32, whatever the compute dtype.
        """
        with self._lock:
            return {key: value.astype(np.float32, copy=True) for key, value in self._params.items()}

    def load_adapter_state(self, state: Mapping[str, Array]) -> None:
        """Replace the LoRA weights; keys and shapes must match this model's adapter exactly."""
        loaded = self._check_state("adapter", state, self._params)
        with self._lock:
            self._params = loaded
            self._effective_cache = None

    def optimizer_state(self) -> dict[str, Array]:
        """Return the Adam state: ``<param>.exp_avg``, ``<param>.exp_avg_sq`` and ``step``."""
        with self._lock:
            state: dict[str, Array] = {"step": np.array(self._step, dtype=np.int64)}
            for key, value in self._params.items():
                zeros = np.zeros_like(value, dtype=np.float32)
                state[f"{key}.exp_avg"] = self._exp_avg.get(key, zeros).astype(np.float32)
                state[f"{key}.exp_avg_sq"] = self._exp_avg_sq.get(key, zeros).astype(np.float32)
            return state

    def load_optimizer_state(self, state: Mapping[str, Array]) -> None:
        """Restore the Adam state saved by :meth:`optimizer_state`."""
        if "step" not in state:
            raise UserInputError("optimizer state is missing 'step'")
        step_arr = np.asarray(state["step"])
        if step_arr.size != 1 or step_arr.dtype.kind not in "iuf":
            raise UserInputError("optimizer state 'step' must be a single integer")
        step = int(step_arr.reshape(()))
        if step < 0:
            raise UserInputError("optimizer state 'step' must be >= 0")
        expected = {}
        for key, value in self._params.items():
            expected[f"{key}.exp_avg"] = value
            expected[f"{key}.exp_avg_sq"] = value
        moments = self._check_state(
            "optimizer", {k: v for k, v in state.items() if k != "step"}, expected
        )
        with self._lock:
            self._step = step
            self._exp_avg = {key: moments[f"{key}.exp_avg"] for key in self._params}
            self._exp_avg_sq = {key: moments[f"{key}.exp_avg_sq"] for key in self._params}

    def reset_optimizer(self) -> None:
        """Forget the Adam moments and step count (and any accumulated gradient)."""
        with self._lock:
            self._exp_avg, self._exp_avg_sq, self._step = {}, {}, 0
            self._grads = {key: np.zeros_like(value) for key, value in self._params.items()}

    def _check_state(
        self, what: str, state: Mapping[str, Array], expected: Mapping[str, Array]
    ) -> dict[str, Array]:
        missing = sorted(set(expected) - set(state))
        extra = sorted(set(state) - set(expected))
        if missing or extra:
            raise UserInputError(
                f"{what} state does not match this model's LoRA config "
                f"(rank {self.rank}): missing {missing[:3]}, unexpected {extra[:3]}"
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
            loaded[key] = np.array(arr, dtype=self._dtype)
        return loaded

    def _effective(self) -> _Effective:
        with self._lock:
            if self._effective_cache is not None:
                return self._effective_cache
            base, params, scale = self._base, self._params, self._scale

            def merged(module: str) -> Array:
                weight = base[_module_base_key(module)]
                a_key = _lora_key(module, "A")
                if a_key not in params:
                    return weight
                delta = _mm(params[a_key].T, params[_lora_key(module, "B")].T)
                return np.ascontiguousarray(weight + scale * delta)

            n = self._arch.n_layers
            attn = [
                [merged(f"model.layers.{i}.self_attn.{p}_proj") for p in "qkvo"] for i in range(n)
            ]
            eff = _Effective(
                embed=base["embed"],
                pos=base["pos"],
                qkv=[np.ascontiguousarray(np.concatenate(a[:3], axis=1)) for a in attn],
                o=[a[3] for a in attn],
                up=[merged(f"model.layers.{i}.mlp.up_proj") for i in range(n)],
                down=[merged(f"model.layers.{i}.mlp.down_proj") for i in range(n)],
                unembed=merged("lm_head"),
            )
            self._effective_cache = eff
            return eff

    # -- network -------------------------------------------------------------------------------

    def _network(
        self, eff: _Effective, tokens: Array, *, record: bool
    ) -> tuple[Array, list[dict[str, Array]], list[tuple[Array, Array]]]:
        """Run the network on padded tokens (B, T): logits (B·T, V), activations, per-layer K/V.

        Right padding needs no attention mask beyond causality: real positions never attend to
        the padding after them.
        """
        arch = self._arch
        batch, length = tokens.shape
        d, heads, hd = arch.d_model, arch.n_heads, arch.head_dim
        x = (eff.embed[tokens] + eff.pos[:length]).reshape(batch * length, d)
        causal = np.triu(np.full((length, length), -np.inf, dtype=self._dtype), k=1)
        q_scale = 1.0 / math.sqrt(hd)
        records: list[dict[str, Array]] = []
        kv: list[tuple[Array, Array]] = []
        for layer in range(arch.n_layers):
            h, h_inv = _rms_norm(x)
            qkv = _mm(h, eff.qkv[layer]).reshape(batch, length, 3, heads, hd)
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3)) * q_scale
            k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 1, 3))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            probs = _bmm(q, k.transpose(0, 1, 3, 2))
            probs += causal
            _softmax_inplace(probs)
            attn = _bmm(probs, v).transpose(0, 2, 1, 3).reshape(batch * length, d)
            x = x + _mm(attn, eff.o[layer])
            h2, h2_inv = _rms_norm(x)
            u = _mm(h2, eff.up[layer])
            if record:
                g, gelu_grad = _gelu_with_derivative(u)
                records.append(
                    {"h": h, "h_inv": h_inv, "q": q, "k": k, "v": v, "probs": probs}
                    | {"attn": attn, "h2": h2, "h2_inv": h2_inv, "gelu_grad": gelu_grad, "g": g}
                )
            else:
                g = _gelu(u)
            x = x + _mm(g, eff.down[layer])
            kv.append((k, v))
        hf, hf_inv = _rms_norm(x)
        logits = _mm(hf, eff.unembed)
        if record:
            records.append({"hf": hf, "hf_inv": hf_inv})
        return logits, records, kv

    def _weight_grad(
        self, module: str, x: Array, dy: Array, weight_grads: dict[str, Array]
    ) -> None:
        """Add dloss/dW = dyᵀ·x (out, in) of a LoRA-targeted linear map to ``weight_grads``."""
        if module in self._module_set:
            self._weight_grad_add(module, _mm_tn(dy, x), weight_grads)

    @staticmethod
    def _weight_grad_add(module: str, grad: Array, weight_grads: dict[str, Array]) -> None:
        if module in weight_grads:
            weight_grads[module] += grad
        else:
            weight_grads[module] = np.array(grad)

    def _lora_grads_from_weight_grads(
        self, weight_grads: Mapping[str, Array], grads: dict[str, Array]
    ) -> None:
        """Project full-weight gradients G onto LoRA: dB = s·G·Aᵀ, dA = s·Bᵀ·G."""
        for module, weight_grad in weight_grads.items():
            a_key, b_key = _lora_key(module, "A"), _lora_key(module, "B")
            grads[b_key] += self._scale * _mm(weight_grad, self._params[a_key].T)
            grads[a_key] += self._scale * _mm(self._params[b_key].T, weight_grad)

    def _backward(
        self,
        eff: _Effective,
        records: list[dict[str, Array]],
        dlogits: Array,
        shape: tuple[int, int],
        weight_grads: dict[str, Array],
    ) -> None:
        """Accumulate the LoRA-targeted weights' gradients from dloss/dlogits (B·T, V).

        LoRA gradients are linear in the full-weight gradient G = dyᵀ·x, so one long reduction
        per module (summed over groups) replaces four thin rank-r products per module and group.
        """
        arch = self._arch
        batch, length = shape
        heads, hd, d = arch.n_heads, arch.head_dim, arch.d_model
        q_scale = 1.0 / math.sqrt(hd)
        final = records[-1]
        self._weight_grad("lm_head", final["hf"], dlogits, weight_grads)
        if not (self.train_attn or self.train_mlp):
            return  # only the unembedding trains: nothing below it needs a gradient
        dx = _rms_norm_backward(_mm(dlogits, eff.unembed.T), final["hf"], final["hf_inv"])
        for layer in range(arch.n_layers - 1, -1, -1):
            rec = records[layer]
            prefix = f"model.layers.{layer}"
            # MLP block: x += gelu(h2 W_up) W_down
            self._weight_grad(f"{prefix}.mlp.down_proj", rec["g"], dx, weight_grads)
            du = _mm(dx, eff.down[layer].T)
            du *= rec["gelu_grad"]
            self._weight_grad(f"{prefix}.mlp.up_proj", rec["h2"], du, weight_grads)
            if layer == 0 and not self.train_attn:
                return
            dx = dx + _rms_norm_backward(_mm(du, eff.up[layer].T), rec["h2"], rec["h2_inv"])
            # attention block: x += attn(h W_qkv) W_o
            self._weight_grad(f"{prefix}.self_attn.o_proj", rec["attn"], dx, weight_grads)
            dattn = _mm(dx, eff.o[layer].T).reshape(batch, length, heads, hd).transpose(0, 2, 1, 3)
            dattn = np.ascontiguousarray(dattn)
            probs = rec["probs"]
            dv = _bmm(probs.transpose(0, 1, 3, 2), dattn)
            dscores = _bmm(dattn, rec["v"].transpose(0, 1, 3, 2))
            dscores -= np.einsum("bhij,bhij->bhi", dscores, probs)[..., None]
            dscores *= probs
            dq = _bmm(dscores, rec["k"]) * q_scale
            dk = _bmm(dscores.transpose(0, 1, 3, 2), rec["q"])
            dqkv = np.stack([dq, dk, dv], axis=2)  # (B, H, 3, T, hd)
            dqkv = dqkv.transpose(0, 3, 2, 1, 4).reshape(batch * length, 3 * d)
            h = rec["h"]
            if self.train_attn:
                qkv_grad = _mm_tn(dqkv, h)  # (3d, d): q, k, v stacked
                for index, proj in enumerate("qkv"):
                    block = qkv_grad[index * d : (index + 1) * d]
                    self._weight_grad_add(f"{prefix}.self_attn.{proj}_proj", block, weight_grads)
            if layer == 0:
                return
            dx = dx + _rms_norm_backward(_mm(dqkv, eff.qkv[layer].T), h, rec["h_inv"])

    # -- training ------------------------------------------------------------------------------

    def _prepare(self, batch: Sequence[DatumArrays], loss_fn: str) -> list[_Prepared]:
        required, optional = _LOSS_INPUTS[loss_fn]
        allowed = (*required, *optional)
        prepared: list[_Prepared] = []
        for index, datum in enumerate(batch):
            where = f" (datum {index})"
            tokens = np.asarray(datum.tokens)
            if tokens.ndim != 1:
                raise UserInputError(f"model_input tokens must be 1-D, got shape {tokens.shape}")
            n = tokens.shape[0]
            if n == 0:
                raise UserInputError(
                    f"model_input is empty; a datum needs at least one token{where}"
                )
            if n > self.context_length:
                raise UserInputError(
                    f"PromptTooLong: model_input length {n} exceeds the model's context length "
                    f"{self.context_length}{where}"
                )
            tokens = _as_int_tokens(tokens, "model_input", self.vocab_size, where)
            for key in datum.inputs:
                if key not in allowed:
                    raise UserInputError(
                        "Could not convert loss function inputs to array record: unexpected key "
                        f"{key!r} for loss {loss_fn}; expected {sorted(allowed)}{where}"
                    )
            for key in required:
                if key not in datum.inputs:
                    raise UserInputError(
                        "Could not convert loss function inputs to array record: missing key "
                        f"{key!r} for loss {loss_fn}; expected {sorted(allowed)}{where}"
                    )
            arrays = {key: np.asarray(value) for key, value in datum.inputs.items()}
            for key, arr in arrays.items():
                if arr.ndim == 0 or arr.shape[0] != n:
                    length = 0 if arr.ndim == 0 else arr.shape[0]
                    raise UserInputError(
                        f"loss_fn_inputs[{key}] has length {length}, expected {n} = "
                        f"model_input.length{where}"
                    )
            raw_targets = arrays["target_tokens"]
            two_dim = raw_targets.ndim == 2
            if raw_targets.ndim not in (1, 2) or (two_dim and loss_fn != "cross_entropy"):
                dims = "(N,) or (N, K)" if loss_fn == "cross_entropy" else "(N,)"
                raise UserInputError(
                    f"loss_fn_inputs[target_tokens] must have shape {dims} for loss {loss_fn}, "
                    f"got {raw_targets.shape}{where}"
                )
            if two_dim and raw_targets.shape[1] == 0:
                raise UserInputError(f"loss_fn_inputs[target_tokens] has K = 0 columns{where}")
            targets = _as_int_tokens(
                raw_targets, "loss_fn_inputs[target_tokens]", self.vocab_size, where
            ).reshape(n, -1)
            floats: dict[str, Array] = {}
            for key, arr in arrays.items():
                if key == "target_tokens":
                    continue
                if arr.dtype.kind not in "iufb":
                    raise UserInputError(f"loss_fn_inputs[{key}] must be numeric{where}")
                values = arr.astype(np.float64)
                if not np.all(np.isfinite(values)):
                    raise UserInputError(
                        f"NonFiniteInTensor: loss_fn_inputs[{key}] contains NaN or Inf{where}"
                    )
                if key == "weights":
                    if values.shape != raw_targets.shape:
                        raise UserInputError(
                            f"loss_fn_inputs[weights] has shape {values.shape}, expected "
                            f"{raw_targets.shape} (the shape of target_tokens){where}"
                        )
                    values = values.reshape(n, -1)
                elif values.ndim != 1:
                    raise UserInputError(
                        f"loss_fn_inputs[{key}] must have shape (N,), got {values.shape}{where}"
                    )
                floats[key] = values
            if loss_fn == "cross_entropy" and "weights" not in floats:
                # SERVER.md §1.1: whether weights are optional is undocumented; missing = all ones.
                floats["weights"] = np.ones(targets.shape, dtype=np.float64)
            prepared.append(_Prepared(tokens, targets, two_dim, floats))
        return prepared

    def _groups(self, prepared: Sequence[_Prepared]) -> list[list[int]]:
        """Partition datum indices into groups of similar length, longest first."""
        order = sorted(range(len(prepared)), key=lambda i: -prepared[i].tokens.shape[0])
        groups: list[list[int]] = []
        current: list[int] = []
        group_len = 0
        for index in order:
            n = prepared[index].tokens.shape[0]
            fits = (len(current) + 1) * group_len <= _GROUP_MAX_TOKENS and 2 * n >= group_len
            if current and fits:
                current.append(index)
            else:
                if current:
                    groups.append(current)
                current, group_len = [index], n
        if current:
            groups.append(current)
        return groups

    def forward_backward(
        self,
        batch: Sequence[DatumArrays],
        loss_fn: str,
        loss_fn_config: Mapping[str, float | str] | None,
        *,
        backward: bool,
    ) -> tuple[list[dict[str, Array]], dict[str, float]]:
        """Compute per-datum logprobs and losses; with ``backward`` also accumulate LoRA grads.

        Returns one ``{"logprobs", "elementwise_loss"}`` dict per datum (float32; logprobs (N,) or
        (N, K)) and ``{"loss:sum": total}``. Gradients add up across calls until :meth:`optim_step`.
        Raises :class:`UserInputError` for bad inputs, before touching any state.
        """
        if loss_fn not in _LOSS_INPUTS:
            raise UserInputError(
                f"Unknown loss function {loss_fn!r}; known loss functions: {list(LOSS_FUNCTIONS)}"
            )
        config = _resolve_loss_config(loss_fn, loss_fn_config)
        prepared = self._prepare(batch, loss_fn)
        outputs: list[dict[str, Array]] = [{} for _ in prepared]
        total = 0.0
        with self._lock:
            weight_grads: dict[str, Array] = {}
            eff = self._effective()
            for group in self._groups(prepared) if not self._stub else []:
                total += self._run_group(
                    eff,
                    [prepared[i] for i in group],
                    group,
                    loss_fn=loss_fn,
                    config=config,
                    backward=backward,
                    weight_grads=weight_grads,
                    outputs=outputs,
                )
            if self._stub:
                for index, item in enumerate(prepared):
                    lp = np.zeros(item.targets.shape, dtype=np.float64)
                    loss, _ = _token_losses(loss_fn, lp, item.floats, config)
                    outputs[index] = self._datum_output(item, lp, loss)
                    total += float(loss.sum())
            if backward:
                self._lora_grads_from_weight_grads(weight_grads, self._grads)
        return outputs, {"loss:sum": total}

    @staticmethod
    def _datum_output(item: _Prepared, lp: Array, loss: Array) -> dict[str, Array]:
        logprobs = lp.astype(np.float32)
        if not item.two_dim:
            logprobs = logprobs[:, 0].copy()
        return {"logprobs": logprobs, "elementwise_loss": loss.astype(np.float32)}

    def _run_group(
        self,
        eff: _Effective,
        items: Sequence[_Prepared],
        indices: Sequence[int],
        *,
        loss_fn: str,
        config: Mapping[str, float],
        backward: bool,
        weight_grads: dict[str, Array],
        outputs: list[dict[str, Array]],
    ) -> float:
        batch = len(items)
        length = max(item.tokens.shape[0] for item in items)
        width = max(item.targets.shape[1] for item in items)
        tokens = np.zeros((batch, length), dtype=np.int64)
        targets = np.zeros((batch, length, width), dtype=np.int64)
        for row, item in enumerate(items):
            n, k = item.targets.shape
            tokens[row, :n] = item.tokens
            targets[row, :n, :k] = item.targets
        logits, records, _ = self._network(eff, tokens, record=backward)
        # log-softmax over the vocabulary, in place on the logits buffer
        logits -= logits.max(axis=-1, keepdims=True)
        exp = np.exp(logits)
        norm = exp.sum(axis=-1, keepdims=True)
        logits -= np.log(norm)
        flat_targets = targets.reshape(batch * length, width)
        lp_all = np.take_along_axis(logits, flat_targets, axis=1).reshape(batch, length, width)
        dlp = np.zeros((batch, length, width), dtype=np.float64) if backward else None
        total = 0.0
        for row, (item, index) in enumerate(zip(items, indices, strict=True)):
            n, k = item.targets.shape
            lp = lp_all[row, :n, :k].astype(np.float64)
            loss, grad = _token_losses(loss_fn, lp, item.floats, config)
            outputs[index] = self._datum_output(item, lp, loss)
            total += float(loss.sum())
            if dlp is not None:
                dlp[row, :n, :k] = grad
        if dlp is None:
            return total
        # dloss/dlogits = Σ_k dlp_k·(onehot(target_k) - softmax)
        exp /= norm
        flat_dlp = dlp.reshape(batch * length, width).astype(self._dtype)
        dlogits = exp
        dlogits *= -flat_dlp.sum(axis=1, keepdims=True)
        for column in range(width):
            target_col = flat_targets[:, column : column + 1]
            current = np.take_along_axis(dlogits, target_col, axis=1)
            np.put_along_axis(
                dlogits, target_col, current + flat_dlp[:, column : column + 1], axis=1
            )
        self._backward(eff, records, dlogits, (batch, length), weight_grads)
        return total

    def optim_step(
        self,
        *,
        learning_rate: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float = 0.0,
        grad_clip_norm: float = 0.0,
    ) -> dict[str, float] | None:
        """Apply one AdamW step (torch.optim.AdamW semantics, SERVER.md §4), then zero the grads.

        Returns ``{"unclipped_grad_l2:mean": norm}`` when ``grad_clip_norm > 0``, else None.
        """
        lr = _check_number("learning_rate", learning_rate)
        b1, b2 = _check_number("beta1", beta1), _check_number("beta2", beta2)
        eps_value = _check_number("eps", eps)
        wd = _check_number("weight_decay", weight_decay)
        clip = _check_number("grad_clip_norm", grad_clip_norm)
        if lr < 0 or eps_value < 0 or wd < 0 or clip < 0:
            raise UserInputError(
                "learning_rate, eps, weight_decay and grad_clip_norm must be non-negative"
            )
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise UserInputError("beta1 and beta2 must be in [0, 1)")
        with self._lock:
            grads = {key: value.astype(np.float64) for key, value in self._grads.items()}
            norm = math.sqrt(sum(float(np.square(g).sum()) for g in grads.values()))
            metrics: dict[str, float] | None = None
            if clip > 0:
                metrics = {"unclipped_grad_l2:mean": norm}
                if norm > clip:
                    # SERVER.md §4: clip the global L2 norm to grad_clip_norm
                    factor = clip / norm
                    grads = {key: g * factor for key, g in grads.items()}
            self._step += 1
            step = self._step
            bias1 = 1.0 - b1**step
            bias2_sqrt = math.sqrt(1.0 - b2**step)
            new_params: dict[str, Array] = {}
            for key, param in self._params.items():
                grad = grads[key]
                m = self._exp_avg.get(key)
                v = self._exp_avg_sq.get(key)
                m = (1.0 - b1) * grad if m is None else b1 * m + (1.0 - b1) * grad
                v = (1.0 - b2) * grad * grad if v is None else b2 * v + (1.0 - b2) * grad * grad
                self._exp_avg[key] = m.astype(self._dtype)
                self._exp_avg_sq[key] = v.astype(self._dtype)
                updated = param.astype(np.float64) * (1.0 - lr * wd)
                updated -= (lr / bias1) * m / (np.sqrt(v) / bias2_sqrt + eps_value)
                new_params[key] = updated.astype(self._dtype)
            # replaced, not mutated: a concurrent sample() keeps a consistent snapshot
            self._params = new_params
            self._grads = {key: np.zeros_like(value) for key, value in new_params.items()}
            self._effective_cache = None
            return metrics

    # -- sampling ------------------------------------------------------------------------------

    def sample(
        self,
        prompt: Sequence[int],
        *,
        num_samples: int = 1,
        max_tokens: int | None = None,
        temperature: float = 1.0,
        top_k: int = -1,
        top_p: float = 1.0,
        seed: int | None = None,
        stop_tokens: Sequence[int] | None = None,
        stop_strings: Sequence[str] | None = None,
        prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
    ) -> SampleResult:
        """Sample ``num_samples`` continuations of ``prompt`` (SERVER.md §5).

        ``temperature`` 0 is greedy; ``top_k`` -1 (or 0) keeps every token; logprobs are those of
        the temperature-scaled distribution before top-k/top-p filtering (at temperature 0, of the
        unscaled one). ``max_tokens=None`` generates up to the context limit. EOS stops unless
        ``stop_tokens`` or ``stop_strings`` is an explicit empty list (no stops at all); stop tokens
        and the token completing a stop string are included, with stop_reason "stop". Prompt
        logprobs are unscaled (temperature 1). The same weights, prompt, parameters and seed give
        the same output; ``seed=None`` draws a fresh one.
        """
        prompt_arr = _as_int_tokens(list(prompt), "prompt", self.vocab_size, "")
        if prompt_arr.ndim != 1 or prompt_arr.shape[0] == 0:
            raise UserInputError("prompt must contain at least one token")
        prompt_len = int(prompt_arr.shape[0])
        if isinstance(num_samples, bool) or int(num_samples) < 1:
            raise UserInputError(f"num_samples must be >= 1, got {num_samples}")
        num_samples = int(num_samples)
        tau = _check_number("temperature", temperature)
        p_top = _check_number("top_p", top_p)
        if tau < 0:
            raise UserInputError(f"temperature must be >= 0, got {tau}")
        if not 0.0 < p_top <= 1.0:
            raise UserInputError(f"top_p must be in (0, 1], got {p_top}")
        if int(top_k) < -1:
            raise UserInputError(f"top_k must be -1 (no limit) or positive, got {top_k}")
        k_top = int(top_k) if int(top_k) > 0 else 0
        top_prompt = int(topk_prompt_logprobs)
        if top_prompt < 0:
            raise UserInputError(f"topk_prompt_logprobs must be >= 0, got {topk_prompt_logprobs}")
        if max_tokens is None:
            if prompt_len > self.context_length:
                raise UserInputError(
                    f"PromptTooLong: prompt length {prompt_len} exceeds the model's context "
                    f"window {self.context_length}"
                )
            new_tokens = self.context_length - prompt_len
        else:
            new_tokens = int(max_tokens)
            if new_tokens < 0:
                raise UserInputError(f"max_tokens must be >= 0, got {max_tokens}")
            if prompt_len + new_tokens > self.context_length:
                raise UserInputError(
                    "Prompt length plus max_tokens exceeds the model's context window: "
                    f"{prompt_len} + {new_tokens} > {self.context_length}"
                )
        stop_ids = {int(token) for token in stop_tokens or ()}
        stops_disabled = (stop_tokens is not None and len(stop_tokens) == 0) or (
            stop_strings is not None and len(stop_strings) == 0
        )
        if not stops_disabled:
            stop_ids.add(EOS_TOKEN_ID)
        texts = [str(s) for s in stop_strings or ()]
        if any(not s for s in texts):
            raise UserInputError("stop strings must be non-empty")
        if self._stub:
            return self._stub_sample(
                prompt_arr,
                num_samples=num_samples,
                new_tokens=new_tokens,
                stop_ids=stop_ids,
                stop_texts=texts,
                prompt_logprobs=prompt_logprobs,
                top_prompt=top_prompt,
            )

        eff = self._effective()
        # feed every position except the last generated token
        cache_len = prompt_len + max(new_tokens - 1, 0)
        logits, _, kv = self._network(eff, prompt_arr[None, :], record=False)
        prompt_lp: list[float | None] | None = None
        topk_lp: list[list[tuple[int, float]] | None] | None = None
        if prompt_logprobs or top_prompt:
            log_probs = _log_softmax(logits[:-1].astype(np.float64))
            if prompt_logprobs:
                picked = log_probs[np.arange(prompt_len - 1), prompt_arr[1:]]
                prompt_lp = [None, *(float(value) for value in picked)]
            if top_prompt:
                count = min(top_prompt, self.vocab_size)
                order = np.argsort(-log_probs, axis=1, kind="stable")[:, :count]
                topk_lp = [None]
                for row in range(prompt_len - 1):
                    topk_lp.append([(int(tok), float(log_probs[row, tok])) for tok in order[row]])
        sequences = self._generate(
            eff,
            kv,
            logits[-1],
            prompt_len=prompt_len,
            cache_len=cache_len,
            num_samples=num_samples,
            new_tokens=new_tokens,
            tau=tau,
            k_top=k_top,
            p_top=p_top,
            seed=seed,
            stop_ids=stop_ids,
            stop_texts=texts,
        )
        return SampleResult(sequences, prompt_lp, topk_lp)

    def _generate(
        self,
        eff: _Effective,
        prompt_kv: list[tuple[Array, Array]],
        last_logits: Array,
        *,
        prompt_len: int,
        cache_len: int,
        num_samples: int,
        new_tokens: int,
        tau: float,
        k_top: int,
        p_top: float,
        seed: int | None,
        stop_ids: set[int],
        stop_texts: list[str],
    ) -> list[SampledSeq]:
        arch = self._arch
        heads, hd, d = arch.n_heads, arch.head_dim, arch.d_model
        base_entropy = secrets.randbits(64) if seed is None else int(seed) % (1 << 64)
        rngs = [
            np.random.default_rng(np.random.SeedSequence([base_entropy, index]))
            for index in range(num_samples)
        ]
        caches = []
        for k, v in prompt_kv:
            k_cache = np.empty((num_samples, heads, cache_len, hd), dtype=self._dtype)
            v_cache = np.empty_like(k_cache)
            k_cache[:, :, :prompt_len] = k[0]
            v_cache[:, :, :prompt_len] = v[0]
            caches.append((k_cache, v_cache))
        q_scale = 1.0 / math.sqrt(hd)
        tokens: list[list[int]] = [[] for _ in range(num_samples)]
        logprobs: list[list[float]] = [[] for _ in range(num_samples)]
        reasons = ["length"] * num_samples
        active = np.ones(num_samples, dtype=bool)
        logits = np.broadcast_to(last_logits, (num_samples, last_logits.shape[0]))
        tokenizer = load_tokenizer() if stop_texts else None
        for step in range(new_tokens):
            chosen, chosen_lp = self._choose(logits.astype(np.float64), tau, k_top, p_top, rngs)
            for index in np.flatnonzero(active):
                token = int(chosen[index])
                tokens[index].append(token)
                logprobs[index].append(float(chosen_lp[index]))
                stop = token in stop_ids
                if not stop and tokenizer is not None:
                    text = tokenizer.decode(tokens[index])
                    stop = any(s in text for s in stop_texts)
                if stop:
                    reasons[index] = "stop"
                    active[index] = False
            if not active.any() or step == new_tokens - 1:
                break
            # one decoding step for every sample (finished ones are simply ignored)
            position = prompt_len + step
            x = eff.embed[chosen] + eff.pos[position]
            for layer, (k_cache, v_cache) in enumerate(caches):
                h, _ = _rms_norm(x)
                qkv = _mm(h, eff.qkv[layer]).reshape(num_samples, 3, heads, hd)
                k_cache[:, :, position] = qkv[:, 1]
                v_cache[:, :, position] = qkv[:, 2]
                q = qkv[:, 0, :, None, :] * q_scale  # (S, H, 1, hd)
                scores = _bmm(q, k_cache[:, :, : position + 1].transpose(0, 1, 3, 2))
                _softmax_inplace(scores)
                attn = _bmm(scores, v_cache[:, :, : position + 1]).reshape(num_samples, d)
                x = x + _mm(attn, eff.o[layer])
                h2, _ = _rms_norm(x)
                g = _gelu(_mm(h2, eff.up[layer]))
                x = x + _mm(g, eff.down[layer])
            hf, _ = _rms_norm(x)
            logits = _mm(hf, eff.unembed)
        return [SampledSeq(tokens[i], logprobs[i], reasons[i]) for i in range(num_samples)]

    @staticmethod
    def _choose(
        logits: Array, tau: float, k_top: int, p_top: float, rngs: Sequence[np.random.Generator]
    ) -> tuple[Array, Array]:
        """Pick one token per row; return (tokens, their logprobs under softmax(logits/τ))."""
        rows = np.arange(logits.shape[0])
        if tau == 0.0:
            chosen = logits.argmax(axis=1)
            return chosen, _log_softmax(logits)[rows, chosen]
        log_probs = _log_softmax(logits / tau)
        probs = np.exp(log_probs)
        vocab = logits.shape[1]
        if 0 < k_top < vocab:
            drop = np.argpartition(-log_probs, k_top - 1, axis=1)[:, k_top:]
            np.put_along_axis(probs, drop, 0.0, axis=1)
        if p_top < 1.0:
            order = np.argsort(-probs, axis=1, kind="stable")
            sorted_probs = np.take_along_axis(probs, order, axis=1)
            sorted_probs /= sorted_probs.sum(axis=1, keepdims=True)
            mass_before = np.cumsum(sorted_probs, axis=1) - sorted_probs
            np.put_along_axis(
                probs, order, np.where(mass_before < p_top, 1.0, 0.0) * sorted_probs, axis=1
            )
        cumulative = np.cumsum(probs, axis=1)
        draws = np.array([rng.random() for rng in rngs]) * cumulative[:, -1]
        chosen = np.minimum((cumulative <= draws[:, None]).sum(axis=1), vocab - 1)
        # never pick a filtered-out (zero-probability) token through rounding at the boundary
        zero = probs[rows, chosen] == 0.0
        if zero.any():
            chosen[zero] = probs[zero].argmax(axis=1)
        return chosen, log_probs[rows, chosen]

    def _stub_sample(
        self,
        prompt: Array,
        *,
        num_samples: int,
        new_tokens: int,
        stop_ids: set[int],
        stop_texts: list[str],
        prompt_logprobs: bool,
        top_prompt: int,
    ) -> SampleResult:
        count, reason = new_tokens, "length"
        if new_tokens and _STUB_TOKEN_ID in stop_ids:
            count, reason = 1, "stop"
        elif new_tokens and stop_texts:
            char = chr(_STUB_TOKEN_ID)
            needed = [len(s) for s in stop_texts if s == char * len(s)]
            if needed and min(needed) <= new_tokens:
                count, reason = min(needed), "stop"
        sequences = [
            SampledSeq([_STUB_TOKEN_ID] * count, [0.0] * count, reason) for _ in range(num_samples)
        ]
        rest = [int(token) for token in prompt[1:]]
        prompt_lp: list[float | None] | None = None
        if prompt_logprobs:
            prompt_lp = [None, *([0.0] * len(rest))]
        topk_lp: list[list[tuple[int, float]] | None] | None = None
        if top_prompt:
            topk_lp = [None, *([(token, 0.0)] for token in rest)]
        return SampleResult(sequences, prompt_lp, topk_lp)
