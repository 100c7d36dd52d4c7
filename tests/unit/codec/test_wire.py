"""Encoding (docs/protocol.rst §3.1, §3.2) and lenient / strict decoding of the wire JSON."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.support.audio import tensor_container
from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.float32_text import float32_values
from tinker_lite._errors import InvalidInputError, WireFormatError


@pytest.fixture(params=["orjson", "stdlib"])
def encoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the orjson fast path and with the stdlib json fallback."""
    if request.param == "stdlib":
        monkeypatch.setattr(_wire, "_orjson", None)
    elif _wire._orjson is None:
        pytest.skip("orjson is not installed")
    return str(request.param)


def _datum(weights: Any) -> types.Datum:
    n = len(weights)
    return types.Datum(
        model_input=types.ModelInput.from_ints(list(range(1, n + 1))),
        loss_fn_inputs={"target_tokens": list(range(2, n + 2)), "weights": weights},
    )


# ------------------------------------------------------------------------------------------
# Encoding
# ------------------------------------------------------------------------------------------


def test_compact_utf8_no_nulls_with_type_discriminators(encoder: str) -> None:
    request = types.CreateModelRequest(
        session_id="sess-ü",
        model_seq_id=0,
        base_model="Qwen/Qwen3-8B",
        lora_config=types.LoraConfig(),
    )
    body = _wire.dumps(request)
    assert (
        body
        == (
            '{"session_id":"sess-ü","model_seq_id":0,"base_model":"Qwen/Qwen3-8B",'
            '"lora_config":{"rank":32,"train_unembed":true,"train_mlp":true,"train_attn":true},'
            '"optimizer_config":{"type":"adamw"},"type":"create_model"}'
        ).encode()
    )


def test_optim_step_key_order_and_full_adam_params(encoder: str) -> None:
    # docs/protocol.rst §3.1 / golden-0.38 optim_step_default: weight_decay and grad_clip_norm
    # are sent.
    request = types.OptimStepRequest(model_id="m", seq_id=3, adam_params=types.AdamParams())
    assert _wire.dumps(request) == (
        b'{"model_id":"m","seq_id":3,"type":"optim_step","adam_params":'
        b'{"learning_rate":0.0001,"beta1":0.9,"beta2":0.95,"eps":1e-12,'
        b'"weight_decay":0.0,"grad_clip_norm":0.0}}'
    )


def test_chunks_are_tagged_and_images_base64(encoder: str) -> None:
    prompt = types.ModelInput(
        chunks=[
            types.EncodedTextChunk(tokens=[1]),
            types.ImageChunk(data=b"\x89PNG\r\n", format="png", expected_tokens=4),
            types.ImageAssetPointerChunk(location="s3://x", format="jpeg", height=2, width=3),
        ]
    )
    assert json.loads(_wire.dumps(prompt)) == {
        "chunks": [
            {"tokens": [1], "type": "encoded_text"},
            {"data": "iVBORw0K", "format": "png", "expected_tokens": 4, "type": "image"},
            {
                "location": "s3://x",
                "format": "jpeg",
                "height": 2,
                "width": 3,
                "type": "image_asset_pointer",
            },
        ]
    }


def test_audio_chunks_are_sent_as_038_serializes_them(encoder: str) -> None:
    # 0.38 DmelChunk: {"dmel": <standard base64 of the TensorContainer bytes>, "type": "dmel"}
    dmel = tensor_container((7, 80), payload=bytes(range(8)))
    prompt = types.ModelInput(
        chunks=[types.EncodedTextChunk(tokens=[1]), types.DmelChunk(dmel=dmel)]
    )
    body = _wire.dumps(prompt)
    assert body == (
        b'{"chunks":[{"tokens":[1],"type":"encoded_text"},'
        b'{"dmel":"AQIHUAABAgMEBQYH","type":"dmel"}]}'
    )
    back = _wire.structure(json.loads(body), types.ModelInput)
    assert back == prompt
    assert back.length == 8


