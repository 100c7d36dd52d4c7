"""``DmelChunk``: an audio chunk of a model input, as in 0.38.

Any bytes make a chunk; ``length`` reads dimension 0 from the TensorContainer header when asked
(a malformed header raises there, a ValueError as in 0.38), and a datum or prompt whose header is
malformed is refused when it is sent, naming the chunk.
"""

from __future__ import annotations

import base64
import copy
import pickle

import pytest

import tinker_lite as tinker
from tests.support.audio import dmel_chunk, tensor_container
from tinker_lite import InvalidInputError, types
from tinker_lite._training.validate import validate


def test_the_cookbook_form_builds() -> None:
    # tinker-cookbook renderers/tml_v0_test.py::test_openai_audio_path_builds_tinker_chunk
    model_input = tinker.ModelInput(
        chunks=[tinker.types.EncodedTextChunk(tokens=[10]), tinker.types.DmelChunk(dmel=b"\0" * 16)]
    )
    audio = model_input.chunks[1]
    assert isinstance(audio, tinker.types.DmelChunk)
    assert audio.type == "dmel"
    assert audio.dmel == b"\0" * 16
    assert isinstance(audio, types.ModelInputChunk)  # the union of 0.38's four chunk kinds


@pytest.mark.parametrize(
    ("shape", "constant", "length"),
    [
        ((7, 80), False, 7),
        ((7, 80), True, 7),  # a constant tensor: marker byte 254 before the dtype byte
        ((300, 128), False, 300),  # two-byte varints
        ((2**20, 1), True, 2**20),
        ((5,), False, 5),
        ((0, 80), False, 0),
        ((4, 2, 3), False, 4),
    ],
)
def test_length_is_dimension_0_of_the_header(
    shape: tuple[int, ...], constant: bool, length: int
) -> None:
    chunk = types.DmelChunk(dmel=tensor_container(shape, constant=constant))
    assert chunk.length == length


def test_every_dtype_byte_is_read() -> None:
    for dtype in range(8):
        assert types.DmelChunk(dmel=tensor_container((3, 80), dtype=dtype)).length == 3


def test_a_real_header_by_hand() -> None:
    # dtype 1, 2 dimensions, 7 and 80, then the payload
    assert types.DmelChunk(dmel=b"\x01\x02\x07\x50" + bytes(8)).length == 7
    assert types.DmelChunk(dmel=b"\xfe\x01\x02\x07\x50\x00").length == 7
    assert types.DmelChunk(dmel=b"\x01\x02\xac\x02\x50").length == 300


@pytest.mark.parametrize(
    ("dmel", "problem"),
    [
        (b"", "empty"),
        (b"\x00" * 16, "no dimension"),  # dtype 0, 0 dimensions: a scalar
        (b"\x09\x02\x07\x50", "dtype byte 9"),
        (b"\xfe", "truncated"),
        (b"\xfe\xfe\x02\x07", "dtype byte 254"),
        (b"\x01", "truncated"),
        (b"\x01\x02", "truncated"),
        (b"\x01\x02\x87", "truncated"),  # a varint cut short
        (b"\x01\x02\x07", "truncated"),  # the second dimension is missing
        (b"\x01" + b"\xff" * 12, "longer than 10 bytes"),
    ],
)
def test_a_malformed_header_raises_from_length_only(dmel: bytes, problem: str) -> None:
    chunk = types.DmelChunk(dmel=dmel)  # construction never reads the header (as 0.38)
    model_input = types.ModelInput(chunks=[types.EncodedTextChunk(tokens=[1]), chunk])
    with pytest.raises(InvalidInputError, match=problem) as raised:
        _ = chunk.length
    assert isinstance(raised.value, ValueError)  # what 0.38 raises
    assert raised.value.field == "DmelChunk.dmel"
    assert "TensorContainer" in raised.value.hint
    with pytest.raises(ValueError, match=problem):
        _ = model_input.length


def test_repr_never_prints_the_bytes() -> None:
    secret = b"\x01\x02\x07\x50" + b"PAYLOAD-BYTES"
    chunk = types.DmelChunk(dmel=secret)
    for text in (repr(chunk), str(chunk), repr(types.ModelInput(chunks=[chunk]))):
        assert "PAYLOAD" not in text
        assert base64.b64encode(secret).decode() not in text
    assert repr(chunk) == "DmelChunk(type='dmel')"


