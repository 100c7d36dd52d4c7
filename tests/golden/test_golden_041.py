"""tinker_lite's request bodies against every request captured from the official SDK.

Each builder constructs, with ``tinker_lite.types``, the request that the fixture's ``call``
describes (ids and counters taken from the fixture) and encodes it with ``_wire.dumps``; the
bodies are compared after the normalisation of ``tests/support/golden.py``. The golden-0.38
section compares the exact bytes (key order included) for bodies whose fields tinker_lite can
set to the same values.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from tests.support.golden import (
    GOLDEN_038_DIR,
    GOLDEN_DIR,
    assert_body_matches,
    golden_names,
    load_golden,
    normalise_body,
)
from tinker_lite import types
from tinker_lite._codec import wire as _wire

pytestmark = pytest.mark.skipif(
    not GOLDEN_DIR.is_dir(), reason=f"golden fixtures not found at {GOLDEN_DIR}"
)

Fixture = dict[str, Any]
Builder = Callable[[Fixture], Any]

PROMPT_7 = [151644, 872, 198, 9707, 11, 1879, 0]


def _body(fx: Fixture) -> dict[str, Any]:
    body: dict[str, Any] = fx["body"]
    return body


def _text(tokens: list[int]) -> types.ModelInput:
    return types.ModelInput.from_ints(tokens)


def _datum(tokens: list[int], **inputs: Any) -> types.Datum:
    return types.Datum(model_input=_text(tokens), loss_fn_inputs=inputs)


def _forward(
    fx: Fixture, data: list[types.Datum], loss_fn: str = "cross_entropy", **kw: Any
) -> Any:
    fb_input = types.ForwardBackwardInput(data=data, loss_fn=loss_fn, **kw)
    body = _body(fx)
    if "forward_input" in body:
        return types.ForwardRequest(
            forward_input=fb_input, model_id=body["model_id"], seq_id=body["seq_id"]
        )
    return types.ForwardBackwardRequest(
        forward_backward_input=fb_input, model_id=body["model_id"], seq_id=body["seq_id"]
    )


def _sample(fx: Fixture, prompt: types.ModelInput, params: types.SamplingParams, **kw: Any) -> Any:
    body = _body(fx)
    return types.SampleRequest(
        prompt=prompt,
        sampling_params=params,
        sampling_session_id=body["sampling_session_id"],
        seq_id=body["seq_id"],
        **kw,
    )


def _retrieve(fx: Fixture) -> Any:
    return types.FutureRetrieveRequest(request_id=_body(fx)["request_id"])


def _no_body(fx: Fixture) -> Any:
    return None


def _large_batch(fx: Fixture) -> Any:
    # 300 datums i: tokens [i, i+1], targets [i+1, i+2], weights [1, 1]; split 128/128/44.
    first = _body(fx)["forward_backward_input"]["data"][0]["model_input"]["chunks"][0]["tokens"][0]
    size = len(_body(fx)["forward_backward_input"]["data"])
    data = [
        _datum([i, i + 1], target_tokens=[i + 1, i + 2], weights=[1.0, 1.0])
        for i in range(first, first + size)
    ]
    return _forward(fx, data)


def _custom_data() -> list[types.Datum]:
    return [
        _datum([301, 302, 303], target_tokens=[302, 303, 304], weights=[0.5, 1.0, 2.0]),
        _datum([401, 402], target_tokens=[402, 403], weights=[1.0, 0.25]),
    ]


def _custom_forward_backward(fx: Fixture) -> Any:
    # The loss is -sum(logprobs * weights), so minus its gradient is the weights themselves.
    loss_weights = [np.array([0.5, 1.0, 2.0], np.float32), np.array([1.0, 0.25], np.float32)]
    grads = [np.negative(-w) for w in loss_weights]
    data = [
        _datum([301, 302, 303], target_tokens=[302, 303, 304], weights=grads[0]),
        _datum([401, 402], target_tokens=[402, 403], weights=grads[1]),
    ]
    return _forward(fx, data)


def _telemetry(fx: Fixture) -> Any:
    body = _body(fx)
    event = body["events"][0]
    timestamp = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
    return types.TelemetrySendRequest(
        events=[
            types.SessionStartEvent(
                event_id=event["event_id"],
                event_session_index=event["event_session_index"],
                severity=event["severity"],
                timestamp=timestamp,
            )
        ],
        platform=body["platform"],
        sdk_version=body["sdk_version"],
        session_id=body["session_id"],
        process_uuid=str(uuid.uuid4()),
    )


def _image_prompt(fx: Fixture) -> types.ModelInput:
    chunks = _body(fx)["prompt"]["chunks"]
    png = base64.b64decode(chunks[1]["data"])
    return types.ModelInput(
        chunks=[
            types.EncodedTextChunk(tokens=[151644, 872]),
            types.ImageChunk(data=png, format="png", height=1, width=1, tokens=4),
            types.EncodedTextChunk(tokens=[198, 9707]),
        ]
    )


BUILDERS: dict[str, Builder] = {
    "service_client_init": lambda fx: types.CreateSessionRequest(
        tags=[], user_metadata={}, sdk_version=_body(fx)["sdk_version"]
    ),
    "background_heartbeat_telemetry__session_heartbeat": lambda fx: types.SessionHeartbeatRequest(
        session_id=_body(fx)["session_id"]
    ),
    "background_heartbeat_telemetry__telemetry": _telemetry,
    "create_lora_training_client_defaults__create_model": lambda fx: types.CreateModelRequest(
        session_id=_body(fx)["session_id"],
        model_seq_id=_body(fx)["model_seq_id"],
        base_model="Qwen/Qwen3-8B",
        lora_config=types.LoraConfig(),
    ),
    "create_lora_training_client_custom": lambda fx: types.CreateModelRequest(
        session_id=_body(fx)["session_id"],
        model_seq_id=_body(fx)["model_seq_id"],
        base_model="meta-llama/Llama-3.1-8B",
        user_metadata={"experiment": "demo"},
        lora_config=types.LoraConfig(rank=16, seed=7, train_attn=False),
    ),
    "create_sampling_client_base_model": lambda fx: types.CreateSamplingSessionRequest(
        session_id=_body(fx)["session_id"],
        sampling_session_seq_id=_body(fx)["sampling_session_seq_id"],
        base_model="Qwen/Qwen3-8B",
    ),
    "create_sampling_client_model_path": lambda fx: types.CreateSamplingSessionRequest(
        session_id=_body(fx)["session_id"],
        sampling_session_seq_id=_body(fx)["sampling_session_seq_id"],
        model_path="tinker://run-0001/sampler_weights/sampler-001",
    ),
    "create_training_client_from_state__training_runs": _no_body,
    "create_training_client_from_state__create_model": lambda fx: types.CreateModelRequest(
        session_id=_body(fx)["session_id"],
        model_seq_id=_body(fx)["model_seq_id"],
        base_model="Qwen/Qwen3-8B",
        user_metadata={},
        lora_config=types.LoraConfig(rank=32),
    ),
    "create_training_client_from_state__load_weights": lambda fx: types.LoadWeightsRequest(
        model_id=_body(fx)["model_id"],
        path="tinker://run-0001/weights/ckpt-001",
        seq_id=_body(fx)["seq_id"],
        optimizer=False,
    ),
    "forward_cross_entropy_lists__forward": lambda fx: _forward(
        fx,
        [
            _datum(
                [101, 102, 103, 104, 105],
                target_tokens=[102, 103, 104, 105, 106],
                weights=[0, 0, 1, 1, 1],
            ),
            _datum([201, 202, 203], target_tokens=[202, 203, 204], weights=[1, 1, 1]),
        ],
    ),
    "forward_backward_numpy_float64__forward_backward": lambda fx: _forward(
        fx,
        [
            _datum(
                [11, 12, 13, 14],
                target_tokens=np.array([12, 13, 14, 15], dtype=np.int64),
                weights=np.array([0.1, 1 / 3, 0.7, 1.0], dtype=np.float64),
            )
        ],
    ),
    "forward_backward_numpy_2d": lambda fx: _forward(
        fx,
        [
            _datum(
                [31, 32, 33, 34, 35, 36],
                target_tokens=np.array([[32, 33, 34], [35, 36, 37]], dtype=np.int64),
                weights=np.array([[0.0, 0.5, 1.0], [1.0, 1.0, 0.25]], dtype=np.float64),
            )
        ],
    ),
    "forward_backward_targets_only": lambda fx: _forward(
        fx, [_datum([111, 112, 113], target_tokens=[112, 113, 114])]
    ),
    "forward_backward_importance_sampling": lambda fx: _forward(
        fx,
        [
            _datum(
                [71, 72, 73, 74],
                target_tokens=[72, 73, 74, 75],
                logprobs=[-0.5, -1.25, -0.125, -2.0],
                advantages=[0.0, 0.0, 1.5, 1.5],
            )
        ],
        loss_fn="importance_sampling",
    ),
    "forward_backward_ppo_config": lambda fx: _forward(
        fx,
        [
            _datum(
                [81, 82, 83],
                target_tokens=np.array([82, 83, 84]),
                logprobs=np.array([-0.5, -1.0, -1.5], dtype=np.float32),
                advantages=np.array([1.0, -0.5, 0.25], dtype=np.float32),
            )
        ],
        loss_fn="ppo",
        loss_fn_config={"clip_low_threshold": 0.8, "clip_high_threshold": 1.28},
    ),
    "forward_backward_large_batch__forward_backward_1": _large_batch,
    "forward_backward_large_batch__forward_backward_2": _large_batch,
    "forward_backward_large_batch__forward_backward_3": _large_batch,
    "forward_backward_custom__forward": lambda fx: _forward(fx, _custom_data()),
    "forward_backward_custom__forward_backward": _custom_forward_backward,
    "forward_backward_retry_after_500": lambda fx: _forward(
        fx, [_datum([501, 502], target_tokens=[502, 503], weights=[1.0, 1.0])]
    ),
    "get_info": lambda fx: types.GetInfoRequest(model_id=_body(fx)["model_id"]),
    "get_server_capabilities": _no_body,
    "internal_healthz": _no_body,
    "internal_unload_model": lambda fx: types.UnloadModelRequest(model_id=_body(fx)["model_id"]),
    "optim_step_default__optim_step": lambda fx: types.OptimStepRequest(
        model_id=_body(fx)["model_id"], seq_id=_body(fx)["seq_id"], adam_params=types.AdamParams()
    ),
    "optim_step_lr": lambda fx: types.OptimStepRequest(
        model_id=_body(fx)["model_id"],
        seq_id=_body(fx)["seq_id"],
        adam_params=types.AdamParams(learning_rate=1e-4),
    ),
    "save_state__save_weights": lambda fx: types.SaveWeightsRequest(
        model_id=_body(fx)["model_id"], path="ckpt-001", seq_id=_body(fx)["seq_id"]
    ),
    "load_state__load_weights": lambda fx: types.LoadWeightsRequest(
        model_id=_body(fx)["model_id"],
        path="tinker://run-0001/weights/ckpt-001",
        seq_id=_body(fx)["seq_id"],
        optimizer=False,
    ),
    "save_weights_for_sampler__save_weights_for_sampler": lambda fx: (
        types.SaveWeightsForSamplerRequest(
            model_id=_body(fx)["model_id"], path="sampler-001", seq_id=_body(fx)["seq_id"]
        )
    ),
    "save_weights_and_get_sampling_client": lambda fx: types.SaveWeightsForSamplerRequest(
        model_id=_body(fx)["model_id"],
        sampling_session_seq_id=_body(fx)["sampling_session_seq_id"],
        seq_id=_body(fx)["seq_id"],
    ),
    "sample_ephemeral_client": lambda fx: _sample(
        fx, _text(PROMPT_7), types.SamplingParams(max_tokens=8, temperature=0.5)
    ),
    "sample_basic__asample": lambda fx: _sample(
        fx, _text(PROMPT_7), types.SamplingParams(max_tokens=16)
    ),
    "sample_full_params": lambda fx: _sample(
        fx,
        _text(PROMPT_7),
        types.SamplingParams(
            max_tokens=32, temperature=0.7, top_k=50, top_p=0.9, seed=1234, stop="\n"
        ),
    ),
    "sample_stop_strings": lambda fx: _sample(
        fx, _text(PROMPT_7), types.SamplingParams(max_tokens=20, stop=["</s>", "\n\n"])
    ),
    "sample_num_samples": lambda fx: _sample(
        fx, _text(PROMPT_7), types.SamplingParams(max_tokens=8, temperature=1.0), num_samples=4
    ),
    "sample_prompt_logprobs": lambda fx: _sample(
        fx, _text(PROMPT_7), types.SamplingParams(max_tokens=1), prompt_logprobs=True
    ),
    "compute_logprobs": lambda fx: _sample(
        fx, _text(PROMPT_7), types.SamplingParams(max_tokens=1), prompt_logprobs=True
    ),
    "sample_image_chunk": lambda fx: _sample(
        fx, _image_prompt(fx), types.SamplingParams(max_tokens=5)
    ),
    "sample_model_path_client": lambda fx: _sample(
        fx, _text([5, 6, 7, 8]), types.SamplingParams(max_tokens=10, stop=["User:"]), num_samples=3
    ),
    "rest_get_training_run": _no_body,
    "rest_list_training_runs_default": _no_body,
    "rest_list_checkpoints": _no_body,
    "rest_list_user_checkpoints_default": _no_body,
    "rest_get_checkpoint_archive_url": _no_body,
    "rest_publish_checkpoint": _no_body,
    "rest_unpublish_checkpoint": _no_body,
    "rest_delete_checkpoint": _no_body,
}

# Fixtures whose request is not a pure function of the call, with the reason.
SKIPPED: dict[str, str] = {}


def _builder_for(name: str) -> Builder:
    if name.endswith("__retrieve_future"):
        return _retrieve
    return BUILDERS[name]


GOLDEN_041 = golden_names("0.4.1") if GOLDEN_DIR.is_dir() else []


def test_every_fixture_has_a_builder_or_a_skip_reason() -> None:
    missing = [
        name
        for name in GOLDEN_041
        if name not in BUILDERS and name not in SKIPPED and not name.endswith("__retrieve_future")
    ]
    assert not missing, f"fixtures without a builder: {missing}"
    assert len(GOLDEN_041) >= 50


@pytest.mark.parametrize("name", GOLDEN_041)
def test_body_matches_golden_041(name: str) -> None:
    if name in SKIPPED:
        pytest.skip(SKIPPED[name])
    fixture = load_golden(name)
    request = _builder_for(name)(fixture)
    ours = None if request is None else _wire.dumps(request)
    assert_body_matches(fixture, ours)
    if ours is not None:
        # Compact UTF-8, never null.
        text = ours.decode("utf-8")
        assert ": " not in text
        assert ", " not in text.replace('", "', "")
        assert "null" not in json.dumps(json.loads(ours))


@pytest.mark.parametrize("name", GOLDEN_041)
def test_counters_equal_the_fixture(name: str) -> None:
    fixture = load_golden(name)
    request = _builder_for(name)(fixture)
    if request is None:
        return
    ours = json.loads(_wire.dumps(request))
    for key in fixture["order_dependent_body_keys"]:
        assert ours[key] == fixture["body"][key], key


def test_normaliser_detects_a_difference() -> None:
    fixture = load_golden("optim_step_lr")
    bad = types.OptimStepRequest(
        model_id="m", seq_id=fixture["body"]["seq_id"], adam_params=types.AdamParams(1e-3)
    )
    with pytest.raises(AssertionError, match="learning_rate"):
        assert_body_matches(fixture, _wire.dumps(bad))


def test_normaliser_float32_equality_and_masking() -> None:
    a = {
        "model_id": "x",
        "path": "tinker://run-1/weights/a",
        "t": {"data": [0.1], "dtype": "float32"},
    }
    b = {
        "model_id": "y",
        "path": "tinker://run-9/weights/a",
        "t": {"data": [0.10000000149011612], "dtype": "float32"},
    }
    assert normalise_body(a) == normalise_body(b)
    assert normalise_body({"k": None, "v": 1}) == {"v": 1}


# ------------------------------------------------------------------------------------------
# golden-0.38: exact bytes (key order included) where tinker_lite sets the same fields
# ------------------------------------------------------------------------------------------


def _b(fx: Fixture, key: str) -> Any:
    return fx["body"][key]


def _sample_038(fx: Fixture, params: types.SamplingParams, **kw: Any) -> Any:
    body = fx["body"]
    tokens = body["prompt"]["chunks"][0]["tokens"]
    kw.setdefault("topk_sample_logprobs", 0)
    kw.setdefault("prompt_alt_tokens_k", 0)
    return types.SampleRequest(
        num_samples=body["num_samples"],
        prompt=_text(tokens),
        sampling_params=params,
        sampling_session_id=body["sampling_session_id"],
        seq_id=body["seq_id"],
        prompt_logprobs=body["prompt_logprobs"],
        topk_prompt_logprobs=body["topk_prompt_logprobs"],
        record_stability_info=False,
        **kw,
    )


_ADAM_038 = {"weight_decay": 0.0, "grad_clip_norm": 0.0}

BUILDERS_038: dict[str, Builder] = {
    "background_heartbeat_telemetry__session_heartbeat": lambda fx: types.SessionHeartbeatRequest(
        session_id=_b(fx, "session_id")
    ),
    "create_lora_training_client_defaults__create_session": lambda fx: types.CreateSessionRequest(
        tags=[], user_metadata={}, sdk_version="0.38.0"
    ),
    "create_lora_training_client_defaults__client_config": lambda fx: types.ClientConfigRequest(
        sdk_version="0.38.0"
    ),
    "create_lora_training_client_defaults__create_model": lambda fx: types.CreateModelRequest(
        session_id=_b(fx, "session_id"),
        model_seq_id=0,
        base_model="Qwen/Qwen3-8B",
        lora_config=types.LoraConfig(),
        optimizer_config={"type": "adamw"},
    ),
    "create_lora_training_client_custom__create_model": lambda fx: types.CreateModelRequest(
        session_id=_b(fx, "session_id"),
        model_seq_id=1,
        base_model="meta-llama/Llama-3.1-8B",
        user_metadata={"experiment": "demo"},
        lora_config=types.LoraConfig(rank=16, seed=7, train_attn=False),
        optimizer_config={"type": "adamw"},
    ),
    "create_lora_training_client_defaults__get_info": lambda fx: types.GetInfoRequest(
        model_id=_b(fx, "model_id")
    ),
    "create_lora_training_client_defaults__retrieve_future": lambda fx: types.FutureRetrieveRequest(
        request_id=_b(fx, "request_id"), allow_metadata_only=True
    ),
    "create_sampling_client_base_model": lambda fx: types.CreateSamplingSessionRequest(
        session_id=_b(fx, "session_id"), sampling_session_seq_id=1, base_model="Qwen/Qwen3-8B"
    ),
    "create_sampling_client_model_path__create_sampling_session": lambda fx: (
        types.CreateSamplingSessionRequest(
            session_id=_b(fx, "session_id"),
            sampling_session_seq_id=2,
            model_path="tinker://run-0001/sampler_weights/sampler-001",
        )
    ),
    "create_training_client_from_state__load_weights": lambda fx: types.LoadWeightsRequest(
        session_id=_b(fx, "session_id"),
        model_seq_id=2,
        path="tinker://run-0001/weights/ckpt-001",
        optimizer=False,
    ),
    "create_training_client_from_state_with_optimizer__load_weights": lambda fx: (
        types.LoadWeightsRequest(
            session_id=_b(fx, "session_id"),
            model_seq_id=3,
            user_metadata={"resumed": "yes"},
            path="tinker://run-0001/weights/ckpt-001",
            optimizer=True,
        )
    ),
    "flags_unpickled_sampler_join__join_sampling_session": lambda fx: (
        types.JoinSamplingSessionRequest(sampling_session_id=_b(fx, "sampling_session_id"))
    ),
    "flags_service_client_close": lambda fx: types.SessionFinishRequest(
        reason=types.SessionFinishReason("interrupted"), detail="stopped by user"
    ),
    "service_client_close": lambda fx: types.SessionFinishRequest(
        reason=types.SessionFinishReason("success")
    ),
    "load_state__load_weights": lambda fx: types.LoadWeightsRequest(
        model_id=_b(fx, "model_id"),
        seq_id=_b(fx, "seq_id"),
        path="tinker://run-0001/weights/ckpt-001",
        optimizer=False,
    ),
    "load_state_with_optimizer": lambda fx: types.LoadWeightsRequest(
        model_id=_b(fx, "model_id"),
        seq_id=_b(fx, "seq_id"),
        path="tinker://run-0001/weights/ckpt-001",
        optimizer=True,
    ),
    "optim_step_default__optim_step": lambda fx: types.OptimStepRequest(
        model_id=_b(fx, "model_id"),
        seq_id=_b(fx, "seq_id"),
        adam_params=types.AdamParams(**_ADAM_038),
    ),
    "optim_step_weight_decay_clip": lambda fx: types.OptimStepRequest(
        model_id=_b(fx, "model_id"),
        seq_id=_b(fx, "seq_id"),
        adam_params=types.AdamParams(learning_rate=1e-4, weight_decay=0.01, grad_clip_norm=1.0),
    ),
    "optim_step_adam_params_kwarg": lambda fx: types.OptimStepRequest(
        model_id=_b(fx, "model_id"),
        seq_id=_b(fx, "seq_id"),
        adam_params=types.AdamParams(learning_rate=5e-5, **_ADAM_038),
    ),
    "rest_clear_checkpoint_ttl": lambda fx: types.SetCheckpointTTLRequest(ttl_seconds=None),
    "rest_set_checkpoint_ttl": lambda fx: types.SetCheckpointTTLRequest(ttl_seconds=86400),
    "rest_get_weights_info_by_tinker_path": lambda fx: types.WeightsInfoRequest(
        tinker_path="tinker://run-0001/weights/ckpt-001"
    ),
    "save_state_ttl__save_weights": lambda fx: types.SaveWeightsRequest(
        model_id=_b(fx, "model_id"),
        path="ckpt-001",
        seq_id=_b(fx, "seq_id"),
        ttl_seconds=7200,
        overwrite=False,
    ),
    "save_weights_for_sampler__save_weights_for_sampler": lambda fx: (
        types.SaveWeightsForSamplerRequest(
            model_id=_b(fx, "model_id"),
            path="sampler-001",
            kind="snapshot",
            seq_id=_b(fx, "seq_id"),
        )
    ),
    "save_weights_and_get_sampling_client__save_weights_for_sampler": lambda fx: (
        types.SaveWeightsForSamplerRequest(
            model_id=_b(fx, "model_id"),
            sampling_session_seq_id=0,
            kind="snapshot",
            seq_id=_b(fx, "seq_id"),
        )
    ),
    "sample_basic__asample": lambda fx: _sample_038(fx, types.SamplingParams(max_tokens=16)),
    "sample_full_params": lambda fx: _sample_038(
        fx,
        types.SamplingParams(
            max_tokens=32, temperature=0.7, top_k=50, top_p=0.9, seed=1234, stop="\n"
        ),
    ),
    "sample_stop_strings": lambda fx: _sample_038(
        fx, types.SamplingParams(max_tokens=20, stop=["</s>", "\n\n"])
    ),
    "sample_topk_sample_logprobs": lambda fx: _sample_038(
        fx, types.SamplingParams(max_tokens=3), topk_sample_logprobs=3
    ),
    "sample_prompt_logprobs_last_n": lambda fx: _sample_038(
        fx, types.SamplingParams(max_tokens=1), prompt_logprobs_last_n=3
    ),
    "sample_target_prompt_logprobs": lambda fx: _sample_038(
        fx,
        types.SamplingParams(max_tokens=1),
        target_prompt_logprobs=types.TensorData(
            data=[5, -1, 6, 7, -1, 8], dtype="int64", shape=[3, 2]
        ),
        prompt_alt_tokens_k=2,
    ),
    "background_heartbeat_telemetry__telemetry": lambda fx: types.TelemetrySendRequest(
        events=[
            types.SessionStartEvent(
                event_id=fx["body"]["events"][0]["event_id"],
                event_session_index=0,
                timestamp=datetime.fromisoformat(
                    fx["body"]["events"][0]["timestamp"].replace("Z", "+00:00")
                ),
            )
        ],
        platform=_b(fx, "platform"),
        sdk_version="0.38.0",
        session_id=_b(fx, "session_id"),
        process_uuid=_b(fx, "process_uuid"),
    ),
}


@pytest.mark.skipif(not GOLDEN_038_DIR.is_dir(), reason="golden-0.38 fixtures not found")
@pytest.mark.parametrize("name", sorted(BUILDERS_038))
def test_exact_bytes_match_golden_038(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fixture = load_golden(name, version="0.38")
    request = BUILDERS_038[name](fixture)
    expected = json.dumps(fixture["body"], separators=(",", ":"), ensure_ascii=False).encode()
    # Whatever the encoder, the keys come in the official order with the same values
    # (orjson spells some floats differently: 5e-5 for 5e-05).
    reparsed = json.dumps(json.loads(_wire.dumps(request)), separators=(",", ":"))
    assert reparsed.encode() == expected
    # The stdlib encoder reproduces the captured bytes exactly.
    monkeypatch.setattr(_wire, "_orjson", None)
    assert _wire.dumps(request) == expected