def test_float32_values_are_short_and_round_trip(encoder: str) -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [
            rng.standard_normal(2000).astype(np.float32),
            (rng.standard_normal(500) * 1e30).astype(np.float32),
            (rng.standard_normal(500) * 1e-30).astype(np.float32),
            np.array([0.1, 1 / 3, 0.0, -0.0, 1.0, 3.4028235e38, 1e-45, 16777217.0], np.float32),
        ]
    )
    td = types.TensorData.from_numpy(values)
    encoded = _wire.dumps(td)
    parsed = json.loads(encoded)
    back = np.asarray(parsed["data"], dtype=np.float32)
    np.testing.assert_array_equal(back.view(np.int32), values.view(np.int32))
    assert b"0.1," in encoded
    assert b"0.10000000149011612" not in encoded


def test_datum_lists_cast_to_float32(encoder: str) -> None:
    body = json.loads(_wire.dumps(_datum([0.1, 1, 1 / 3])))
    weights = body["loss_fn_inputs"]["weights"]
    assert weights["dtype"] == "float32"
    assert weights["shape"] == [3]
    assert np.float32(weights["data"][2]) == np.float32(1 / 3)
    assert body["loss_fn_inputs"]["target_tokens"]["data"] == [2, 3, 4]
    assert list(body) == ["loss_fn_inputs", "model_input"]


