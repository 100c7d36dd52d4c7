"""An official-style script runs unchanged: ``python -m tinker_lite.as_tinker`` against
``tinker-lite local serve``, with today's model names.

The script is the official quick-start pattern: tokenizer arithmetic
(``encode(prompt) + encode(completion)``), a few training steps, ``save_weights_for_sampler(name=
...)``, ``create_sampling_client(model_path=...)``, ``sample`` with ``stop=["\\n"]`` and
``tokenizer.decode``. Without ``transformers`` the tokenizer is tinker_lite's light one; where
``transformers`` is installed (``make test-transformers``) it is ``transformers``' own. The local
server names each model's real tokenizer; its files are stood in by the byte tokenizer's, in a
hub cache of the test's own.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.served import served
from tests.support.tokenizer_standin import LLAMA3_TOKENIZER, stand_in_hub_cache

OFFICIAL_STYLE_SCRIPT = """
import sys

import numpy as np
import tinker
from tinker import types

base_model = sys.argv[1]
service_client = tinker.ServiceClient()
training_client = service_client.create_lora_training_client(base_model=base_model, rank=8)
tokenizer = training_client.get_tokenizer()

examples = [
    {"input": "banana split", "output": "anana-bay plit-say"},
    {"input": "quantum physics", "output": "uantum-qay ysics-phay"},
    {"input": "donut shop", "output": "onut-day op-shay"},
]


def process_example(example: dict, tokenizer) -> types.Datum:
    prompt = f"English: {example['input']}\\nPig Latin:"
    prompt_tokens = tokenizer.encode(prompt, add_special_tokens=True)
    prompt_weights = [0] * len(prompt_tokens)
    completion_tokens = tokenizer.encode(f" {example['output']}\\n\\n", add_special_tokens=False)
    completion_weights = [1] * len(completion_tokens)
    tokens = prompt_tokens + completion_tokens
    weights = prompt_weights + completion_weights
    input_tokens = tokens[:-1]
    target_tokens = tokens[1:]
    weights = weights[1:]
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens=input_tokens),
        loss_fn_inputs=dict(weights=weights, target_tokens=target_tokens),
    )


processed_examples = [process_example(ex, tokenizer) for ex in examples]
for _ in range(8):
    fwdbwd_future = training_client.forward_backward(processed_examples, "cross_entropy")
    optim_future = training_client.optim_step(types.AdamParams(learning_rate=1e-2))
    fwdbwd_result = fwdbwd_future.result()
    optim_result = optim_future.result()
    logprobs = np.concatenate([out["logprobs"].tolist() for out in fwdbwd_result.loss_fn_outputs])
    weights = np.concatenate([ex.loss_fn_inputs["weights"].tolist() for ex in processed_examples])
    print(f"loss {-np.dot(logprobs, weights) / weights.sum():.4f}")

sampling_path = training_client.save_weights_for_sampler(name="pig-latin-model").result().path
print("path", sampling_path)
sampling_client = service_client.create_sampling_client(model_path=sampling_path)
prompt = types.ModelInput.from_ints(tokenizer.encode("English: coffee break\\nPig Latin:"))
params = types.SamplingParams(max_tokens=20, temperature=0.0, stop=["\\n"])
future = sampling_client.sample(prompt=prompt, sampling_params=params, num_samples=4)
result = future.result()
for i, seq in enumerate(result.sequences):
    print(f"sample {i} {seq.stop_reason} {tokenizer.decode(seq.tokens)!r}")
print("tokenizer", type(tokenizer).__name__)
"""


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tokenizers the server names for both models, in a hub cache: nothing is downloaded."""
    root = stand_in_hub_cache(
        tmp_path_factory.mktemp("hub"), [LLAMA3_TOKENIZER, "Qwen/Qwen3.5-9B-Base"]
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def server_url(hub_cache: Path) -> Iterator[str]:
    """``tinker-lite local serve`` in its own process, as a user starts it."""
    with served(entry=("tinker_lite.cli", "local", "serve")) as url:
        yield url


@pytest.mark.parametrize("base_model", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3.5-9B-Base"])
def test_official_style_script_runs_unchanged(
    server_url: str, base_model: str, tmp_path: Path
) -> None:
    script = tmp_path / "pig_latin.py"
    script.write_text(OFFICIAL_STYLE_SCRIPT, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINKER")}
    env.update(TINKER_BASE_URL=server_url, HF_HUB_OFFLINE="1", TINKER_TELEMETRY="0")
    result = subprocess.run(
        [sys.executable, "-m", "tinker_lite.as_tinker", str(script), base_model],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    losses = [float(line.split()[1]) for line in lines if line.startswith("loss ")]
    assert len(losses) == 8
    assert losses[-1] < losses[0], losses
    (path,) = [line.split()[1] for line in lines if line.startswith("path ")]
    assert path.startswith("tinker://")
    assert path.endswith("/sampler_weights/pig-latin-model")
    samples = [line.split(" ", 3) for line in lines if line.startswith("sample ")]
    assert len(samples) == 4
    for _, _, stop_reason, text in samples:
        decoded = ast.literal_eval(text)  # the repr the script printed
        # stop=["\n"]: generation ends at the first newline (kept in the tokens) or at max_tokens
        assert "\n" not in decoded[:-1]
        assert (stop_reason == "stop") == decoded.endswith("\n")
    (tokenizer_line,) = [line for line in lines if line.startswith("tokenizer ")]
    assert tokenizer_line.split()[1] in {"LightTokenizer", "TokenizersBackend"}
