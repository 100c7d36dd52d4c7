"""Token ids: what is accepted, what is rejected, and the same bytes sent whatever the input."""

from __future__ import annotations

import copy
import json
import operator
import pickle
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import InvalidInputError
from tinker_lite.local.protocol import codecs as _codecs


@pytest.fixture(params=["orjson", "stdlib"])
def json_encoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the orjson fast path and with the stdlib json fallback."""
    if request.param == "stdlib":
        monkeypatch.setattr(_wire, "_orjson", None)
    elif _wire._orjson is None:
        pytest.skip("orjson is not installed")
    return str(request.param)


def _datum(model_input: types.ModelInput) -> types.Datum:
    return types.Datum(model_input=model_input, loss_fn_inputs={})


def _proto_body(*inputs: types.ModelInput) -> bytes:
    return _proto.encode_forward_backward_request(
        model_id="m",
        seq_id=1,
        data=[_datum(model_input) for model_input in inputs],
        loss_fn="cross_entropy",
        loss_fn_config=None,
        forward_only=False,
    )


def _sent_tokens(chunk: types.EncodedTextChunk) -> list[int]:
    """Return the token ids the protobuf and the JSON encoders send for ``chunk``."""
    model_input = types.ModelInput(chunks=[chunk])
    decoded = _codecs.decode_forward_backward_request(_proto_body(model_input))
    proto_tokens = decoded.data[0].model_input.to_ints()
    json_tokens = json.loads(_wire.dumps(chunk))["tokens"]
    assert proto_tokens == json_tokens
    return proto_tokens


# ------------------------------------------------------------------------------------------
# What users see
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.uint64, np.int8])
def test_from_ints_with_an_array_gives_a_plain_int_list(dtype: Any) -> None:
    values = np.array([3, 0, 1, 99], dtype=dtype)
    chunk = types.ModelInput.from_ints(values).chunks[0]
    assert isinstance(chunk, types.EncodedTextChunk)
    assert type(chunk.tokens) is list
    assert all(type(token) is int for token in chunk.tokens)
    assert chunk.tokens == [3, 0, 1, 99]
    assert chunk == types.EncodedTextChunk(tokens=[3, 0, 1, 99])
    assert operator.add(chunk.tokens, [7]) == [3, 0, 1, 99, 7]  # list + list
    assert [7, *chunk.tokens] == [7, 3, 0, 1, 99]
    assert chunk.tokens[1:3] == [0, 1]
    assert len(chunk.tokens) == chunk.length == 4
    assert "tokens=[3, 0, 1, 99]" in repr(chunk)


def test_list_tuple_and_range_are_accepted() -> None:
    expected = types.EncodedTextChunk(tokens=[0, 1, 2])
    assert types.EncodedTextChunk(tokens=(0, 1, 2)) == expected
    assert types.EncodedTextChunk(tokens=range(3)) == expected
    mixed = types.EncodedTextChunk(tokens=[np.int64(0), np.int32(1), 2])
    assert mixed == expected
    assert all(type(token) is int for token in mixed.tokens)


def test_the_chunk_keeps_its_own_copy_of_the_input() -> None:
    values = np.array([5, 6, 7])
    source = [5, 6, 7]
    from_array = types.ModelInput.from_ints(values)
    from_list = types.ModelInput.from_ints(source)
    values[0] = 1
    source[0] = 1
    assert from_array.to_ints() == from_list.to_ints() == [5, 6, 7]
    chunk = from_array.chunks[0]
    assert isinstance(chunk, types.EncodedTextChunk)
    assert _sent_tokens(chunk) == [5, 6, 7]


def test_json_sends_tokens_as_a_list(json_encoder: str) -> None:
    chunk = types.ModelInput.from_ints(np.array([1, 2, 3])).chunks[0]
    assert _wire.dumps(chunk) == b'{"tokens":[1,2,3],"type":"encoded_text"}'
    assert _wire.to_builtins(chunk) == {"tokens": [1, 2, 3], "type": "encoded_text"}


def test_array_and_list_inputs_encode_to_the_same_bytes(json_encoder: str) -> None:
    tokens = [0, 1, 2, 2**31 - 1, 31999]
    from_list = types.ModelInput.from_ints(tokens)
    from_array = types.ModelInput.from_ints(np.array(tokens, dtype=np.int64))
    assert _proto_body(from_list) == _proto_body(from_array)
    assert _wire.dumps(_datum(from_list)) == _wire.dumps(_datum(from_array))


def test_tokens_changed_in_place_are_what_is_sent(json_encoder: str) -> None:
    chunk = types.ModelInput.from_ints(np.array([1, 2, 3])).chunks[0]
    assert isinstance(chunk, types.EncodedTextChunk)
    chunk.tokens[1] = 20
    chunk.tokens.append(4)
    assert _sent_tokens(chunk) == [1, 20, 3, 4]


def test_tokens_is_one_list_that_keeps_in_place_changes() -> None:
    model_input = types.ModelInput.from_ints(np.array([1, 2]))
    chunk = model_input.chunks[0]
    assert isinstance(chunk, types.EncodedTextChunk)
    assert chunk.tokens is chunk.tokens
    chunk.tokens.append(3)
    assert chunk.tokens == [1, 2, 3]
    assert chunk.length == model_input.length == 3
    assert model_input.to_ints() == [1, 2, 3]
    assert chunk == types.EncodedTextChunk(tokens=[1, 2, 3])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        chunk.tokens = [4]  # type: ignore[misc]


@pytest.mark.parametrize("read_first", [False, True])
def test_copies_and_pickles_are_equal_and_encode_the_same(read_first: bool) -> None:
    model_input = types.ModelInput.from_ints(np.arange(10))
    if read_first:
        chunk = model_input.chunks[0]
        assert isinstance(chunk, types.EncodedTextChunk)
        assert chunk.tokens == list(range(10))
    for other in (
        copy.copy(model_input),
        copy.deepcopy(model_input),
        pickle.loads(pickle.dumps(model_input)),
    ):
        assert other == model_input
        assert other.to_ints() == list(range(10))
        assert _proto_body(other) == _proto_body(model_input)


# ------------------------------------------------------------------------------------------
# What is rejected
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "problem"),
    [
        ([1, True, 3], "integers, got True at position 1"),
        ([False, 2], "integers, got False at position 0"),
        ([2, np.True_], f"integers, got {np.True_!r} at position 1"),  # True with numpy < 2
        ([1, 2.0], "integers, got 2.0 at position 1"),
        ([1, "2"], "integers, got '2' at position 1"),
        ([1, None], "integers, got None at position 1"),
        ([[1, 2], [3, 4]], "integers, got [1, 2] at position 0"),
        ([1, -2], "[0, 2**31), got -2"),
        ([1, 2**31], "[0, 2**31), got 2147483648"),
        ([2**70], "[0, 2**31)"),
        (np.array([1.0, 2.0]), "integers, got dtype float64"),
        (np.array([True, False]), "integers, got dtype bool"),
        (np.array([1, -1], dtype=np.int8), "[0, 2**31), got -1"),
        (np.array([2**31], dtype=np.int64), "[0, 2**31), got 2147483648"),
        (np.array([2**64 - 1], dtype=np.uint64), "[0, 2**31)"),
        (np.zeros((2, 2), dtype=np.int64), "1-D"),
        ("abc", "sequence of token ids"),
    ],
)
def test_bad_token_ids_are_rejected_naming_the_field(tokens: Any, problem: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        types.ModelInput.from_ints(tokens)
    assert info.value.field == "tokens"
    assert problem in info.value.problem
    with pytest.raises(InvalidInputError) as info:
        types.EncodedTextChunk(tokens=tokens)
    assert info.value.field == "EncodedTextChunk.tokens"


@given(
    tokens=st.lists(st.integers(min_value=0, max_value=2**31 - 1), min_size=1, max_size=50),
    data=st.data(),
)
def test_any_valid_list_is_kept_and_a_bool_anywhere_is_rejected(
    tokens: list[int], data: st.DataObject
) -> None:
    chunk = types.EncodedTextChunk(tokens=tokens)
    assert chunk.tokens == tokens
    assert chunk == types.EncodedTextChunk(tokens=np.array(tokens, dtype=np.int64))
    position = data.draw(st.integers(min_value=0, max_value=len(tokens)))
    flag = data.draw(st.booleans())
    with pytest.raises(InvalidInputError, match=f"got {flag} at position {position}"):
        types.EncodedTextChunk(tokens=[*tokens[:position], flag, *tokens[position:]])


# ------------------------------------------------------------------------------------------
# Decoded tensors
# ------------------------------------------------------------------------------------------


def test_decoded_result_tensors_are_read_only_and_independent_of_the_body() -> None:
    logprobs = [np.array([-0.5, -1.5], dtype=np.float32), np.array([-2.5], dtype=np.float32)]
    out = types.ForwardBackwardOutput(
        loss_fn_output_type="CrossEntropyLossReturn",
        loss_fn_outputs=[{"logprobs": types.TensorData.from_numpy(v)} for v in logprobs],
        metrics={"loss:sum": 4.5},
    )
    body = bytearray(_codecs.encode_forward_backward_output(out))
    decoded = _proto.decode_forward_backward_output(body)
    body[:] = bytes(len(body))
    assert decoded == out
    tensor = decoded.loss_fn_outputs[0]["logprobs"]
    assert tensor.to_numpy().dtype == np.float32
    assert tensor.data == [-0.5, -1.5]
    tensor.to_numpy()[0] = 0.0  # a copy: the decoded tensor does not change
    assert tensor.to_numpy().tolist() == [-0.5, -1.5]


def test_decoded_request_tensors_are_independent_of_the_body() -> None:
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2]),
        loss_fn_inputs={"target_tokens": [2, 3], "weights": [0.5, 1.0]},
    )
    body = bytearray(
        _proto.encode_forward_backward_request(
            model_id="m",
            seq_id=1,
            data=[datum],
            loss_fn="cross_entropy",
            loss_fn_config=None,
            forward_only=False,
        )
    )
    decoded = _codecs.decode_forward_backward_request(body)
    body[:] = bytes(len(body))
    assert decoded.data == [datum]
    assert decoded.data[0].loss_fn_inputs["weights"].to_numpy().dtype == np.float32
