"""Sampling for the tiny model: the decoding loop, token choice, results and prompt options.

``prompt_logprobs_last_n``, ``prompt_alt_tokens_k`` and ``target_prompt_logprobs`` are answered
from the prompt's log-distributions; ``topk_sample_logprobs`` rows come from the decoding loop.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from tinker_lite.local.model import network
from tinker_lite.local.model.errors import UserInputError
from tinker_lite.local.model.kernels import log_softmax
from tinker_lite.local.model.losses import check_number

__all__ = [
    "STUB_TOKEN_ID",
    "SampleOptions",
    "SampleResult",
    "SampledSeq",
    "check_last_n",
    "check_options",
    "check_targets",
    "choose_tokens",
    "generate",
    "stub_sample",
    "top_pairs",
    "with_prompt_options",
]

Array = npt.NDArray[Any]

# The stub model samples this token ("x") every time.
STUB_TOKEN_ID: Final = ord("x")


@dataclass(frozen=True)
class SampledSeq:
    """One sampled continuation: its tokens, their logprobs, and why it ended."""

    tokens: list[int]
    logprobs: list[float]
    stop_reason: str  # "stop" | "length"
    # topk_sample_logprobs: the k most likely (token, logprob) pairs at each generated position
    topk: list[list[tuple[int, float]] | None] | None = None


@dataclass(frozen=True)
class SampleResult:
    """The result of :meth:`TinyLM.sample`."""

    sequences: list[SampledSeq]
    prompt_logprobs: list[float | None] | None
    topk_prompt_logprobs: list[list[tuple[int, float]] | None] | None
    # target_prompt_logprobs: float32 (len(prompt) - 1, K), 0.0 where the request had -1
    target_prompt_logprobs: Array | None = None
    # prompt_alt_tokens_k: int64 draws and their float32 logprobs, both (len(prompt) - 1, k)
    alt_tokens: Array | None = None
    alt_logprobs: Array | None = None


def check_last_n(last_n: int | None, prompt_len: int) -> int | None:
    if last_n is None:
        return None
    if isinstance(last_n, bool) or not 1 <= int(last_n) <= prompt_len - 1:
        raise UserInputError(
            f"prompt_logprobs_last_n must be between 1 and len(prompt) - 1 = {prompt_len - 1}, "
            f"got {last_n}"
        )
    return int(last_n)


def check_targets(targets: Array | None, prompt_len: int, vocab_size: int) -> Array | None:
    if targets is None:
        return None
    ids = np.asarray(targets)
    if ids.ndim != 2 or ids.shape[0] != prompt_len - 1:
        raise UserInputError(
            "target_prompt_logprobs must have shape [len(prompt) - 1, K] = "
            f"[{prompt_len - 1}, K], got {list(ids.shape)}"
        )
    if ids.size and (ids.min() < -1 or ids.max() >= vocab_size):
        raise UserInputError(
            f"target_prompt_logprobs holds token ids outside [0, {vocab_size}) (or -1 for none)"
        )
    return ids.astype(np.int64)


@dataclass(frozen=True)
class SampleOptions:
    """The checked options of a sample request (names as the decoding loop reads them)."""

    num_samples: int
    tau: float
    p_top: float
    k_top: int
    top_prompt: int
    top_sample: int
    alt_k: int
    last_n: int | None
    targets: Array | None
    new_tokens: int


def check_options(
    prompt_len: int,
    context_length: int,
    vocab_size: int,
    *,
    num_samples: int,
    max_tokens: int | None,
    temperature: float,
    top_k: int,
    top_p: float,
    topk_prompt_logprobs: int,
    topk_sample_logprobs: int,
    prompt_logprobs_last_n: int | None,
    prompt_alt_tokens_k: int,
    target_prompt_logprobs: Array | None,
) -> SampleOptions:
    """Check a sample request's options against the prompt and the context (a user error)."""
    if isinstance(num_samples, bool) or int(num_samples) < 1:
        raise UserInputError(f"num_samples must be >= 1, got {num_samples}")
    num_samples = int(num_samples)
    tau = check_number("temperature", temperature)
    p_top = check_number("top_p", top_p)
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
    top_sample = int(topk_sample_logprobs)
    if top_sample < 0:
        raise UserInputError(f"topk_sample_logprobs must be >= 0, got {topk_sample_logprobs}")
    alt_k = int(prompt_alt_tokens_k)
    if alt_k < 0:
        raise UserInputError(f"prompt_alt_tokens_k must be >= 0, got {prompt_alt_tokens_k}")
    last_n = check_last_n(prompt_logprobs_last_n, prompt_len)
    targets = check_targets(target_prompt_logprobs, prompt_len, vocab_size)
    if max_tokens is None:
        if prompt_len > context_length:
            raise UserInputError(
                f"PromptTooLong: prompt length {prompt_len} exceeds the model's context "
                f"window {context_length}"
            )
        new_tokens = context_length - prompt_len
    else:
        new_tokens = int(max_tokens)
        if new_tokens < 0:
            raise UserInputError(f"max_tokens must be >= 0, got {max_tokens}")
        if prompt_len + new_tokens > context_length:
            raise UserInputError(
                "Prompt length plus max_tokens exceeds the model's context window: "
                f"{prompt_len} prompt tokens + {new_tokens} max_tokens > {context_length}."
            )
    return SampleOptions(
        num_samples=num_samples,
        tau=tau,
        p_top=p_top,
        k_top=k_top,
        top_prompt=top_prompt,
        top_sample=top_sample,
        alt_k=alt_k,
        last_n=last_n,
        targets=targets,
        new_tokens=new_tokens,
    )


