"""Named constructors, conversions and invariants of the wire models."""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys
from typing import Any

import attrs
import numpy as np
import pytest

from tests.support.paths import REPO
from tinker_lite import types
from tinker_lite._errors import InvalidInputError

# ------------------------------------------------------------------------------------------
# ModelInput
# ------------------------------------------------------------------------------------------


def test_model_input_from_ints_round_trip() -> None:
    mi = types.ModelInput.from_ints([5, 6, 7])
    assert mi.to_ints() == [5, 6, 7]
    assert mi.length == 3
    assert mi.chunks == [types.EncodedTextChunk(tokens=[5, 6, 7])]
    assert mi.chunks[0].type == "encoded_text"
    assert types.ModelInput.from_ints(np.array([1, 2], dtype=np.int32)).to_ints() == [1, 2]
    assert all(type(t) is int for t in types.ModelInput.from_ints(np.arange(3)).to_ints())


def test_model_input_empty_append_and_append_int_return_new_objects() -> None:
    empty = types.ModelInput.empty()
    assert empty.length == 0
    assert empty.chunks == []
    assert types.ModelInput.from_ints([]) == empty
    one = empty.append_int(4)
    assert one.to_ints() == [4]
    assert empty.length == 0
    two = one.append_int(5)
    # A new one-token chunk each time, as both official SDKs do (not merged into the last one).
    assert two.chunks == [types.EncodedTextChunk(tokens=[4]), types.EncodedTextChunk(tokens=[5])]
    assert two.to_ints() == [4, 5]
    assert one.chunks == [types.EncodedTextChunk(tokens=[4])]
    image = types.ImageChunk(data=b"\x89PNG", format="png", expected_tokens=3)
    with_image = two.append(image)
    assert with_image.length == 5
    assert two.length == 2
    three = with_image.append_int(9)
    assert len(three.chunks) == 4
    assert three.length == 6


def test_model_input_is_frozen() -> None:
    mi = types.ModelInput.from_ints([1])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        mi.chunks = []  # type: ignore[misc]


def test_image_chunk_accepts_bytes_and_base64_and_both_field_sets() -> None:
    raw = b"\x89PNG\r\n"
    by_bytes = types.ImageChunk(data=raw, format="png", height=2, width=3, tokens=4)
    by_text = types.ImageChunk(
        data=base64.b64encode(raw).decode(), format="png", height=2, width=3, tokens=4
    )
    assert by_bytes == by_text
    assert by_bytes.data == raw
    assert by_bytes.length == 4
    assert types.ImageChunk(data=raw, format="jpeg", expected_tokens=7).length == 7
    assert types.ImageChunk(data=bytearray(raw), format="png").length == 0
    pointer = types.ImageAssetPointerChunk(location="s3://x", format="jpeg", expected_tokens=2)
    assert pointer.type == "image_asset_pointer"
    assert pointer.length == 2


# ------------------------------------------------------------------------------------------
# TensorData and dtype coercion
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (np.float64, "float32"),
        (np.float16, "float32"),
        (np.float32, "float32"),
        (np.int32, "int64"),
        (np.int16, "int64"),
        (np.int8, "int64"),
        (np.uint8, "int64"),
        (np.bool_, "int64"),
        (np.int64, "int64"),
        (np.uint64, "int64"),
    ],
)
def test_from_numpy_coerces_dtype(source: type, expected: str) -> None:
    arr: np.ndarray[Any, Any] = np.array([[1, 0, 1], [0, 1, 1]], dtype=source)
    td = types.TensorData.from_numpy(arr)
    assert td.dtype == expected
    assert td.shape == [2, 3]
    dtype = np.float32 if expected == "float32" else np.int64
    assert td.to_numpy().dtype == dtype
    assert td.data == arr.astype(dtype).reshape(-1).tolist()  # flat, as in the official SDK
    assert td.tolist() == arr.astype(dtype).tolist()  # nested to the shape
    np.testing.assert_array_equal(td.to_numpy(), arr.astype(dtype))


