"""A custom loss computed on the client with numpy: ``forward_backward_custom``.

The service's losses sum over tokens. Here each sequence's loss is its *mean* negative
log-likelihood over the answer tokens, so long and short answers weigh the same. The loss
function receives the model's log-probabilities (one numpy array per datum) and returns the
loss, its gradient with respect to those log-probabilities, and metrics::

    def loss_fn(data, logprobs) -> (loss, grads, metrics)

No torch is needed. Where torch is installed the loss function receives torch tensors instead,
as in the official SDK; this one reads them as numpy arrays (``as_numpy``) and still returns
numpy gradients. ``forward_backward_custom`` then trains with cross-entropy weights equal to
minus that gradient, which gives the model exactly the custom loss's gradient. To show it, the
script trains a second, identically initialised model with the built-in ``cross_entropy`` and
weights divided by each answer's length (the same objective written as a weighted sum) and
checks that both models end up with the same log-probabilities::

    python examples/custom_loss.py --steps 5
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import tinker_lite as tinker
from tinker_lite import types

BASE_MODEL = "tinker-lite/tiny-64"
EXAMPLES = [
    ("Spell cat.", "c-a-t"),
    ("Count to five.", "one two three four five"),
    ("Yes or no?", "yes"),
]


def make_datum(tokenizer: Any, question: str, answer: str) -> types.Datum:
    prompt = tokenizer.encode(f"User: {question}\nAssistant:")
    completion = tokenizer.encode(f" {answer}\n")
    tokens = prompt + completion
    weights = [0.0] * len(prompt) + [1.0] * len(completion)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights[1:]},
    )


def as_numpy(values: Any) -> np.ndarray:
    """Log-probabilities as a numpy array (a torch tensor, given where torch is installed, is
    detached from its graph first)."""
    detach = getattr(values, "detach", None)
    return np.asarray(detach() if detach is not None else values)


def mean_nll(
    data: list[types.Datum], logprobs: list[Any]
) -> tuple[float, list[np.ndarray], dict[str, float]]:
    """Sum over sequences of the mean NLL of the answer tokens; gradient by hand.

    loss = sum_i sum_t -w_i[t] * lp_i[t] / n_i, with n_i = sum_t w_i[t],
    so d loss / d lp_i[t] = -w_i[t] / n_i.
    """
    loss = 0.0
    grads: list[np.ndarray] = []
    for datum, values in zip(data, logprobs, strict=True):
        lp = as_numpy(values)
        weights = datum.loss_fn_inputs["weights"].to_numpy().astype(np.float64)
        count = max(float(weights.sum()), 1.0)
        loss += float(-(weights * lp).sum() / count)
        grads.append(-weights / count)
    return loss, grads, {"mean_nll": loss / len(data)}


def length_normalised(datum: types.Datum) -> types.Datum:
    """The same objective for the built-in loss: weights divided by the answer length."""
    weights = datum.loss_fn_inputs["weights"].to_numpy().astype(np.float64)
    return types.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={
            "target_tokens": datum.loss_fn_inputs["target_tokens"],
            "weights": weights / max(float(weights.sum()), 1.0),
        },
    )


def logprobs_of(training: Any, data: list[types.Datum]) -> np.ndarray:
    output = training.forward(data, "cross_entropy").result()
    return np.concatenate([o["logprobs"].to_numpy().ravel() for o in output.loss_fn_outputs])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL") or "local://")
    parser.add_argument("--base-model", default=BASE_MODEL)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Train with the custom loss and with its built-in equivalent; 0 when they agree."""
    args = parse_args(argv)
    adam = types.AdamParams(learning_rate=args.learning_rate)
    with tinker.ServiceClient(base_url=args.base_url) as service:
        # Same base model, same LoRA seed: both start from identical weights.
        custom = service.create_lora_training_client(args.base_model, rank=8, seed=7).result()
        builtin = service.create_lora_training_client(args.base_model, rank=8, seed=7).result()
        tokenizer = custom.get_tokenizer()
        data = [make_datum(tokenizer, q, a) for q, a in EXAMPLES]
        scaled = [length_normalised(d) for d in data]

        for step in range(1, args.steps + 1):
            result = custom.forward_backward_custom(data, mean_nll).result()
            custom.optim_step(adam).result()
            builtin.forward_backward(scaled, "cross_entropy").result()
            builtin.optim_step(adam).result()
            print(f"step {step}: mean NLL per answer {result.metrics['mean_nll']:.4f}")

        difference = float(np.max(np.abs(logprobs_of(custom, data) - logprobs_of(builtin, data))))
    print(f"max |logprob difference| custom vs built-in: {difference:.3g}")
    if difference > 1e-4:
        print("the custom loss did not train like its built-in equivalent")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
