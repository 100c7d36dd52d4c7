"""Supervised fine-tuning on a toy chat dataset, a loss curve, then sampling from the result.

Runs against the offline server by default (``local://``); pass ``--base-url`` (or set
``TINKER_BASE_URL`` and ``TINKER_API_KEY``) to use the hosted service::

    python examples/quickstart.py --steps 30

The prompt is formatted here by hand as ``"User: ...\\nAssistant:"``, so that the example runs on
the base install (``get_tokenizer().apply_chat_template(...)`` renders the model's own chat
template when ``jinja2`` is installed). Only the answer tokens carry weight in the loss: the
model learns to answer, not to ask.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import tinker_lite as tinker
from tinker_lite import types

BASE_MODEL = "tinker-lite/tiny-64"

CONVERSATIONS = [
    ("What is 2+2?", "4"),
    ("What colour is the sky?", "blue"),
    ("Say hello.", "hello"),
    ("What is the opposite of up?", "down"),
]


def format_prompt(question: str) -> str:
    """The chat format of this example: a user turn, then the assistant's cue."""
    return f"User: {question}\nAssistant:"


def make_datum(tokenizer: Any, question: str, answer: str) -> types.Datum:
    """One training example: the whole conversation as input, loss only on the answer."""
    prompt = tokenizer.encode(format_prompt(question))
    completion = tokenizer.encode(f" {answer}\n")
    tokens = prompt + completion
    weights = [0.0] * len(prompt) + [1.0] * len(completion)
    # Position i of the input predicts token i + 1: shift targets and weights by one.
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights[1:]},
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL") or "local://")
    parser.add_argument("--base-model", default=BASE_MODEL)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=5e-3)
    parser.add_argument("--max-tokens", type=int, default=8)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Train for ``--steps`` steps, print the loss curve and sample answers; return 0."""
    args = parse_args(argv)
    with tinker.ServiceClient(base_url=args.base_url) as service:
        training = service.create_lora_training_client(args.base_model, rank=args.rank).result()
        tokenizer = training.get_tokenizer()
        data = [make_datum(tokenizer, q, a) for q, a in CONVERSATIONS]
        answer_tokens = sum(float(d.loss_fn_inputs["weights"].to_numpy().sum()) for d in data)
        # A dry run of the checks forward_backward makes: bad data fails here, before training.
        report = tinker.validate(data, "cross_entropy")
        print(f"batch ok: {report.n_datums} datums, {report.n_chunks} request(s) per step")

        losses: list[float] = []
        for step in range(1, args.steps + 1):
            # Submit both before waiting: the service queues them back to back.
            fwd_bwd = training.forward_backward(data, "cross_entropy")
            optim = training.optim_step(types.AdamParams(learning_rate=args.learning_rate))
            loss = fwd_bwd.result().metrics["loss:sum"] / answer_tokens
            optim.result()
            losses.append(loss)
            print(f"step {step:3d}  loss/token {loss:.4f}  {'#' * max(1, round(loss * 10))}")

        sampler = training.save_weights_and_get_sampling_client().result()
        params = types.SamplingParams(max_tokens=args.max_tokens, temperature=0.0, stop=["\n"])
        for question, expected in CONVERSATIONS:
            prompt = types.ModelInput.from_ints(tokenizer.encode(format_prompt(question)))
            result = sampler.sample(prompt, 1, params).result()
            answer = tokenizer.decode(result.sequences[0].tokens).strip()
            print(f"{format_prompt(question)} {answer!r} (trained on {expected!r})")

    print(f"loss/token: {losses[0]:.4f} -> {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