def test_tensor_data_accepts_lists_and_keeps_values_safe() -> None:
    td = types.TensorData(data=[0.1, 1, 2.5], dtype="float32")
    assert td.shape is None
    assert td.tolist() == pytest.approx([0.1, 1.0, 2.5])
    assert td.to_numpy().dtype == np.float32
    assert types.TensorData(data=[1.0, 2.0], dtype="int64").tolist() == [1, 2]
    nested = types.TensorData(data=[[1, 2], [3, 4]], dtype="int64")
    assert nested.shape == [2, 2]
    assert nested.data == [1, 2, 3, 4]
    assert nested.tolist() == [[1, 2], [3, 4]]
    source = np.array([1.0, 2.0], dtype=np.float32)
    td2 = types.TensorData.from_numpy(source)
    source[0] = 99.0  # the model holds its own copy
    assert td2.tolist() == [1.0, 2.0]
    out = td2.to_numpy()
    out[0] = 5.0  # ... and hands out copies
    assert td2.tolist() == [1.0, 2.0]
    td2.data[0] = 3.0  # a fresh list each time: the tensor does not change
    assert td2.tolist() == [1.0, 2.0]


def test_tensor_data_equality() -> None:
    a = types.TensorData(data=[1, 2, 3], dtype="float32")
    assert a == types.TensorData.from_numpy(np.array([1.0, 2.0, 3.0]))
    assert a != types.TensorData(data=[1, 2, 3], dtype="int64")
    assert a != types.TensorData(data=[1, 2, 4], dtype="float32")
    assert types.TensorData(data=[1, 2, 3, 4], dtype="int64", shape=[2, 2]) != types.TensorData(
        data=[1, 2, 3, 4], dtype="int64", shape=[4]
    )
    assert a != "not a tensor"


def test_tensor_data_pickles() -> None:
    td = types.TensorData.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert pickle.loads(pickle.dumps(td)) == td
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2]), loss_fn_inputs={"target_tokens": [2, 3]}
    )
    assert pickle.loads(pickle.dumps(datum)) == datum


def test_torch_helpers_never_import_torch() -> None:
    code = (
        "import sys; from tinker_lite import types; import numpy as np\n"
        "types.TensorData.from_numpy(np.ones(2)).tolist()\n"
        "try:\n    types.TensorData.from_torch([1.0])\nexcept ValueError:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env=_env())


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_torch_round_trip_when_installed() -> None:
    torch = pytest.importorskip("torch")
    tensor = torch.tensor([[0.5, 1.0], [2.0, 3.0]], dtype=torch.bfloat16)
    td = types.TensorData.from_torch(tensor)
    assert td.dtype == "float32"
    assert td.shape == [2, 2]
    assert td.to_torch().tolist() == [[0.5, 1.0], [2.0, 3.0]]


# ------------------------------------------------------------------------------------------
# Datum
# ------------------------------------------------------------------------------------------


def test_datum_accepts_numpy_tensordata_and_lists_by_key() -> None:
    mi = types.ModelInput.from_ints([1, 2, 3])
    datum = types.Datum(
        model_input=mi,
        loss_fn_inputs={
            "target_tokens": np.array([2, 3, 4], dtype=np.int32),
            "weights": [1, 0, 1],
            "logprobs": types.TensorData(data=[-1.0, -2.0, -3.0], dtype="float32"),
            "advantages": np.array([0.5, 0.5, 0.5]),
            "custom_mask": np.array([True, False, True]),
        },
    )
    inputs = datum.loss_fn_inputs
    assert inputs["target_tokens"].dtype == "int64"
    assert inputs["target_tokens"].shape == [3]
    assert inputs["weights"].dtype == "float32"
    assert inputs["weights"].tolist() == [1.0, 0.0, 1.0]
    assert inputs["logprobs"].shape is None
    assert inputs["advantages"].dtype == "float32"
    assert inputs["custom_mask"].dtype == "int64"


def test_datum_coerces_known_keys_to_their_dtype() -> None:
    mi = types.ModelInput.from_ints([1, 2])
    datum = types.Datum(
        model_input=mi,
        loss_fn_inputs={
            "target_tokens": np.array([2.0, 3.0]),
            "weights": types.TensorData(data=[1, 1], dtype="int64"),
        },
    )
    assert datum.loss_fn_inputs["target_tokens"].dtype == "int64"
    assert datum.loss_fn_inputs["weights"].dtype == "float32"


def test_datum_2d_rows_line_up_with_the_input() -> None:
    mi = types.ModelInput.from_ints([1, 2, 3])
    datum = types.Datum(
        model_input=mi, loss_fn_inputs={"target_tokens": np.zeros((3, 4), dtype=np.int64)}
    )
    assert datum.loss_fn_inputs["target_tokens"].shape == [3, 4]
    with pytest.raises(InvalidInputError, match="positions"):
        types.Datum(
            model_input=mi, loss_fn_inputs={"target_tokens": np.zeros((2, 4), dtype=np.int64)}
        )


def test_datum_with_uncounted_image_skips_length_check() -> None:
    mi = types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[1]), types.ImageChunk(data=b"x", format="png")]
    )
    datum = types.Datum(model_input=mi, loss_fn_inputs={"weights": [1.0, 1.0, 1.0]})
    assert datum.loss_fn_inputs["weights"].size == 3
    counted = mi.append(types.EncodedTextChunk(tokens=[2]))
    assert counted.length == 2