def test_bytes_like_and_base64_text_are_accepted() -> None:
    raw = tensor_container((7, 80))
    chunks = [
        types.DmelChunk(dmel=raw),
        types.DmelChunk(dmel=bytearray(raw)),
        types.DmelChunk(dmel=memoryview(raw)),
        types.DmelChunk(dmel=base64.b64encode(raw).decode()),
    ]
    assert {chunk.dmel for chunk in chunks} == {raw}
    assert all(type(chunk.dmel) is bytes for chunk in chunks)
    with pytest.raises(InvalidInputError, match=r"DmelChunk\.dmel: a str must be standard base64"):
        types.DmelChunk(dmel="not base64!")
    with pytest.raises(InvalidInputError, match=r"DmelChunk\.dmel: must be bytes"):
        types.DmelChunk(dmel=[1, 2])  # type: ignore[arg-type]


def test_chunks_compare_copy_and_pickle() -> None:
    chunk = dmel_chunk(3)
    assert chunk == types.DmelChunk(dmel=tensor_container((3, 80)))
    assert chunk != dmel_chunk(4)
    for other in (copy.copy(chunk), copy.deepcopy(chunk), pickle.loads(pickle.dumps(chunk))):
        assert other == chunk
        assert other.length == 3


def test_model_input_counts_audio_positions() -> None:
    model_input = types.ModelInput.from_ints([1, 2]).append(dmel_chunk(7)).append_int(3)
    assert model_input.length == 2 + 7 + 1
    with pytest.raises(InvalidInputError, match=r"chunks\[1\]: to_ints\(\) needs text chunks"):
        model_input.to_ints()


def test_datum_lines_up_loss_inputs_with_audio_positions() -> None:
    model_input = types.ModelInput(chunks=[types.EncodedTextChunk(tokens=[1]), dmel_chunk(3)])
    types.Datum(model_input=model_input, loss_fn_inputs={"target_tokens": [1, 2, 3, 4]})
    with pytest.raises(InvalidInputError, match=r"model_input\.length is 4"):
        types.Datum(model_input=model_input, loss_fn_inputs={"target_tokens": [1, 2]})


def _bad_datum() -> types.Datum:
    chunks: list[types.ModelInputChunk] = [
        types.EncodedTextChunk(tokens=[1]),
        types.DmelChunk(dmel=b"\x01\x02\x87"),
    ]
    # Built as 0.38 builds it: the header is read only when the datum is sent.
    return types.Datum(
        model_input=types.ModelInput(chunks=chunks), loss_fn_inputs={"target_tokens": [1, 2]}
    )


def _good_datum() -> types.Datum:
    model_input = types.ModelInput(chunks=[types.EncodedTextChunk(tokens=[1]), dmel_chunk(1)])
    return types.Datum(model_input=model_input, loss_fn_inputs={"target_tokens": [1, 2]})


def test_a_malformed_header_is_refused_when_a_batch_is_sent() -> None:
    data = [_good_datum(), _bad_datum()]
    for send in (
        lambda: types.ForwardBackwardInput(data=data, loss_fn="cross_entropy"),
        lambda: validate(data, "cross_entropy"),
        lambda: tinker.validate(data, "cross_entropy"),
    ):
        with pytest.raises(InvalidInputError) as refused:
            send()
        assert refused.value.field == "data[1].model_input.chunks[1].dmel"
        assert refused.value.problem == "the TensorContainer header is truncated"
        assert "first dimension is the number of model positions" in refused.value.hint
    report = validate([_good_datum()], "cross_entropy")
    assert report.n_numbers == 2 + 2


def test_a_malformed_header_is_refused_in_a_sample_request() -> None:
    prompt = _bad_datum().model_input
    with pytest.raises(InvalidInputError) as refused:
        types.SampleRequest(
            prompt=prompt,
            sampling_params=types.SamplingParams(max_tokens=1),
            sampling_session_id="s",
        )
    assert refused.value.field == "prompt.chunks[1].dmel"
    request = types.SampleRequest(
        prompt=_good_datum().model_input,
        sampling_params=types.SamplingParams(max_tokens=1),
        sampling_session_id="s",
    )
    assert request.prompt.length == 2
