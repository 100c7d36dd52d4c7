"""A small on-policy RL loop: fan-out sampling, group-relative advantages, IS or PPO updates.

Each iteration snapshots the current weights for sampling, sends every prompt's sample request
at once (the futures resolve in parallel; a progress bar shows them on a terminal), scores the
completions with a toy reward (the share of letters in the answer), turns rewards into
advantages relative to each prompt's group mean, and takes one optimizer step with the
``importance_sampling`` or ``ppo`` loss::

    python examples/rl_loop.py --iterations 5 --loss ppo

The datums follow the RL layout of the service: the prompt and completion as one sequence,
``target_tokens`` shifted by one, and the sampler's ``logprobs`` and the ``advantages`` set on
completion positions only (zero on the prompt, which masks it). Because the sampler runs on the
current weights, the learner's log-probabilities equal the sampler's; the printed "logprob gap"
checks it (an off-policy gap shows up there first).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import tinker_lite as tinker
from tinker_lite import gather, types

BASE_MODEL = "tinker-lite/tiny-64"
PROMPTS = [
    "User: Say something.\nAssistant:",
    "User: Name a word.\nAssistant:",
    "User: Talk to me.\nAssistant:",
    "User: Go on.\nAssistant:",
]


def reward(text: str) -> float:
    """Toy reward in [0, 1]: the share of ASCII letters in the completion."""
    if not text:
        return 0.0
    return sum(ch.isascii() and ch.isalpha() for ch in text) / len(text)


def rl_datum(prompt: list[int], sequence: types.SampledSequence, advantage: float) -> types.Datum:
    """Prompt + completion as one sequence; logprobs and advantages on completion positions."""
    if sequence.logprobs is None:
        raise ValueError("the sampler returned no logprobs")
    tokens = prompt + list(sequence.tokens)
    n_prompt = len(prompt) - 1  # input positions that predict prompt tokens
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tokens[1:],
            "logprobs": [0.0] * n_prompt + list(sequence.logprobs),
            "advantages": [0.0] * n_prompt + [advantage] * len(sequence.tokens),
        },
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL") or "local://")
    parser.add_argument("--base-model", default=BASE_MODEL)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--group-size", type=int, default=8, help="samples per prompt")
    parser.add_argument("--max-tokens", type=int, default=12)
    parser.add_argument("--loss", choices=("importance_sampling", "ppo"), default="ppo")
    parser.add_argument("--learning-rate", type=float, default=5e-2)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``--iterations`` RL iterations and print rewards; return 0."""
    args = parse_args(argv)
    # PPO clips the probability ratio to [0.8, 1.2] (the service's defaults, given explicitly).
    config = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2} if args.loss == "ppo" else None
    rewards_per_iteration: list[float] = []
    with tinker.ServiceClient(base_url=args.base_url) as service:
        training = service.create_lora_training_client(args.base_model, rank=8, seed=0).result()
        tokenizer = training.get_tokenizer()
        prompts = [tokenizer.encode(p) for p in PROMPTS]

        for iteration in range(1, args.iterations + 1):
            sampler = training.save_weights_and_get_sampling_client().result()
            params = types.SamplingParams(
                max_tokens=args.max_tokens, temperature=1.0, seed=iteration, stop=["\n"]
            )
            # Fan out: every request is in flight before the first result is awaited.
            futures = [
                sampler.sample(types.ModelInput.from_ints(p), args.group_size, params)
                for p in prompts
            ]
            responses: list[types.SampleResponse] = gather(futures, desc="sampling")

            data: list[types.Datum] = []
            sampler_logprobs: list[np.ndarray] = []
            all_rewards: list[float] = []
            for prompt, response in zip(prompts, responses, strict=True):
                scores = [reward(tokenizer.decode(s.tokens)) for s in response.sequences]
                all_rewards.extend(scores)
                baseline = float(np.mean(scores))
                for sequence, score in zip(response.sequences, scores, strict=True):
                    if score == baseline or not sequence.tokens:
                        continue  # no learning signal
                    data.append(rl_datum(prompt, sequence, score - baseline))
                    sampler_logprobs.append(np.asarray(sequence.logprobs, dtype=np.float64))

            mean_reward = float(np.mean(all_rewards))
            rewards_per_iteration.append(mean_reward)
            summary = (
                f"iteration {iteration}: samples {len(all_rewards)}  mean reward "
                f"{mean_reward:.3f}  datums {len(data)}"
            )
            if not data:
                print(summary + "  (every group tied: no update)")
                continue
            fwd_bwd = training.forward_backward(data, args.loss, config)
            optim = training.optim_step(types.AdamParams(learning_rate=args.learning_rate))
            output: Any = fwd_bwd.result()
            optim.result()
            gap = max(
                float(np.max(np.abs(out["logprobs"].to_numpy()[-len(lp) :] - lp)))
                for out, lp in zip(output.loss_fn_outputs, sampler_logprobs, strict=True)
            )
            print(f"{summary}  loss {output.metrics['loss:sum']:.3f}  logprob gap {gap:.2g}")

    print(f"mean reward: {rewards_per_iteration[0]:.3f} -> {rewards_per_iteration[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