def top_pairs(log_probs: Array, k: int) -> list[list[tuple[int, float]] | None]:
    """The ``k`` most likely (token, logprob) pairs of each row, most likely first."""
    count = min(k, log_probs.shape[1])
    order = np.argsort(-log_probs, axis=1, kind="stable")[:, :count]
    return [
        [(int(tok), float(row[tok])) for tok in order_row]
        for row, order_row in zip(log_probs, order, strict=True)
    ]


def with_prompt_options(
    result: SampleResult,
    log_probs: Array,
    tempered: Array,
    prompt: Array,
    *,
    last_n: int | None,
    alt_k: int,
    targets: Array | None,
    seed: int | None,
    stub_top_sample: int = 0,
    greedy: bool = False,
) -> SampleResult:
    """Apply the prompt-level 0.38 options to ``result`` from the prompt's log-distributions.

    ``log_probs`` (temperature 1) rows score prompt positions 1..N-1; ``tempered`` (the request's
    temperature) is what ``prompt_alt_tokens_k`` draws from.
    """
    prompt_lp, topk_lp = result.prompt_logprobs, result.topk_prompt_logprobs
    if last_n is not None:
        first_scored = len(prompt) - last_n
        if prompt_lp is not None:
            prompt_lp = [v if i >= first_scored else None for i, v in enumerate(prompt_lp)]
        if topk_lp is not None:
            topk_lp = [v if i >= first_scored else None for i, v in enumerate(topk_lp)]
    target_lp = None
    if targets is not None:
        rows = np.arange(targets.shape[0])[:, None]
        picked = log_probs[rows, np.maximum(targets, 0)]
        target_lp = np.where(targets >= 0, picked, 0.0).astype(np.float32)
    alt_tokens = alt_lp = None
    if alt_k:
        if greedy:
            alt_tokens = np.repeat(tempered.argmax(axis=1)[:, None], alt_k, axis=1)
        else:
            entropy = secrets.randbits(64) if seed is None else int(seed) % (1 << 64)
            rng = np.random.default_rng(np.random.SeedSequence([entropy, 1 << 32]))
            cdf = np.cumsum(np.exp(tempered), axis=1)
            draws = rng.random((tempered.shape[0], alt_k)) * cdf[:, -1:]
            alt_tokens = np.minimum(
                (cdf[:, None, :] <= draws[:, :, None]).sum(axis=2), tempered.shape[1] - 1
            )
        alt_tokens = alt_tokens.astype(np.int64)
        alt_lp = np.take_along_axis(tempered, alt_tokens, axis=1).astype(np.float32)
    sequences = result.sequences
    if stub_top_sample:
        sequences = [
            dataclasses.replace(seq, topk=[[(t, 0.0)] for t in seq.tokens]) for seq in sequences
        ]
    return SampleResult(sequences, prompt_lp, topk_lp, target_lp, alt_tokens, alt_lp)


def choose_tokens(
    logits: Array, tau: float, k_top: int, p_top: float, rngs: Sequence[np.random.Generator]
) -> tuple[Array, Array, Array]:
    """Pick one token per row; return (tokens, their logprobs, the log-distribution).

    The logprobs are under softmax(logits/τ) (unscaled at τ = 0), before top-k/top-p.
    """
    rows = np.arange(logits.shape[0])
    if tau == 0.0:
        chosen = logits.argmax(axis=1)
        unscaled = log_softmax(logits)
        return chosen, unscaled[rows, chosen], unscaled
    log_probs = log_softmax(logits / tau)
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
    return chosen, log_probs[rows, chosen], log_probs