def test_numpy_arrays_reach_orjson_without_a_list_detour(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    class RecordingOrjson:
        OPT_SERIALIZE_NUMPY = 1

        @staticmethod
        def dumps(tree: Any, option: int = 0) -> bytes:
            seen.append(tree)
            return b"{}"

    monkeypatch.setattr(_wire, "_orjson", RecordingOrjson)
    _wire.dumps(_datum(np.ones(4)))
    tensor = seen[0]["loss_fn_inputs"]["weights"]["data"]
    assert isinstance(tensor, np.ndarray)
    assert tensor.dtype == np.float32


def test_non_finite_values_rejected(encoder: str) -> None:
    with pytest.raises(InvalidInputError, match=r"loss_fn_inputs\['weights'\]"):
        _wire.dumps(_datum(np.array([1.0, np.nan])))
    output = types.ForwardBackwardOutput(
        loss_fn_output_type="x", loss_fn_outputs=[], metrics={"loss": float("inf")}
    )
    with pytest.raises(InvalidInputError, match="metrics"):
        _wire.dumps(output)
    with pytest.raises(InvalidInputError):
        _wire.dumps({"x": [1.0, float("-inf")]})


def test_nullable_exceptions_and_datetimes(encoder: str) -> None:
    assert _wire.dumps(types.SetCheckpointTTLRequest()) == b'{"ttl_seconds":null}'
    assert _wire.dumps(types.SessionFinishRequest(reason=types.SessionFinishReason("errored"))) == (
        b'{"reason":{"type":"errored"},"detail":null}'
    )
    event = types.SessionEndEvent(
        duration=str(timedelta(hours=1, seconds=3)),
        event_id="e",
        event_session_index=3,
        timestamp=datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    )
    assert json.loads(_wire.dumps(event)) == {
        "duration": "1:00:03",
        "event": "SESSION_END",
        "event_id": "e",
        "event_session_index": 3,
        "severity": "INFO",
        "timestamp": "2025-01-02T03:04:05Z",
    }
    later = datetime(2026, 11, 26, 0, 28, 51, 321197, tzinfo=timezone(timedelta(hours=2)))
    assert _wire.to_builtins(later) == "2026-11-25T22:28:51.321197Z"


def test_to_builtins_returns_only_builtins() -> None:
    tree = _wire.to_builtins(_datum(np.array([0.5, 0.25])))

    def walk(value: Any) -> None:
        assert type(value) in (dict, list, str, int, float, bool), type(value)
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(tree)
    assert tree["loss_fn_inputs"]["weights"]["data"] == [0.5, 0.25]


def test_unencodable_values_are_reported() -> None:
    with pytest.raises(InvalidInputError, match="cannot be sent as JSON"):
        _wire.dumps({"x": object()})


def test_loads_errors(encoder: str) -> None:
    assert _wire.loads(b'{"a":[1,2.5]}') == {"a": [1, 2.5]}
    assert _wire.loads('{"a":"ü"}') == {"a": "ü"}
    for bad in (b"{", b"", b"NaN", b'{"a":Infinity}', b"\xff"):
        with pytest.raises(WireFormatError):
            _wire.loads(bad)


# ------------------------------------------------------------------------------------------
# Decoding
# ------------------------------------------------------------------------------------------


def test_lenient_ignores_unknown_keys_strict_rejects_them() -> None:
    body = b'{"request_id":"r1","model_id":null,"brand_new":1}'
    lenient = _wire.structure(_wire.loads(body), types.UntypedAPIFuture)
    assert lenient == types.UntypedAPIFuture(request_id="r1")
    with pytest.raises(WireFormatError, match="brand_new"):
        _wire.structure(_wire.loads(body), types.UntypedAPIFuture, strict=True)


def test_new_enum_values_tolerated_only_when_lenient() -> None:
    body = {"sequences": [{"stop_reason": "max_time", "tokens": [1]}]}
    response = _wire.structure(body, types.SampleResponse)
    assert response.sequences[0].stop_reason == "max_time"
    with pytest.raises(WireFormatError, match=r"sequences\[0\]\.stop_reason"):
        _wire.structure(body, types.SampleResponse, strict=True)
    failed = _wire.structure({"error": "bad", "category": "User"}, types.RequestFailedResponse)
    assert failed.category is types.RequestErrorCategory.USER
    unknown = _wire.structure({"error": "x", "category": "alien"}, types.RequestFailedResponse)
    assert unknown.category is types.RequestErrorCategory.UNKNOWN


def test_sample_response_shapes() -> None:
    body = {
        "type": "sample",
        "sequences": [{"stop_reason": "length", "tokens": [5, 6], "logprobs": [-0.1, -0.2]}],
        "prompt_logprobs": [None, -1.5, -2.5],
        "topk_prompt_logprobs": [None, [[3, -0.5], [4, -1.0]]],
        "prompt_cache_hit_tokens": 0,
    }
    response = _wire.structure(body, types.SampleResponse)
    assert response.sequences[0].stop_reason is types.StopReason.LENGTH
    stop_reason: str = response.sequences[0].stop_reason  # a str enum: compares as its value
    assert stop_reason == "length"
    assert response.prompt_logprobs == [None, -1.5, -2.5]
    assert response.topk_prompt_logprobs == [None, [(3, -0.5), (4, -1.0)]]


def test_forward_backward_output_decodes_tensors_to_numpy() -> None:
    logprobs = np.linspace(-5, 0, 1024, dtype=np.float32)
    body = {
        "loss_fn_output_type": "ArrayRecord",
        "loss_fn_outputs": [
            {"logprobs": {"data": logprobs.tolist(), "dtype": "float32", "shape": [1024]}}
        ]
        * 4,
        "metrics": {"loss:sum": 3.5, "count": 4},
    }
    out = _wire.structure(_wire.loads(json.dumps(body).encode()), types.ForwardBackwardOutput)
    tensor = out.loss_fn_outputs[3]["logprobs"]
    assert isinstance(tensor, types.TensorData)
    assert tensor.to_numpy().dtype == np.float32
    np.testing.assert_array_equal(tensor.to_numpy(), logprobs)
    assert out.metrics == {"loss:sum": 3.5, "count": 4.0}


SPARSE_BODY: dict[str, Any] = {
    "data": [1.0, 2.0, 3.0],
    "dtype": "float32",
    "shape": [2, 3],
    "sparse_crow_indices": [0, 1, 3],
    "sparse_col_indices": [2, 0, 1],
}


def test_sparse_tensor_is_densified() -> None:
    tensor = _wire.structure(SPARSE_BODY, types.TensorData)
    np.testing.assert_array_equal(tensor.to_numpy(), [[0, 0, 1], [2, 3, 0]])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"sparse_col_indices": [2, 0, 7]}, "column index 7 is out of range"),
        ({"sparse_crow_indices": [0, 3, 1]}, "sparse_crow_indices"),
        ({"sparse_crow_indices": [0, 2**70, 3]}, "sparse_crow_indices: must hold integers"),
        ({"sparse_col_indices": None}, "needs 'sparse_col_indices'"),
        ({"shape": [2, "3"]}, "2-D shape"),
        ({"shape": [-2, 3]}, "shape: must be >= 0"),
        ({"shape": [1 << 20, 1 << 20]}, "too large"),
    ],
)
def test_bad_sparse_tensors_are_wire_format_errors(change: dict[str, Any], match: str) -> None:
    with pytest.raises(WireFormatError, match=match):
        _wire.structure({**SPARSE_BODY, **change}, types.TensorData)


