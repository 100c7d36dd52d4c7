"""Async code: await tinker_lite's futures, call the official ``*_async`` twins, run unchanged.

``python docs/howto/async_code.py`` trains a few steps and samples concurrently, inside
``asyncio.run``, against the offline server.
"""

from __future__ import annotations

import argparse
import asyncio
import warnings
from collections.abc import Sequence

import tinker_lite as tinker
from tinker_lite import types

BASE_MODEL = "tinker-lite/tiny-64"


async def train_and_sample(base_url: str, steps: int) -> list[str]:
    """Train ``steps`` steps, then sample three prompts at once; return the answers."""
    with tinker.ServiceClient(base_url=base_url) as service:
        # Client creation returns a future of the client: await it (or call .result()).
        training = await service.create_lora_training_client(BASE_MODEL, rank=8)
        tokenizer = training.get_tokenizer()
        tokens = tokenizer.encode("User: hi\nAssistant: hello\n")
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
        )
        for step in range(steps):
            # Submit both, then await: the step is pipelined as in sync code.
            fwd_bwd = training.forward_backward([datum], "cross_entropy")
            optim = training.optim_step(types.AdamParams(learning_rate=1e-2))
            result = await fwd_bwd
            await optim
            per_token = result.metrics["loss:sum"] / (len(tokens) - 1)
            print(f"step {step}: loss/token {per_token:.3f}")

        sampler = await training.save_weights_and_get_sampling_client()
        params = types.SamplingParams(max_tokens=8, temperature=0.0, stop=["\n"])
        prompts = ["User: hi\nAssistant:", "User: hey\nAssistant:", "User: yo\nAssistant:"]
        # Fan out with asyncio.gather: every request is in flight before the first answer.
        answers = await asyncio.gather(
            *(
                sampler.sample(types.ModelInput.from_ints(tokenizer.encode(p)), 1, params)
                for p in prompts
            )
        )
        return [tokenizer.decode(a.sequences[0].tokens) for a in answers]


async def official_twins(base_url: str) -> int:
    """Code written for the official SDK's ``*_async`` methods runs too (they warn, as the
    official ones do: the SDK deprecates them in favour of awaiting the future)."""
    with tinker.ServiceClient(base_url=base_url) as service:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            capabilities = await service.get_server_capabilities_async()
            training = await service.create_lora_training_client_async(BASE_MODEL, rank=8)
            # Training twins return the future (fut = await tc.forward_async(...)).
            future = await training.save_weights_for_sampler_async("twins")
            saved = await future
        print(f"{len(capabilities.supported_models)} models; saved {saved.path}")
        return len(capabilities.supported_models)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="local://")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    for answer in asyncio.run(train_and_sample(args.base_url, args.steps)):
        print(f"Assistant: {answer!r}")
    asyncio.run(official_twins(args.base_url))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