def stub_sample(
    prompt: Array,
    *,
    num_samples: int,
    new_tokens: int,
    stop_ids: set[int],
    stop_texts: list[str],
    prompt_logprobs: bool,
    top_prompt: int,
) -> SampleResult:
    """The stub model's answer: ``STUB_TOKEN_ID`` repeated, every logprob 0."""
    count, reason = new_tokens, "length"
    if new_tokens and STUB_TOKEN_ID in stop_ids:
        count, reason = 1, "stop"
    elif new_tokens and stop_texts:
        char = chr(STUB_TOKEN_ID)
        needed = [len(s) for s in stop_texts if s == char * len(s)]
        if needed and min(needed) <= new_tokens:
            count, reason = min(needed), "stop"
    sequences = [
        SampledSeq([STUB_TOKEN_ID] * count, [0.0] * count, reason) for _ in range(num_samples)
    ]
    rest = [int(token) for token in prompt[1:]]
    prompt_lp: list[float | None] | None = None
    if prompt_logprobs:
        prompt_lp = [None, *([0.0] * len(rest))]
    topk_lp: list[list[tuple[int, float]] | None] | None = None
    if top_prompt:
        topk_lp = [None, *([(token, 0.0)] for token in rest)]
    return SampleResult(sequences, prompt_lp, topk_lp)


def generate(
    arch: network.Arch,
    eff: network.Effective,
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
    top_sample: int = 0,
    dtype: np.dtype[Any],
    decode: Callable[[list[int]], str] | None,
    answer_ids: Array | None = None,
) -> list[SampledSeq]:
    """Decode ``new_tokens`` steps for ``num_samples`` samples from the prompt's K/V cache.

    Each sample stops at a stop token, or when its decoded text (``decode``, needed only with
    ``stop_texts``) contains a stop string; finished samples are carried along, ignored.
    ``answer_ids`` maps a drawn table row to the token id answered (vocab.py; None: the row).
    """
    heads, hd = arch.n_heads, arch.head_dim
    base_entropy = secrets.randbits(64) if seed is None else int(seed) % (1 << 64)
    rngs = [
        np.random.default_rng(np.random.SeedSequence([base_entropy, index]))
        for index in range(num_samples)
    ]
    caches = []
    for k, v in prompt_kv:
        k_cache = np.empty((num_samples, heads, cache_len, hd), dtype=dtype)
        v_cache = np.empty_like(k_cache)
        k_cache[:, :, :prompt_len] = k[0]
        v_cache[:, :, :prompt_len] = v[0]
        caches.append((k_cache, v_cache))
    tokens: list[list[int]] = [[] for _ in range(num_samples)]
    logprobs: list[list[float]] = [[] for _ in range(num_samples)]
    topks: list[list[list[tuple[int, float]] | None]] = [[] for _ in range(num_samples)]
    reasons = ["length"] * num_samples
    active = np.ones(num_samples, dtype=bool)
    logits = np.broadcast_to(last_logits, (num_samples, last_logits.shape[0]))
    for step in range(new_tokens):
        chosen, chosen_lp, dist = choose_tokens(logits.astype(np.float64), tau, k_top, p_top, rngs)
        best = top_pairs(dist, top_sample) if top_sample else None
        if best is not None and answer_ids is not None:
            best = [
                None if row is None else [(int(answer_ids[t]), lp) for t, lp in row] for row in best
            ]
        for index in np.flatnonzero(active):
            token = int(chosen[index]) if answer_ids is None else int(answer_ids[chosen[index]])
            tokens[index].append(token)
            logprobs[index].append(float(chosen_lp[index]))
            if best is not None:
                topks[index].append(best[index])
            stop = token in stop_ids
            if not stop and decode is not None and stop_texts:
                text = decode(tokens[index])
                stop = any(s in text for s in stop_texts)
            if stop:
                reasons[index] = "stop"
                active[index] = False
        if not active.any() or step == new_tokens - 1:
            break
        # one decoding step for every sample (finished ones are simply ignored)
        logits = network.decode_step(arch, eff, caches, chosen, prompt_len + step)
    return [
        SampledSeq(tokens[i], logprobs[i], reasons[i], topks[i] if top_sample else None)
        for i in range(num_samples)
    ]