def test_chunks_without_type_are_recognised_by_shape() -> None:
    body = {
        "chunks": [
            {"tokens": [1, 2]},
            {"data": "iVBORw0K", "format": "png", "height": 2, "tokens": 4, "width": 3},
            {"format": "jpeg", "location": "s3://x", "expected_tokens": 2},
        ]
    }
    model_input = _wire.structure(body, types.ModelInput)
    kinds = [type(chunk) for chunk in model_input.chunks]
    assert kinds == [types.EncodedTextChunk, types.ImageChunk, types.ImageAssetPointerChunk]
    image = model_input.chunks[1]
    assert isinstance(image, types.ImageChunk)
    assert image.data == b"\x89PNG\r\n"
    untagged = _wire.structure({"chunks": [{"dmel": "AQIHUAABAgMEBQYH"}]}, types.ModelInput)
    assert untagged.chunks == [types.DmelChunk(dmel=b"\x01\x02\x07\x50" + bytes(range(8)))]
    # Read as 0.38 reads it: any bytes make a chunk (its length is read when asked).
    placeholder = {
        "chunks": [{"tokens": [1], "type": "encoded_text"}, {"dmel": "AA==", "type": "dmel"}]
    }
    assert _wire.structure(placeholder, types.ModelInput).chunks[1] == types.DmelChunk(dmel=b"\0")
    with pytest.raises(WireFormatError, match=r"chunks\[0\]: expected EncodedTextChunk \|"):
        _wire.structure({"chunks": [{"type": "video", "tokens": [1]}]}, types.ModelInput)


def test_requests_decode_from_0_4_1_and_profile_bodies() -> None:
    old = {"adam_params": {}, "model_id": "m", "seq_id": 1}
    request = _wire.structure(old, types.OptimStepRequest)
    assert request.adam_params == types.AdamParams()
    new = json.loads(_wire.dumps(request))
    assert _wire.structure(new, types.OptimStepRequest, strict=True) == request
    with pytest.raises(WireFormatError, match="type must be 'optim_step'"):
        _wire.structure({**new, "type": "sample"}, types.OptimStepRequest, strict=True)


def test_errors_name_the_path() -> None:
    body = {
        "forward_backward_input": {
            "data": [
                {
                    "loss_fn_inputs": {"target_tokens": {"data": [1], "dtype": "int64"}},
                    "model_input": {"chunks": [{"tokens": [1]}]},
                },
                {
                    "loss_fn_inputs": {"target_tokens": {"data": [1, "x"], "dtype": "int64"}},
                    "model_input": {"chunks": [{"tokens": [1, 2]}]},
                },
            ],
            "loss_fn": "cross_entropy",
        },
        "model_id": "m",
    }
    with pytest.raises(WireFormatError) as info:
        _wire.structure(body, types.ForwardBackwardRequest)
    message = str(info.value)
    assert "forward_backward_input.data[1].loss_fn_inputs['target_tokens']" in message
    with pytest.raises(WireFormatError, match="missing required key 'queue_state'"):
        _wire.structure({"request_id": "r"}, types.TryAgainResponse)
    with pytest.raises(WireFormatError, match="expected an object"):
        _wire.structure([1, 2], types.UntypedAPIFuture)
    with pytest.raises(WireFormatError, match="request_id"):
        _wire.structure({"request_id": 5}, types.UntypedAPIFuture)
    with pytest.raises(WireFormatError, match=r"chunks\[0\]: missing required key 'tokens'"):
        _wire.structure({"chunks": [{"type": "encoded_text"}]}, types.ModelInput)
    with pytest.raises(WireFormatError, match=r"at \[2\]: expected an integer"):
        _wire.structure([1, 2, "x"], tuple[int, ...])


@pytest.mark.parametrize("stamp", [1e300, -1e18, float("inf")])
def test_out_of_range_timestamps_are_wire_format_errors(stamp: float) -> None:
    with pytest.raises(WireFormatError, match="out of range"):
        _wire.structure(stamp, datetime)


