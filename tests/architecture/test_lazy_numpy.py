"""numpy is loaded only where it is needed: not by import, REST calls, list-built models, sampling.

Each check runs a fresh interpreter (numpy, once imported, stays in ``sys.modules``) against
``python -m tinker_lite.local serve`` started as a separate process: the in-process
``local://`` server imports numpy itself for its model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.paths import REPO
from tests.support.served import served

if TYPE_CHECKING:  # imported by each test itself: the tests watch what importing loads
    from tinker_lite.types import TensorDtype

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
    "proto_decoder_loaded": "tinker_lite._codec.proto" in sys.modules,
    "never_loaded": [
        name
        for name in ("tokenizers", "tinker_lite.cli", "tinker_lite.local", "torch")
        if name in sys.modules
    ],
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
    data_dir = str(tmp_path_factory.mktemp("lazy-numpy-data"))
    with served("--api-key", API_KEY, "--data-dir", data_dir) as url:
        yield url


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
    # Nor do the tokenizer library, the CLI or the local server (it runs in its own process).
    assert sampled["never_loaded"] == []
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


# ---------------------------------------------------------------------------------------------
# Lists are read by the stdlib (short, or numpy not loaded) or by numpy (long, numpy loaded):
# both readings give the same model, the same bytes and the same errors.

LIST_INPUTS: list[tuple[str, Any, str]] = [
    ("ints as float32", [1, 2, 3], "float32"),
    ("floats", [0.1, -2.5, 1e-8, 3.4e38], "float32"),
    ("bools", [True, False, True], "int64"),
    ("integral floats as int64", [1.0, -2.0, 2.0**53], "int64"),
    ("nested", [[1.5, 2.5, 3.5], [4.5, 5.5, 6.5]], "float32"),
    ("nested tuples", ((1, 2), (3, 4), (5, 6)), "int64"),
    ("empty", [], "float32"),
    ("empty rows", [[], []], "int64"),
]


@pytest.fixture(params=["stdlib", "numpy"])
def list_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which reading lists get: the stdlib's for every length, or numpy's for every length."""
    from tinker_lite.types import _common

    monkeypatch.setattr(_common, "_NUMPY_FROM", 10**9 if request.param == "stdlib" else 0)
    reader: str = request.param
    return reader


@pytest.mark.parametrize(
    ("values", "dtype"), [p[1:] for p in LIST_INPUTS], ids=[p[0] for p in LIST_INPUTS]
)
def test_a_list_reads_the_same_with_or_without_numpy(
    list_reader: str, values: Any, dtype: TensorDtype
) -> None:
    import numpy as np

    from tinker_lite import types
    from tinker_lite._codec import proto as _proto

    tensor = types.TensorData(data=values, dtype=dtype)
    stored = type(tensor._values).__module__  # before to_numpy(), which keeps a numpy view
    assert stored == ("array" if list_reader == "stdlib" else "numpy")
    expected = np.asarray(values, dtype=np.float32 if dtype == "float32" else np.int64)
    assert tensor.data == expected.reshape(-1).tolist()
    assert tensor.tolist() == expected.tolist()
    assert tensor.shape == (list(expected.shape) if expected.ndim > 1 else None)
    assert tensor == types.TensorData.from_numpy(expected) or not expected.size
    assert np.array_equal(tensor.to_numpy(), expected)
    if expected.ndim == 1 and expected.size:
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(list(range(1, expected.size + 1))),
            loss_fn_inputs={"logprobs": values},
        )
        from_numpy = types.Datum(
            model_input=types.ModelInput.from_ints(np.arange(1, expected.size + 1)),
            loss_fn_inputs={"logprobs": expected.astype(np.float32)},
        )
        assert _encode(_proto, datum) == _encode(_proto, from_numpy)


def _encode(proto: Any, datum: Any) -> bytes:
    body: bytes = proto.encode_forward_backward_request(
        model_id="m",
        seq_id=1,
        data=[datum],
        loss_fn="cross_entropy",
        loss_fn_config=None,
        forward_only=True,
    )
    return body


BAD_LISTS: list[tuple[str, Any, str, str]] = [
    ("ragged", [[1.0, 2.0], [3.0]], "float32", "ragged"),
    ("rows and numbers", [[1.0, 2.0], 3.0], "float32", "ragged"),
    ("non-integral int64", [1.0, 2.5], "int64", "integral"),
    ("nan int64", [1.0, float("nan")], "int64", "finite"),
    ("inf int64", [float("inf")], "int64", "finite"),
    ("int64 overflow", [2**64], "int64", "int64|non-numeric"),
    ("None", [1.0, None], "float32", "non-numeric"),
    ("string", ["a", "b"], "float32", "dtype"),
]


@pytest.mark.parametrize(
    ("values", "dtype", "words"), [p[1:] for p in BAD_LISTS], ids=[p[0] for p in BAD_LISTS]
)
def test_a_bad_list_is_refused_either_way(
    list_reader: str, values: Any, dtype: TensorDtype, words: str
) -> None:
    from tinker_lite import InvalidInputError, types

    with pytest.raises(InvalidInputError, match=words) as info:
        types.TensorData(data=values, dtype=dtype)
    assert info.value.field.startswith("TensorData.data")


def test_a_float32_overflow_warns_as_numpy_does(list_reader: str) -> None:
    from tinker_lite import types

    with pytest.warns(RuntimeWarning, match="overflow"):
        tensor = types.TensorData(data=[1.0, 1e39], dtype="float32")
    assert tensor.data == [1.0, float("inf")]


@pytest.mark.parametrize("tokens", [[1, True, 3], [1, -2], [1, 2**31], [1, 2.0], ["1"]], ids=str)
def test_bad_token_ids_are_refused_either_way(list_reader: str, tokens: list[Any]) -> None:
    from tinker_lite import InvalidInputError, types

    with pytest.raises(InvalidInputError) as info:
        types.ModelInput.from_ints(tokens * 40)  # 80+ ids: numpy's reading when it is on
    assert info.value.field == "tokens"


def test_sparse_indices_are_checked_either_way(list_reader: str) -> None:
    import numpy as np

    from tinker_lite import InvalidInputError, types

    dense = np.zeros((80, 100), dtype=np.float32)
    dense[np.arange(80), (np.arange(80) * 7) % 100] = np.arange(1, 81, dtype=np.float32)
    dense[3, 4] = 2.5
    sparse = types.TensorData.from_numpy_sparse(dense)
    assert sparse.is_sparse
    assert sparse.sparse_col_indices is not None
    assert len(sparse.sparse_col_indices) == 81  # long enough for numpy's reading when it is on
    assert np.array_equal(sparse.to_numpy(), dense)
    assert sparse.tolist() == dense.tolist()
    crow, cols = sparse.sparse_crow_indices, sparse.sparse_col_indices
    assert crow is not None
    decreasing = [crow[0], crow[2], crow[1], *crow[3:]]
    with pytest.raises(InvalidInputError, match="non-decreasing") as info:
        types.TensorData(sparse.data, "float32", [80, 100], decreasing, cols)
    assert info.value.field == "TensorData.sparse_crow_indices"
    with pytest.raises(InvalidInputError, match="out of range") as info:
        types.TensorData(sparse.data, "float32", [80, 100], crow, [*cols[:-1], 100])
    assert info.value.field == "TensorData.sparse_col_indices"
