"""RL rollouts fanned out over worker processes: a SamplingClient handed to a process pool.

The main process owns the ServiceClient and the TrainingClient; each iteration it saves the
current weights for sampling and hands the SamplingClient to a ``ProcessPoolExecutor``, either
pickled (``--handover pickle``) or as a sampler handle (``--handover handle``: a plain string
from ``get_sampler_handle()``, rebuilt with ``SamplingClient.from_sampler_handle``). Each worker
samples its share of the prompts and returns tokens and logprobs; the main process scores them
(a toy reward: the share of letters), computes group-relative advantages and takes one
``importance_sampling`` step::

    python examples/rl_processes.py --iterations 3 --workers 2 --handover handle

A worker connects to the service itself (credentials from its environment; the handle carries
none) and joins the sampler's session, so its requests never reuse the main process's
``seq_id``s. Workers are started with ``spawn``: a process forked from one that runs client
threads can inherit a held lock.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import tinker_lite as tinker
from tinker_lite import types

BASE_MODEL = "tinker-lite/tiny-64"
PROMPTS = [
    "User: Say something.\nAssistant:",
    "User: Name a word.\nAssistant:",
    "User: Talk to me.\nAssistant:",
    "User: Go on.\nAssistant:",
]

Rollout = tuple[int, list[list[int]], list[list[float]]]


def rollout(
    sampler: tinker.SamplingClient | str, prompt: list[int], group_size: int, seed: int
) -> Rollout:
    """In a worker: sample ``group_size`` completions of ``prompt``; (pid, tokens, logprobs)."""
    if isinstance(sampler, str):
        sampler = tinker.SamplingClient.from_sampler_handle(sampler)
    params = types.SamplingParams(max_tokens=8, temperature=1.0, seed=seed, stop=["\n"])
    response = sampler.sample(types.ModelInput.from_ints(prompt), group_size, params).result()
    tokens = [list(s.tokens) for s in response.sequences]
    logprobs = [list(s.logprobs or []) for s in response.sequences]
    return os.getpid(), tokens, logprobs


def reward(text: str) -> float:
    """Toy reward in [0, 1]: the share of ASCII letters in the completion."""
    return sum(ch.isascii() and ch.isalpha() for ch in text) / len(text) if text else 0.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL") or "local://")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--handover", choices=("pickle", "handle"), default="handle")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the iterations; print samples, workers used and rewards; return 0."""
    args = parse_args(argv)
    spawn = multiprocessing.get_context("spawn")
    with (
        tinker.ServiceClient(base_url=args.base_url) as service,
        ProcessPoolExecutor(args.workers, mp_context=spawn) as pool,
    ):
        training = service.create_lora_training_client(BASE_MODEL, rank=8, seed=0).result()
        tokenizer = training.get_tokenizer()
        prompts = [tokenizer.encode(p) for p in PROMPTS]
        for iteration in range(1, args.iterations + 1):
            sampler = training.save_weights_and_get_sampling_client().result()
            handed: tinker.SamplingClient | str = (
                sampler.get_sampler_handle() if args.handover == "handle" else sampler
            )
            futures = [
                pool.submit(rollout, handed, p, args.group_size, iteration * 100 + i)
                for i, p in enumerate(prompts)
            ]
            results = [f.result() for f in futures]
            data: list[types.Datum] = []
            scores: list[float] = []
            for prompt, (_, tokens, logprobs) in zip(prompts, results, strict=True):
                group = [reward(tokenizer.decode(t)) for t in tokens]
                scores += group
                baseline = float(np.mean(group))
                for seq, lps, score in zip(tokens, logprobs, group, strict=True):
                    if score == baseline or not seq:
                        continue
                    n_prompt = len(prompt) - 1
                    full = prompt + seq
                    data.append(
                        types.Datum(
                            model_input=types.ModelInput.from_ints(full[:-1]),
                            loss_fn_inputs={
                                "target_tokens": full[1:],
                                "logprobs": [0.0] * n_prompt + lps,
                                "advantages": [0.0] * n_prompt + [score - baseline] * len(seq),
                            },
                        )
                    )
            pids = {pid for pid, _, _ in results}
            line = (
                f"iteration {iteration}: samples {len(scores)} from {len(pids)} worker "
                f"processes  mean reward {float(np.mean(scores)):.3f}  datums {len(data)}"
            )
            if data:
                training.forward_backward(data, "importance_sampling").result()
                training.optim_step(types.AdamParams(learning_rate=2e-2)).result()
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
