"""numpy is loaded only where it is needed: not by import, REST calls, list-built models, sampling.

Each check runs a fresh interpreter (numpy, once imported, stays in ``sys.modules``) against
``python -m tinker_lite.local serve`` started as a separate process: the in-process
``local://`` server imports numpy itself for its model.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
API_KEY = "tml-lazy-numpy"

# The child prints one JSON line: where numpy was first seen loaded, and what it got back.
CHILD = r"""
import json, sys

steps = []


def step(name):
    steps.append([name, "numpy" in sys.modules])


import tinker_lite as tinker
from tinker_lite import types

step("import")
service = tinker.ServiceClient(base_url=sys.argv[1], wire=sys.argv[2])
rest = tinker.RestClient(service)
capabilities = rest.get_server_capabilities().result()
step("rest call")

datum = types.Datum(
    model_input=types.ModelInput.from_ints([1, 2, 3, 4, 5, 6, 7, 8]),
    loss_fn_inputs={"target_tokens": [2, 3, 4, 5, 6, 7, 8, 9], "weights": [1.0] * 8},
)
matrix = types.TensorData(data=[[1.5, 2.5], [3.5, 4.5]], dtype="float32")
built = {
    "weights": datum.loss_fn_inputs["weights"].data,
    "target_shape": datum.loss_fn_inputs["target_tokens"].shape,
    "matrix_data": matrix.data,
    "matrix_list": matrix.tolist(),
    "tokens": datum.model_input.to_ints(),
}
errors = {}
for name, call in {
    "batch_dim": lambda: types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={"target_tokens": [[2, 3, 4]]},
    ),
    "float_token": lambda: types.ModelInput.from_ints([1, 2.5]),
    "non_integral_target": lambda: types.Datum(
        model_input=types.ModelInput.from_ints([1, 2]),
        loss_fn_inputs={"target_tokens": [1.5, 2]},
    ),
    "nan_weight": lambda: tinker.validate(
        [
            types.Datum(
                model_input=types.ModelInput.from_ints([1, 2]),
                loss_fn_inputs={"target_tokens": [2, 3], "weights": [1.0, float("nan")]},
            )
        ]
    ),
}.items():
    try:
        call()
    except tinker.InvalidInputError as exc:
        errors[name] = str(exc)
step("lists")

model = capabilities.supported_models[0].model_name
sampler = service.create_sampling_client(base_model=model)
prompt = types.ModelInput.from_ints([1, 2, 3, 4])
result = sampler.sample(
    prompt,
    num_samples=2,
    sampling_params=types.SamplingParams(max_tokens=3, seed=1),
    include_prompt_logprobs=True,
    topk_sample_logprobs=2,
    target_prompt_logprobs=types.TensorData(data=[[5], [6], [7]], dtype="int64"),
).result()
logprobs = sampler.compute_logprobs(prompt).result()
sequence = result.sequences[0]
step("sample")

sampled = {
    "token_types": sorted({type(t).__name__ for t in sequence.tokens}),
    "logprob_types": sorted({type(v).__name__ for v in sequence.logprobs}),
    "topk_cell": [type(v).__name__ for v in sequence.topk_logprobs[0][0]],
    "prompt_logprobs": [None if v is None else type(v).__name__ for v in result.prompt_logprobs],
    "target_shape": result.target_prompt_logprobs.shape,
    "target_data_types": sorted({type(v).__name__ for v in result.target_prompt_logprobs.data}),
    "computed": [None if v is None else type(v).__name__ for v in logprobs],
    "proto_decoder_loaded": "tinker_lite._proto" in sys.modules,
}

array = datum.loss_fn_inputs["weights"].to_numpy()
step("to_numpy")
sampled["to_numpy"] = [type(array).__module__, array.dtype.name, list(array.shape)]
service.close()
print(json.dumps({"steps": steps, "built": built, "errors": errors, "sampled": sampled}))
"""


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m tinker_lite.local serve`` in its own process; its URL."""
    env = _env()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tinker_lite.local",
            "serve",
            "--port",
            "0",
            "--api-key",
            API_KEY,
            "--data-dir",
            str(tmp_path_factory.mktemp("lazy-numpy-data")),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        url = lines.get(timeout=60).strip()
    except queue.Empty:
        proc.kill()
        proc.communicate(timeout=10)
        pytest.fail("the local server did not print its URL within 60 s")
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=20)  # also closes its stdout pipe
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=10)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINKER", "PYTEST"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["TINKER_API_KEY"] = API_KEY
    env["TINKER_TELEMETRY"] = "0"
    return env


def _run_child(url: str, wire: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, wire],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("wire", ["json", "protobuf"])
def test_numpy_is_not_loaded_until_an_array_is_asked_for(server_url: str, wire: str) -> None:
    report = _run_child(server_url, wire)

    assert report["steps"] == [
        ["import", False],
        ["rest call", False],
        ["lists", False],
        ["sample", False],
        ["to_numpy", True],
    ]
    # Results keep the official types: lists of Python ints and floats.
    sampled = report["sampled"]
    assert sampled["token_types"] == ["int"]
    assert sampled["logprob_types"] == ["float"]
    assert sampled["topk_cell"] == ["int", "float"]
    assert sampled["prompt_logprobs"][0] is None
    assert set(sampled["prompt_logprobs"][1:]) == {"float"}
    assert sampled["computed"][0] is None
    assert set(sampled["computed"][1:]) == {"float"}
    assert sampled["target_shape"] == [3, 1]
    assert sampled["target_data_types"] == ["float"]
    # The protobuf answer was read by the protobuf decoder, without numpy.
    assert sampled["proto_decoder_loaded"] is (wire == "protobuf")
    assert sampled["to_numpy"] == ["numpy", "float32", [8]]


def test_list_built_models_and_their_checks_need_no_numpy(server_url: str) -> None:
    report = _run_child(server_url, "json")

    assert report["built"] == {
        "weights": [1.0] * 8,
        "target_shape": [8],
        "matrix_data": [1.5, 2.5, 3.5, 4.5],
        "matrix_list": [[1.5, 2.5], [3.5, 4.5]],
        "tokens": [1, 2, 3, 4, 5, 6, 7, 8],
    }
    # Every bad input is still refused, naming the field, before numpy was ever loaded.
    errors = report["errors"]
    assert set(errors) == {"batch_dim", "float_token", "non_integral_target", "nan_weight"}
    assert "target_tokens" in errors["batch_dim"]
    assert "batch dimension" in errors["batch_dim"]
    assert "tokens" in errors["float_token"]
    assert "integers" in errors["float_token"]
    assert "target_tokens" in errors["non_integral_target"]
    assert "integral" in errors["non_integral_target"]
    assert "weights" in errors["nan_weight"]
    assert "non-finite" in errors["nan_weight"]
    assert ["lists", False] in report["steps"]
