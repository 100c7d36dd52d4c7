"""A training loop written for the official Tinker SDK, run with ``import tinker_lite as tinker``.

Only the import line differs from code written for the official SDK: a LoRA training client,
``forward_backward`` + ``optim_step`` pipelined for five steps (both futures are requested before
waiting on either), then ``save_weights_and_get_sampling_client`` and a sample. It runs against
the offline server by default (``local://``); set ``TINKER_BASE_URL`` / ``TINKER_API_KEY`` (or pass
``--base-url``) to train on the hosted service::

    python examples/official_style_loop.py
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import tinker_lite as tinker
from tinker_lite import types

EXAMPLES = [
    ("The capital of France is", " Paris."),
    ("Two plus two equals", " four."),
    ("The sky is", " blue."),
]


def make_datum(tokenizer: Any, prompt: str, completion: str) -> types.Datum:
    """One supervised example: the loss covers the completion tokens only."""
    prompt_tokens = tokenizer.encode(prompt)
    completion_tokens = tokenizer.encode(completion)
    tokens = prompt_tokens + completion_tokens
    weights = [0.0] * len(prompt_tokens) + [1.0] * len(completion_tokens)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights[1:]},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL") or "local://")
    parser.add_argument("--base-model", default="meta-llama/Llama-3.2-1B")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)

    service_client = tinker.ServiceClient(base_url=args.base_url)
    training_client = service_client.create_lora_training_client(
        base_model=args.base_model, rank=16
    ).result()
    tokenizer = training_client.get_tokenizer()
    data = [make_datum(tokenizer, prompt, completion) for prompt, completion in EXAMPLES]

    for step in range(args.steps):
        fwdbwd_future = training_client.forward_backward(data, "cross_entropy")
        optim_future = training_client.optim_step(types.AdamParams(learning_rate=1e-2))
        fwdbwd_result = fwdbwd_future.result()
        optim_future.result()
        tokens = sum(float(sum(datum.loss_fn_inputs["weights"].tolist())) for datum in data)
        print(f"step {step}: loss per token {fwdbwd_result.metrics['loss:sum'] / tokens:.4f}")

    sampling_client = training_client.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(tokenizer.encode(EXAMPLES[0][0]))
    params = types.SamplingParams(max_tokens=8, temperature=0.0, stop=["\n"])
    result = sampling_client.sample(prompt=prompt, num_samples=1, sampling_params=params).result()
    print("sample:", repr(tokenizer.decode(result.sequences[0].tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
