"""Save the training state, crash, resume with the optimizer state, and continue exactly.

A long job saves its state every few steps with ``save_state(name)``: the weights *and* the
Adam moments. After a crash, a new process finds the newest saved state through the REST API
and continues with ``create_training_client_from_state_with_optimizer``. This script plays both
processes against one server and checks that the resumed run takes the very same next step
as the run that crashed (the model's log-probabilities on a probe sequence match)::

    python examples/resume.py --steps 5 --compare-without-optimizer

With ``--compare-without-optimizer`` it also resumes *without* the optimizer state
(``create_training_client_from_state``), which restarts Adam and therefore takes a different
step. With ``local://`` (the default) the script starts one offline server for both phases.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

import tinker_lite as tinker
from tinker_lite import types

BASE_MODEL = "tinker-lite/tiny-64"
TEXTS = [
    "User: Name a fruit.\nAssistant: apple\n",
    "User: Name a colour.\nAssistant: green\n",
    "User: Name an animal.\nAssistant: otter\n",
]
PROBE = "User: Name a tree.\nAssistant: oak\n"
STATE_PREFIX = "resume-demo-step-"


class SimulatedCrash(RuntimeError):
    """Stands in for whatever kills a real job (OOM, preemption, a reboot)."""


def datum(tokenizer: Any, text: str) -> types.Datum:
    tokens = tokenizer.encode(text)
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def train_step(training: Any, tokenizer: Any, step: int, learning_rate: float) -> float:
    """One optimizer step on the batch for ``step`` (the same batch whenever it is replayed)."""
    batch = [datum(tokenizer, TEXTS[(step + i) % len(TEXTS)]) for i in range(2)]
    fwd_bwd = training.forward_backward(batch, "cross_entropy")
    optim = training.optim_step(types.AdamParams(learning_rate=learning_rate))
    loss = float(fwd_bwd.result().metrics["loss:sum"])
    optim.result()
    return loss


def probe_logprobs(training: Any, tokenizer: Any) -> np.ndarray:
    """The model's log-probabilities on a fixed sequence (a forward pass: no gradient)."""
    output = training.forward([datum(tokenizer, PROBE)], "cross_entropy").result()
    return np.asarray(output.loss_fn_outputs[0]["logprobs"].to_numpy(), dtype=np.float64)


def latest_state(service: Any, run_id: str) -> tuple[str, int]:
    """The newest ``save_state`` checkpoint of a run, and the step it was saved at."""
    rest = tinker.RestClient(service)
    listing = rest.list_checkpoints(run_id).result()
    states = [
        c
        for c in listing.checkpoints
        if c.checkpoint_type == "training" and c.checkpoint_id.startswith("weights/" + STATE_PREFIX)
    ]
    if not states:
        raise LookupError(f"run {run_id} has no saved state to resume from")
    newest = max(states, key=lambda c: c.time)
    return newest.tinker_path, int(newest.checkpoint_id.rsplit("-", 1)[1])


@contextlib.contextmanager
def server_url(base_url: str) -> Iterator[str]:
    """One server for both phases: with ``local://`` start it here, else use ``base_url``."""
    if not base_url.startswith("local://"):
        yield base_url
        return
    from tinker_lite.local import LocalServer

    with LocalServer() as url:
        yield url


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("TINKER_BASE_URL") or "local://")
    parser.add_argument("--base-model", default=BASE_MODEL)
    parser.add_argument("--steps", type=int, default=5, help="steps before the saved state")
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--compare-without-optimizer", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run, crash, resume; return 0 when the resumed step matches the original one."""
    args = parse_args(argv)
    with server_url(args.base_url) as url:
        # Phase 1: train, save the state, take one more step, then "crash".
        reference: np.ndarray | None = None
        run_id = ""
        try:
            with tinker.ServiceClient(base_url=url) as service:
                training = service.create_lora_training_client(
                    args.base_model, rank=8, seed=0
                ).result()
                run_id = training.model_id
                tokenizer = training.get_tokenizer()
                for step in range(1, args.steps + 1):
                    loss = train_step(training, tokenizer, step, args.learning_rate)
                    print(f"step {step}: loss {loss:.4f}")
                path = training.save_state(f"{STATE_PREFIX}{args.steps}").result().path
                print(f"saved {path}")
                train_step(training, tokenizer, args.steps + 1, args.learning_rate)
                reference = probe_logprobs(training, tokenizer)
                print(f"step {args.steps + 1}: done, then the job crashes")
                raise SimulatedCrash("the machine went away")
        except SimulatedCrash as crash:
            print(f"crashed: {crash}")
        assert reference is not None

        # Phase 2: a new process finds the newest state and continues from it.
        with tinker.ServiceClient(base_url=url) as service:
            path, saved_step = latest_state(service, run_id)
            print(f"resuming from {path} (step {saved_step})")
            resumed = service.create_training_client_from_state_with_optimizer(path).result()
            tokenizer = resumed.get_tokenizer()
            train_step(resumed, tokenizer, saved_step + 1, args.learning_rate)
            drift = float(np.max(np.abs(probe_logprobs(resumed, tokenizer) - reference)))
            print(
                f"max |logprob difference| after step {saved_step + 1}, with optimizer: {drift:.3g}"
            )

            if args.compare_without_optimizer:
                fresh = service.create_training_client_from_state(path).result()
                train_step(fresh, tokenizer, saved_step + 1, args.learning_rate)
                fresh_drift = float(np.max(np.abs(probe_logprobs(fresh, tokenizer) - reference)))
                print(
                    f"max |logprob difference| after step {saved_step + 1}, "
                    f"without optimizer: {fresh_drift:.3g}"
                )

    if drift > 1e-4:
        print("the resumed run diverged from the original one")
        return 1
    print("resumed exactly where the crashed run left off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
