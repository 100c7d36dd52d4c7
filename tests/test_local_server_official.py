"""The official Tinker SDK 0.38 (installed by bench/setup_official.sh) trains and samples here.

Skipped when the official SDK's virtualenv is absent. The SDK runs in its own process against an
in-process LocalServer; the script asserts as it goes and prints ``OK`` at the end.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tinker_lite.local import LocalServer

VENV = Path(
    os.environ.get("TINKER_OFFICIAL_VENV")
    or Path.home() / ".cache" / "tinker-lite-bench" / "official-venv"
)
PYTHON = VENV / "bin" / "python"

SCRIPT = r"""
import sys
import tinker
from tinker import types

url = sys.argv[1]
service = tinker.ServiceClient(base_url=url, api_key="tml-local-test")
training = service.create_lora_training_client(base_model="Qwen/Qwen3-8B", rank=8)
tokens = list(b"hello world, hello tinker")
datum = types.Datum(
    model_input=types.ModelInput.from_ints(tokens[:-1]),
    loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
)
losses = []
for _ in range(3):
    out = training.forward_backward([datum] * 3, "cross_entropy").result()
    training.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    losses.append(out.metrics["loss:sum"])
assert losses[2] < losses[0], losses
forward = training.forward([datum], "cross_entropy").result()
logprobs = forward.loss_fn_outputs[0]["logprobs"].tolist()
state_path = training.save_state("state-1").result().path
sampler_path = training.save_weights_for_sampler("sampler-1").result().path
sampler = service.create_sampling_client(model_path=sampler_path)
sample = sampler.sample(
    types.ModelInput.from_ints(tokens[:5]), num_samples=2,
    sampling_params=types.SamplingParams(max_tokens=8, seed=1),
).result()
assert len(sample.sequences) == 2 and len(sample.sequences[0].tokens) == 8
prompt_lp = sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()
assert prompt_lp[0] is None
assert all(abs(a - b) < 1e-3 for a, b in zip(prompt_lp[1:], logprobs)), (prompt_lp, logprobs)
restored = service.create_training_client_from_state_with_optimizer(state_path)
again = restored.forward([datum], "cross_entropy").result()
assert again.loss_fn_outputs[0]["logprobs"].tolist() == logprobs
rest = service.create_rest_client()
run_id = state_path.split("/")[2]
ids = sorted(c.checkpoint_id for c in rest.list_checkpoints(run_id).result().checkpoints)
assert ids == ["sampler_weights/sampler-1", "weights/state-1"], ids
info = rest.get_weights_info_by_tinker_path(state_path).result()
assert info.lora_rank == 8
print("OK")
"""


@pytest.mark.skipif(not PYTHON.exists(), reason="official SDK venv not installed")
def test_official_sdk_trains_and_samples() -> None:
    with LocalServer() as url:
        result = subprocess.run(
            [str(PYTHON), "-W", "ignore", "-c", SCRIPT, url],
            check=False,
            capture_output=True,
            text=True,
            timeout=110,
            env={k: v for k, v in os.environ.items() if not k.startswith("TINKER_")},
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")
