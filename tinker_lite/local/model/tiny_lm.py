"""A tiny decoder-only transformer in numpy that really trains (LoRA + AdamW/Dimuon), samples.

docs/local.rst, "The tiny model", describes its architecture, LoRA layout and choices.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from tinker_lite.local.model import lora, network
from tinker_lite.local.model.decoding import (
    SampledSeq,
    SampleResult,
    check_options,
    generate,
    stub_sample,
    with_prompt_options,
)
from tinker_lite.local.model.errors import UserInputError
from tinker_lite.local.model.inputs import (
    DatumArrays,
    Prepared,
    as_int_tokens,
    length_groups,
    prepare_batch,
)
from tinker_lite.local.model.kernels import log_softmax
from tinker_lite.local.model.losses import (
    DEFAULT_DRO_BETA,
    LOSS_FUNCTIONS,
    LOSS_INPUTS,
    REFUSED_LOSSES,
    resolve_loss_config,
    token_losses,
)
from tinker_lite.local.model.optimizer import OPTIMIZERS, AdamW, Dimuon, read_step, state_family
from tinker_lite.local.model.vocab import TokenSpace, load_tokenizer, tokenizer_path

__all__ = [
    "BOS_TOKEN_ID",
    "CONTEXT_LENGTH",
    "DEFAULT_DRO_BETA",
    "EOS_TOKEN_ID",
    "LORA_ALPHA",
    "LOSS_FUNCTIONS",
    "MAX_CONTEXT_LENGTH",
    "MIN_CONTEXT_LENGTH",
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
# The context lengths a server may be given (``serve --context-length``).
MIN_CONTEXT_LENGTH: Final = 16
MAX_CONTEXT_LENGTH: Final = 32768
LORA_ALPHA: Final = lora.LORA_ALPHA


class TinyLM:
    """A tiny numpy transformer with LoRA adapters, for the offline Tinker server.

    :param base_model: any name; the frozen base weights are derived from its SHA-256.
    :param rank: the LoRA rank (> 0).
    :param seed: the LoRA init seed (None means 0, so the default init is reproducible).
    :param train_attn, train_mlp, train_unembed: where LoRA adapters go (at least one).
    :param optimizer: the optimizer family, ``"adamw"`` (default) or ``"dimuon"``.
    :param token_space: the token ids taken and answered (default: the byte tokenizer's).
    The keyword-only architecture arguments exist for tests (e.g. ``dtype=np.float64`` for
    finite-difference gradient checks); the server uses the defaults.
    """

    base_model: str
    optimizer: str
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
        optimizer: str = "adamw",
        token_space: TokenSpace | None = None,
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
        if optimizer not in OPTIMIZERS:
            raise UserInputError(
                f"optimizer_config.type: unsupported optimizer {optimizer!r} "
                f"(supported: {', '.join(map(repr, OPTIMIZERS))})"
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
        self.token_space = TokenSpace(TOKENIZER_ID) if token_space is None else token_space
        self.context_length = int(context_length)
        self._dtype = np.dtype(dtype)
        self._arch = network.Arch(
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
        self._base = network.base_weights(base_model, self._arch, self._dtype.name)
        self._modules = self._target_modules()
        self._module_set = frozenset(self._modules)
        self._params = self._init_lora()
        self._grads = {key: np.zeros_like(value) for key, value in self._params.items()}
        self._optimizer: AdamW | Dimuon = OPTIMIZERS[optimizer](self._dtype)
        self.optimizer = optimizer
        self._effective_cache: network.Effective | None = None

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
        optimizer: str = "adamw",
        token_space: TokenSpace | None = None,
        context_length: int = CONTEXT_LENGTH,
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
            optimizer=optimizer,
            token_space=token_space,
            context_length=context_length,
        )
        model._stub = True
        return model

    # -- configuration -------------------------------------------------------------------------

    def _target_modules(self) -> list[str]:
        return lora.target_modules(
            self._arch,
            train_attn=self.train_attn,
            train_mlp=self.train_mlp,
            train_unembed=self.train_unembed,
        )

    def _init_lora(self) -> dict[str, Array]:
        return lora.init_lora(
            self._modules, self._base, rank=self.rank, seed=self.seed, dtype=self._dtype
        )

    def lora_config(self) -> dict[str, object]:
        """Describe the adapter for ``adapter_config.json`` (PEFT keys plus Tinker's flags)."""
        return lora.lora_config(
            self._modules,
            base_model=self.base_model,
            rank=self.rank,
            seed=self.seed,
            train_attn=self.train_attn,
            train_mlp=self.train_mlp,
            train_unembed=self.train_unembed,
        )

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
        """Return the optimizer state and ``step``.

        AdamW: ``<param>.exp_avg`` and ``<param>.exp_avg_sq``; Dimuon: ``<param>.momentum_buffer``.
        """
        with self._lock:
            return self._optimizer.state(self._params)

    def load_optimizer_state(self, state: Mapping[str, Array]) -> None:
        """Restore the state saved by :meth:`optimizer_state` of a model of the same family."""
        family = state_family(state)
        if family != self.optimizer:
            raise UserInputError(
                f"the checkpoint holds {family} optimizer state but this model was created with "
                f"optimizer {self.optimizer!r}; load it with load_state (weights only) or into a "
                f"model created with optimizer {family!r}"
            )
        step = read_step(state)
        moments = self._check_state(
            "optimizer",
            {k: v for k, v in state.items() if k != "step"},
            self._optimizer.expected_moments(self._params),
        )
        with self._lock:
            self._optimizer.load(step, moments, self._params)

    def reset_optimizer(self) -> None:
        """Forget the optimizer state and step count (and any accumulated gradient)."""
        with self._lock:
            self._optimizer.reset()
            self._grads = {key: np.zeros_like(value) for key, value in self._params.items()}

    def _check_state(
        self, what: str, state: Mapping[str, Array], expected: Mapping[str, Array]
    ) -> dict[str, Array]:
        return lora.check_state(what, state, expected, rank=self.rank, dtype=self._dtype)

    def _effective(self) -> network.Effective:
        with self._lock:
            if self._effective_cache is None:
                self._effective_cache = lora.merged_weights(
                    self._arch, self._base, self._params, self._scale
                )
            return self._effective_cache

    # -- network -------------------------------------------------------------------------------

    def _lora_grads_from_weight_grads(
        self, weight_grads: Mapping[str, Array], grads: dict[str, Array]
    ) -> None:
        """Project full-weight gradients G onto LoRA: dB = s·G·Aᵀ, dA = s·Bᵀ·G."""
        lora.project_grads(weight_grads, self._params, grads, self._scale)

    # -- training ------------------------------------------------------------------------------

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
        if loss_fn in REFUSED_LOSSES:
            raise UserInputError(REFUSED_LOSSES[loss_fn])
        if loss_fn not in LOSS_INPUTS:
            raise UserInputError(
                f"Unknown loss function {loss_fn!r}; known loss functions: {list(LOSS_FUNCTIONS)}"
            )
        config = resolve_loss_config(loss_fn, loss_fn_config)
        space = self.token_space
        prepared = prepare_batch(
            batch, loss_fn, vocab_size=space.size, context_length=self.context_length
        )
        if space.folded:
            prepared = [
                dataclasses.replace(
                    item, tokens=space.rows(item.tokens), targets=space.rows(item.targets)
                )
                for item in prepared
            ]
        outputs: list[dict[str, Array]] = [{} for _ in prepared]
        total = 0.0
        with self._lock:
            weight_grads: dict[str, Array] = {}
            eff = self._effective()
            for group in length_groups(prepared) if not self._stub else []:
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
                    loss, _ = token_losses(loss_fn, lp, item.floats, config)
                    outputs[index] = self._datum_output(item, lp, loss)
                    total += float(loss.sum())
            if backward:
                self._lora_grads_from_weight_grads(weight_grads, self._grads)
        return outputs, {"loss:sum": total}

    @staticmethod
    def _datum_output(item: Prepared, lp: Array, loss: Array) -> dict[str, Array]:
        logprobs = lp.astype(np.float32)
        if not item.two_dim:
            logprobs = logprobs[:, 0].copy()
        return {"logprobs": logprobs, "elementwise_loss": loss.astype(np.float32)}

    def _run_group(
        self,
        eff: network.Effective,
        items: Sequence[Prepared],
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
        logits, records, _ = network.forward(
            self._arch, eff, tokens, record=backward, dtype=self._dtype
        )
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
            loss, grad = token_losses(loss_fn, lp, item.floats, config)
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
        network.backward(
            self._arch,
            eff,
            records,
            dlogits,
            shape=(batch, length),
            weight_grads=weight_grads,
            trained=self._module_set,
            train_attn=self.train_attn,
            train_mlp=self.train_mlp,
        )
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
        """Apply one AdamW step (:mod:`~tinker_lite.local.model.optimizer`), then zero the grads.

        Returns ``{"unclipped_grad_l2:mean": norm}`` when ``grad_clip_norm > 0``, else None.
        """
        with self._lock:
            optimizer = self._optimizer
            if not isinstance(optimizer, AdamW):
                raise UserInputError(self._family_mismatch("adamw"))
            new_params, metrics = optimizer.step(
                self._params,
                self._grads,
                learning_rate=learning_rate,
                beta1=beta1,
                beta2=beta2,
                eps=eps,
                weight_decay=weight_decay,
                grad_clip_norm=grad_clip_norm,
            )
            self._apply(new_params)
            return metrics

    def dimuon_step(
        self, *, learning_rate: float, beta1: float, grad_clip_norm: float = 0.0
    ) -> dict[str, float] | None:
        """Apply one Dimuon step (:class:`~.optimizer.Dimuon`), zero the grads.

        Returns ``{"unclipped_grad_l2:mean": norm}`` when ``grad_clip_norm > 0``, else None.
        """
        with self._lock:
            optimizer = self._optimizer
            if not isinstance(optimizer, Dimuon):
                raise UserInputError(self._family_mismatch("dimuon"))
            new_params, metrics = optimizer.step(
                self._params,
                self._grads,
                learning_rate=learning_rate,
                beta1=beta1,
                grad_clip_norm=grad_clip_norm,
            )
            self._apply(new_params)
            return metrics

    def _family_mismatch(self, family: str) -> str:
        return (
            f"a {family} optim_step cannot update a model created with optimizer {self.optimizer!r}"
        )

    def _apply(self, new_params: dict[str, Array]) -> None:
        # replaced, not mutated: a concurrent sample() keeps a consistent snapshot
        self._params = new_params
        self._grads = {key: np.zeros_like(value) for key, value in new_params.items()}
        self._effective_cache = None

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
        topk_sample_logprobs: int = 0,
        prompt_logprobs_last_n: int | None = None,
        prompt_alt_tokens_k: int = 0,
        target_prompt_logprobs: Array | None = None,
    ) -> SampleResult:
        """Sample ``num_samples`` continuations of ``prompt`` (docs/service.rst §5).

        ``temperature`` 0 is greedy; ``top_k`` -1 (or 0) keeps every token; logprobs are those of
        the temperature-scaled distribution before top-k/top-p filtering (at temperature 0, of the
        unscaled one). ``max_tokens=None`` generates up to the context limit. EOS stops unless
        ``stop_tokens`` or ``stop_strings`` is an explicit empty list (no stops at all); stop tokens
        and the token completing a stop string are included, with stop_reason "stop". Prompt
        logprobs are unscaled (temperature 1). The same weights, prompt, parameters and seed give
        the same output; ``seed=None`` draws a fresh one.

        0.38 options: ``topk_sample_logprobs`` (top-k pairs at each generated position, from the
        distribution the token was drawn from), ``prompt_logprobs_last_n`` (only the last N prompt
        logprobs, and top-k prompt rows, are scored; earlier entries are None),
        ``prompt_alt_tokens_k`` (k independent draws at the request's temperature at every prompt
        position after the first, with their logprobs) and ``target_prompt_logprobs`` (the logprob
        of chosen ids at each prompt position after the first; -1 cells get 0.0).
        """
        space = self.token_space
        prompt_arr = as_int_tokens(list(prompt), "prompt", space.size, "")
        if prompt_arr.ndim != 1 or prompt_arr.shape[0] == 0:
            raise UserInputError("prompt must contain at least one token")
        prompt_len = int(prompt_arr.shape[0])
        checked = check_options(
            prompt_len,
            self.context_length,
            space.size,
            num_samples=num_samples,
            max_tokens=max_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            topk_prompt_logprobs=topk_prompt_logprobs,
            topk_sample_logprobs=topk_sample_logprobs,
            prompt_logprobs_last_n=prompt_logprobs_last_n,
            prompt_alt_tokens_k=prompt_alt_tokens_k,
            target_prompt_logprobs=target_prompt_logprobs,
        )
        num_samples, tau, p_top, k_top = (
            checked.num_samples,
            checked.tau,
            checked.p_top,
            checked.k_top,
        )
        top_prompt, top_sample, alt_k = checked.top_prompt, checked.top_sample, checked.alt_k
        last_n, targets, new_tokens = checked.last_n, checked.targets, checked.new_tokens
        stop_ids = {int(token) for token in stop_tokens or ()}
        stops_disabled = (stop_tokens is not None and len(stop_tokens) == 0) or (
            stop_strings is not None and len(stop_strings) == 0
        )
        if not stops_disabled and not space.folded:
            stop_ids.add(EOS_TOKEN_ID)  # vocab.py: a folded model's EOS ids are unknown
        texts = [str(s) for s in stop_strings or ()]
        if any(not s for s in texts):
            raise UserInputError("stop strings must be non-empty")
        if self._stub:
            stub = stub_sample(
                prompt_arr,
                num_samples=num_samples,
                new_tokens=new_tokens,
                stop_ids=stop_ids,
                stop_texts=texts,
                prompt_logprobs=prompt_logprobs,
                top_prompt=top_prompt,
            )
            flat = np.zeros((prompt_len - 1, self.vocab_size), dtype=np.float64)
            return with_prompt_options(
                stub,
                flat,
                flat,
                prompt_arr,
                last_n=last_n,
                alt_k=alt_k,
                targets=targets,
                seed=seed,
                stub_top_sample=top_sample,
            )

        eff = self._effective()
        # vocab.py: the network reads table rows; what it answers is mapped back to ids
        prompt_rows = space.rows(prompt_arr)
        answer_ids = None
        if space.folded:
            answer_ids = space.ids_for_rows(prompt_arr.tolist(), sorted(stop_ids))
        if targets is not None and space.folded:
            targets = np.where(targets >= 0, space.rows(np.maximum(targets, 0)), -1)
        # feed every position except the last generated token
        cache_len = prompt_len + max(new_tokens - 1, 0)
        logits, _, kv = network.forward(
            self._arch, eff, prompt_rows[None, :], record=False, dtype=self._dtype
        )
        prompt_lp: list[float | None] | None = None
        topk_lp: list[list[tuple[int, float]] | None] | None = None
        log_probs = np.zeros((0, self.vocab_size))
        if prompt_logprobs or top_prompt or alt_k or targets is not None:
            log_probs = log_softmax(logits[:-1].astype(np.float64))
        if prompt_logprobs or top_prompt:
            if prompt_logprobs:
                picked = log_probs[np.arange(prompt_len - 1), prompt_rows[1:]]
                prompt_lp = [None, *(float(value) for value in picked)]
            if top_prompt:
                count = min(top_prompt, self.vocab_size)
                order = np.argsort(-log_probs, axis=1, kind="stable")[:, :count]
                topk_lp = [None]
                for row in range(prompt_len - 1):
                    topk_lp.append(
                        [
                            (_answer(answer_ids, tok), float(log_probs[row, tok]))
                            for tok in order[row]
                        ]
                    )
        sequences = generate(
            self._arch,
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
            top_sample=top_sample,
            dtype=self._dtype,
            decode=(space.decoder() if space.folded else load_tokenizer().decode)
            if texts
            else None,
            answer_ids=answer_ids,
        )
        tempered = log_probs
        if alt_k and tau > 0:
            tempered = log_softmax(logits[:-1].astype(np.float64) / tau)
        result = with_prompt_options(
            SampleResult(sequences, prompt_lp, topk_lp),
            log_probs,
            tempered,
            prompt_arr,
            last_n=last_n,
            alt_k=alt_k,
            targets=targets,
            seed=seed,
            greedy=tau == 0,
        )
        if answer_ids is not None and result.alt_tokens is not None:
            result = dataclasses.replace(result, alt_tokens=answer_ids[result.alt_tokens])
        return result


def _answer(answer_ids: Array | None, row: Any) -> int:
    """The token id a table row answers (vocab.py); the row itself when ids are not folded."""
    return int(row) if answer_ids is None else int(answer_ids[int(row)])