def test_datetimes_and_rest_records() -> None:
    body = {
        "training_runs": [
            {
                "training_run_id": "run-1",
                "base_model": "Qwen/Qwen3-8B",
                "model_owner": "me",
                "is_lora": True,
                "lora_rank": 32,
                "last_request_time": "2025-01-02T03:04:05.1Z",
                "last_checkpoint": {
                    "checkpoint_id": "weights/a",
                    "checkpoint_type": "training",
                    "time": "2025-01-02T03:04:05+02:00",
                    "tinker_path": "tinker://run-1/weights/a",
                    "size_bytes": 10,
                    "public": False,
                    "expires_at": None,
                },
                "user_metadata": {"k": "v"},
            }
        ],
        "cursor": {"offset": 0, "limit": 20, "total_count": 1},
    }
    runs = _wire.structure(body, types.TrainingRunsResponse)
    run = runs.training_runs[0]
    assert run.last_request_time == datetime(2025, 1, 2, 3, 4, 5, 100000, tzinfo=timezone.utc)
    assert run.last_checkpoint is not None
    assert run.last_checkpoint.time.utcoffset() == timedelta(hours=2)
    assert runs.cursor.total_count == 1
    epoch = _wire.structure(
        {"url": "https://x", "expires": 0}, types.CheckpointArchiveUrlResponse
    ).expires
    assert epoch == datetime(1970, 1, 1, tzinfo=timezone.utc)


def test_client_config_ignores_unknown_flags() -> None:
    config = _wire.structure(
        {"pjwt_auth_enabled": True, "fwdbwd_max_chunk_len": 2, "flag_from_the_future": 1},
        types.ClientConfigResponse,
    )
    assert config.pjwt_auth_enabled is True
    assert config.fwdbwd_max_chunk_len == 2
    assert config.parallel_fwdbwd_chunks is True


def test_try_again_and_metadata_responses() -> None:
    try_again = _wire.structure(
        {"type": "try_again", "request_id": "r", "queue_state": "paused_capacity"},
        types.TryAgainResponse,
    )
    assert try_again.queue_state == "paused_capacity"
    assert try_again.queue_state_reason is None
    meta = _wire.structure(
        {"status": "complete_metadata", "response_payload_size": 12}, types.FutureMetadataResponse
    )
    assert meta.response_payload_size == 12


@given(
    hnp.arrays(
        np.float32,
        st.integers(0, 64),
        elements=st.floats(width=32, allow_nan=False, allow_infinity=False),
    )
)
def test_stdlib_float32_text_reads_back_bit_exact(values: Any) -> None:
    text = json.dumps(float32_values(values))
    back = np.asarray(json.loads(text), dtype=np.float32).reshape(values.shape)
    np.testing.assert_array_equal(back.view(np.int32), values.view(np.int32))


@pytest.mark.parametrize("strict", [False, True])
def test_a_bad_answer_names_the_json_path_and_the_expected_type(strict: bool) -> None:
    body: dict[str, Any] = {"sequences": [{"stop_reason": "stop", "tokens": [1, 2, 3, 4]}]}
    body["sequences"][0]["logprobs"] = [-0.5, -0.25, -1.0, "x"]
    with pytest.raises(WireFormatError) as info:
        _wire.structure(body, types.SampleResponse, strict=strict)
    assert str(info.value) == (
        "cannot read SampleResponse at sequences[0].logprobs[3]: expected a number, got 'x'"
    )
    body["sequences"][0]["logprobs"] = None
    body["sequences"][0]["tokens"] = {"0": 1}
    with pytest.raises(WireFormatError, match=r"at sequences\[0\]\.tokens: expected a list"):
        _wire.structure(body, types.SampleResponse, strict=strict)


def test_a_null_reads_as_an_absent_key_only_leniently() -> None:
    body: dict[str, Any] = {"sequences": [], "prompt_cache_hit_tokens": None}
    assert _wire.structure(body, types.SampleResponse).prompt_cache_hit_tokens == 0
    with pytest.raises(WireFormatError, match="at prompt_cache_hit_tokens: expected an integer"):
        _wire.structure(body, types.SampleResponse, strict=True)