# ------------------------------------------------------------------------------------------
# Enums, parameters, results, paths
# ------------------------------------------------------------------------------------------


def test_enums_carry_wire_values() -> None:
    assert types.StopReason("length") is types.StopReason.LENGTH
    stop: str = types.StopReason.STOP  # a str enum: compares as its value
    assert stop == "stop"
    newer = types.StopReason("max_time")
    assert newer == "max_time"
    assert not types.StopReason.is_known("max_time")
    assert types.RequestErrorCategory.parse("User") is types.RequestErrorCategory.USER
    assert types.RequestErrorCategory.parse("Server") == "server"
    assert types.RequestErrorCategory.parse("bogus") is types.RequestErrorCategory.UNKNOWN
    assert [m.value for m in types.LossFnType] == [
        "cross_entropy",
        "importance_sampling",
        "ppo",
        "cispo",
        "dro",
        "gspo",
        "stable_reinforce",
        "custom",
    ]
    assert types.check_loss_fn(types.LossFnType.PPO) == "ppo"
    assert types.QueueState("Paused_Capacity") is types.QueueState.PAUSED_CAPACITY


def test_parameter_defaults_and_normalisation() -> None:
    adam = types.AdamParams()
    assert (adam.learning_rate, adam.beta1, adam.beta2, adam.eps) == (1e-4, 0.9, 0.95, 1e-12)
    # docs/protocol.rst §3.1: 0.38 defaults (and sends) both as 0.0.
    assert adam.weight_decay == 0.0
    assert adam.grad_clip_norm == 0.0
    assert types.AdamParams(learning_rate=1).learning_rate == 1.0
    assert type(types.AdamParams(learning_rate=1).learning_rate) is float
    params = types.SamplingParams(stop=("a", "b"))
    assert params.stop == ["a", "b"]
    assert types.SamplingParams(stop=np.array([1, 2])).stop == [1, 2]
    assert types.SamplingParams(temperature=0).temperature == 0.0
    lora = types.LoraConfig()
    assert (lora.rank, lora.seed, lora.train_unembed) == (32, None, True)


def test_official_sdk_shaped_results() -> None:
    seq = types.SampledSequence(stop_reason=types.StopReason.LENGTH, tokens=[1, 2])
    assert seq.stop_reason == "length"
    assert seq.logprobs is None
    assert attrs.fields_dict(types.SaveWeightsForSamplerResponse).keys() == {"path", "type"}
    out = types.ForwardBackwardOutput(
        loss_fn_output_type="ArrayRecord",
        loss_fn_outputs=[{"logprobs": types.TensorData(data=[-1.0], dtype="float32")}],
        metrics={"loss:sum": 1.0},
    )
    assert isinstance(out.loss_fn_outputs[0]["logprobs"], types.TensorData)
    config = types.ClientConfigResponse()
    assert config.fwdbwd_max_chunk_len == 1024
    assert config.pjwt_auth_enabled is False


def test_parsed_checkpoint_paths() -> None:
    weights = types.ParsedCheckpointTinkerPath.from_tinker_path("tinker://run-1/weights/ckpt")
    assert weights.training_run_id == "run-1"
    assert weights.checkpoint_type == "training"
    assert weights.checkpoint_id == "weights/ckpt"
    sampler = types.ParsedCheckpointTinkerPath.from_tinker_path("tinker://r/sampler_weights/s1")
    assert sampler.checkpoint_type == "sampler"
    assert sampler.checkpoint_id == "sampler_weights/s1"


def test_public_names_are_exported() -> None:
    for name in types.__all__:
        assert hasattr(types, name), name
    assert types.__all__ == sorted(types.__all__, key=lambda n: (not n.isupper(), n))
