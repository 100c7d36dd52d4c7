"""Every constructor rejects bad input before anything can be sent, naming the field and a fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tinker_lite import types, validate
from tinker_lite._errors import InvalidInputError

MI = types.ModelInput.from_ints([1, 2, 3])


def _datum(**inputs: Any) -> types.Datum:
    return types.Datum(model_input=MI, loss_fn_inputs=inputs)


def _fb(data: Any, loss_fn: str = "cross_entropy", **kw: Any) -> types.ForwardBackwardInput:
    return types.ForwardBackwardInput(data=data, loss_fn=loss_fn, **kw)


GOOD = _datum(target_tokens=[2, 3, 4], weights=[1.0, 1.0, 1.0])

# (id, call, field named in the error, words in the message)
BAD_INPUTS: list[tuple[str, Callable[[], Any], str, str]] = [
    ("ragged list", lambda: _datum(weights=[[1.0, 2.0], [3.0]]), "weights", "ragged"),
    (
        "3-D array",
        lambda: _datum(weights=np.ones((3, 1, 1), dtype=np.float32)),
        "weights",
        "1-D or 2-D",
    ),
    ("length mismatch", lambda: _datum(target_tokens=[2, 3]), "target_tokens", "model_input"),
    (
        "weights vs input length",
        lambda: _datum(target_tokens=[2, 3, 4], weights=[1.0, 1.0]),
        "weights",
        "positions",
    ),
    ("negative target", lambda: _datum(target_tokens=[2, -3, 4]), "target_tokens", "non-negative"),
    ("non-integral target", lambda: _datum(target_tokens=[2.5, 3, 4]), "target_tokens", "integral"),
    ("negative token id", lambda: types.ModelInput.from_ints([1, -2]), "tokens", "[0, 2**31)"),
    (
        "float token ids",
        lambda: types.ModelInput.from_ints(np.array([1.0, 2.0])),
        "tokens",
        "integers",
    ),
    (
        "empty chunk in a training datum",
        lambda: validate(
            [
                types.Datum(
                    model_input=types.ModelInput(
                        chunks=[types.EncodedTextChunk(tokens=[1, 2]), types.EncodedTextChunk([])]
                    ),
                    loss_fn_inputs={"target_tokens": [2, 3]},
                )
            ]
        ),
        "data[0].model_input.chunks[1].tokens",
        "empty",
    ),
    (
        "wrong chunk type",
        lambda: types.ModelInput(chunks=[[1, 2, 3]]),  # type: ignore[list-item]
        "chunks[0]",
        "EncodedTextChunk",
    ),
    (
        "empty model input",
        lambda: types.Datum(model_input=types.ModelInput.empty(), loss_fn_inputs={}),
        "model_input",
        "empty",
    ),
    (
        "unknown key with list",
        lambda: _datum(mystery=[1.0, 2.0, 3.0]),
        "mystery",
        "known keys",
    ),
    ("complex values", lambda: _datum(weights=np.array([1j, 2j, 3j])), "weights", "complex"),
    ("object values", lambda: _datum(weights=[1.0, None, 2.0]), "weights", "non-numeric"),
    ("string values", lambda: _datum(weights=np.array(["a", "b", "c"])), "weights", "dtype"),
    (
        "uint64 overflow",
        lambda: types.TensorData.from_numpy(np.array([2**63], dtype=np.uint64)),
        "array",
        "overflows int64",
    ),
    ("bad dtype name", lambda: types.TensorData(data=[1], dtype="float16"), "dtype", "int64"),  # type: ignore[arg-type]
    (
        "shape mismatch",
        lambda: types.TensorData(data=[1, 2, 3], dtype="int64", shape=[2, 2]),
        "shape",
        "4",
    ),
    (
        "non-tinker model path",
        lambda: types.CreateSamplingSessionRequest(
            session_id="s", sampling_session_seq_id=0, model_path="s3://bucket/x"
        ),
        "model_path",
        "tinker://",
    ),
    (
        "non-tinker load path",
        lambda: types.LoadWeightsRequest(model_id="m", path="ckpt-1", optimizer=False),
        "path",
        "tinker://",
    ),
    ("rank zero", lambda: types.LoraConfig(rank=0), "rank", ">= 1"),
    ("rank negative", lambda: types.LoraConfig(rank=-4), "rank", ">= 1"),
    (
        "no train flags",
        lambda: types.LoraConfig(train_unembed=False, train_mlp=False, train_attn=False),
        "train_",
        "at least one",
    ),
    ("negative temperature", lambda: types.SamplingParams(temperature=-0.1), "temperature", ">= 0"),
    ("top_p zero", lambda: types.SamplingParams(top_p=0.0), "top_p", "(0, 1]"),
    ("top_p above one", lambda: types.SamplingParams(top_p=1.5), "top_p", "(0, 1]"),
    ("stop mixes", lambda: types.SamplingParams(stop=["a", 3]), "stop", "mixes"),
    ("max_tokens zero", lambda: types.SamplingParams(max_tokens=0), "max_tokens", ">= 1"),
    ("top_k zero", lambda: types.SamplingParams(top_k=0), "top_k", "-1"),
    (
        "unknown loss",
        lambda: _fb([GOOD], loss_fn="mse"),
        "loss_fn",
        "cross_entropy, importance_sampling, ppo, cispo, dro",
    ),
    ("empty data", lambda: _fb([]), "data", "empty"),
    ("datum of wrong type", lambda: _fb([GOOD, {"model_input": MI}]), "data[1]", "Datum"),
    (
        "nan loss config",
        lambda: _fb([GOOD], loss_fn_config={"clip": float("nan")}),
        "loss_fn_config['clip']",
        "finite",
    ),
    ("bool learning rate", lambda: types.AdamParams(learning_rate=True), "learning_rate", "number"),
    ("beta out of range", lambda: types.AdamParams(beta1=1.0), "beta1", "[0, 1)"),
    ("negative weight decay", lambda: types.AdamParams(weight_decay=-0.1), "weight_decay", ">= 0"),
    ("image format", lambda: types.ImageChunk(data=b"x", format="gif"), "format", "png"),  # type: ignore[arg-type]
    ("bad base64", lambda: types.ImageChunk(data="not base64!!", format="png"), "data", "base64"),
    ("empty image", lambda: types.ImageChunk(data=b"", format="png"), "data", "empty"),
    (
        "no sampler target",
        lambda: types.CreateSamplingSessionRequest(session_id="s", sampling_session_seq_id=0),
        "base_model/model_path",
        "neither",
    ),
    (
        "checkpoint name with slash",
        lambda: types.SaveWeightsRequest(model_id="m", path="a/b"),
        "path",
        "bare checkpoint name",
    ),
    (
        "optimizer flag missing type",
        lambda: types.LoadWeightsRequest(
            model_id="m",
            path="tinker://r/weights/a",
            optimizer="yes",  # type: ignore[arg-type]
        ),
        "optimizer",
        "True or False",
    ),
    (
        "num_samples zero",
        lambda: types.SampleRequest(
            num_samples=0,
            prompt=MI,
            sampling_params=types.SamplingParams(),
            sampling_session_id="s",
        ),
        "num_samples",
        ">= 1",
    ),
    (
        "empty prompt",
        lambda: types.SampleRequest(
            prompt=types.ModelInput.empty(),
            sampling_params=types.SamplingParams(),
            sampling_session_id="s",
        ),
        "prompt",
        "empty",
    ),
    (
        "tinker path kind",
        lambda: types.ParsedCheckpointTinkerPath.from_tinker_path("tinker://run/checkpoints/a"),
        "tinker_path",
        "sampler_weights",
    ),
    (
        "tinker path parts",
        lambda: types.ParsedCheckpointTinkerPath.from_tinker_path("tinker://run/weights/a/b"),
        "tinker_path",
        "expected 3",
    ),
    (
        "tinker path empty part",
        lambda: types.ParsedCheckpointTinkerPath.from_tinker_path("tinker://run//a"),
        "tinker_path",
        "3 part(s) after tinker:// (1 empty), expected 3 non-empty",
    ),
    (
        "telemetry events not a list",
        lambda: types.TelemetrySendRequest(
            events=5,  # type: ignore[arg-type]
            platform="linux",
            sdk_version="0.38.0",
            session_id="s",
            process_uuid="u",
        ),
        "events",
        "must be a list of telemetry events",
    ),
    (
        "tinker path scheme",
        lambda: types.ParsedCheckpointTinkerPath.from_tinker_path("run/weights/a"),
        "tinker_path",
        "tinker://",
    ),
    (
        "to_ints with image",
        lambda: types.ModelInput(chunks=[types.ImageChunk(data=b"x", format="png")]).to_ints(),
        "chunks[0]",
        "text chunks",
    ),
]


@pytest.mark.parametrize(
    ("call", "field", "words"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_is_rejected_with_field_and_hint(
    call: Callable[[], Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidInputError) as info:
        call()
    err = info.value
    assert field in err.field, (err.field, str(err))
    assert words in str(err), str(err)
    assert isinstance(err, ValueError)  # code written for the official SDK catches ValueError


def test_at_least_twenty_distinct_bad_inputs() -> None:
    assert len({c[0] for c in BAD_INPUTS}) >= 20


def test_most_errors_say_how_to_fix() -> None:
    hinted = 0
    for _, call, _, _ in BAD_INPUTS:
        with pytest.raises(InvalidInputError) as info:
            call()
        hinted += bool(info.value.hint)
    assert hinted >= len(BAD_INPUTS) * 0.6


def test_unknown_loss_escape_hatch(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInputError, match="TINKER_LITE_ALLOW_UNKNOWN_LOSS"):
        types.check_loss_fn("brand_new_loss")
    monkeypatch.setenv("TINKER_LITE_ALLOW_UNKNOWN_LOSS", "1")
    assert types.check_loss_fn("brand_new_loss") == "brand_new_loss"
    assert _fb([GOOD], loss_fn="brand_new_loss").loss_fn == "brand_new_loss"


def test_nan_is_reported_with_datum_index_and_key() -> None:
    from tinker_lite._codec import wire as _wire

    bad = _datum(target_tokens=[2, 3, 4], weights=[1.0, float("nan"), 1.0])
    request = types.ForwardBackwardRequest(
        forward_backward_input=_fb([GOOD, GOOD, bad]), model_id="m", seq_id=1
    )
    with pytest.raises(InvalidInputError) as info:
        _wire.dumps(request)
    assert info.value.field == "data[2].loss_fn_inputs['weights']"
    assert "position 1" in str(info.value)
    bad_inf = _datum(advantages=np.array([0.0, np.inf, 1.0]))
    with pytest.raises(InvalidInputError, match=r"data\[0\]\.loss_fn_inputs\['advantages'\]"):
        _wire.dumps(_fb([bad_inf]))


def test_an_empty_text_chunk_is_built_as_in_the_official_sdk() -> None:
    # 0.38 builds it (renderers make one for an empty message); only a training datum that
    # carries one is refused, when sent.
    chunks = [types.EncodedTextChunk(tokens=[10]), types.EncodedTextChunk(tokens=[])]
    model_input = types.ModelInput(chunks=chunks)
    assert model_input.length == 1
    assert model_input.to_ints() == [10]
    assert chunks[1].tokens == []
    assert chunks[1].length == 0
