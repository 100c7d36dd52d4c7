"""Property tests: every protobuf message tinker_lite writes reads back unchanged.

The three bodies (forward_backward request, its result, a sample result) are written by one side
and read by the other through the field tables of the shared reader; together they pass through
every table the decoders use (checked by ``test_the_round_trips_read_every_table``). Values are
drawn so that protobuf carries them exactly (float32 numbers, int32 token ids).
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.support.audio import dmel_chunk, tensor_container
from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite._codec import protowire as _protowire
from tinker_lite.local.protocol import codecs as _codecs
from tinker_lite.local.service.sampling import SampleOutcome

ROUND_TRIP = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAME = st.text(string.ascii_letters + string.digits + "_:.-", min_size=1, max_size=10)
TEXT = st.text(max_size=12)
FLOAT32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
TOKEN = st.integers(0, 2**31 - 1)


def _array(dtype: Any, shape: tuple[int, ...]) -> st.SearchStrategy[Any]:
    elements = FLOAT32 if dtype == np.float32 else st.integers(-(2**62), 2**62)
    return hnp.arrays(dtype, shape, elements=elements)


def _csr(dense: Any) -> types.TensorData:
    rows, cols = np.nonzero(dense)
    crow = np.searchsorted(rows, np.arange(dense.shape[0] + 1)).tolist()
    return types.TensorData(
        data=dense[rows, cols],
        dtype="float32" if dense.dtype == np.float32 else "int64",
        shape=list(dense.shape),
        sparse_crow_indices=crow,
        sparse_col_indices=cols.tolist(),
    )


@st.composite
def datums(draw: st.DrawFn) -> types.Datum:
    chunks: list[types.ModelInputChunk] = [
        types.EncodedTextChunk(tokens=draw(st.lists(TOKEN, min_size=1, max_size=5)))
    ]
    if draw(st.booleans()):
        image = types.ImageChunk(
            data=draw(st.binary(min_size=1, max_size=16)),
            format=draw(st.sampled_from(["png", "jpeg"])),
            expected_tokens=draw(st.integers(1, 4)),
        )
        chunks.insert(draw(st.integers(0, 1)), image)
    if draw(st.booleans()):
        shape = (draw(st.integers(0, 300)), draw(st.integers(0, 200)))
        audio = types.DmelChunk(dmel=tensor_container(shape, constant=draw(st.booleans())))
        chunks.insert(draw(st.integers(0, len(chunks))), audio)
    model_input = types.ModelInput(chunks=chunks)
    n = model_input.length
    inputs: dict[str, Any] = {
        "target_tokens": draw(hnp.arrays(np.int64, n, elements=st.integers(0, 2**40)))
    }
    if draw(st.booleans()):
        inputs["weights"] = draw(_array(np.float32, (n,)))
    if draw(st.booleans()):
        dense = draw(_array(draw(st.sampled_from([np.float32, np.int64])), (2, 3)))
        inputs["custom"] = _csr(dense) if draw(st.booleans()) else dense
    return types.Datum(model_input=model_input, loss_fn_inputs=inputs)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "model_id": draw(TEXT),
        "seq_id": draw(st.integers(-(2**31), 2**31 - 1)),
        "data": draw(st.lists(datums(), max_size=3)),
        "loss_fn": draw(TEXT),
        "loss_fn_config": draw(
            st.none() | st.dictionaries(NAME, st.floats(allow_nan=False) | TEXT, max_size=3)
        ),
        "forward_only": draw(st.booleans()),
    }


@ROUND_TRIP
@given(request=requests())
def test_forward_backward_request(request: dict[str, Any]) -> None:
    decoded = _codecs.decode_forward_backward_request(
        _proto.encode_forward_backward_request(**request)
    )
    # An empty config map is not written: it reads back as no config.
    assert decoded == _codecs.ProtoForwardBackwardRequest(
        **{**request, "loss_fn_config": request["loss_fn_config"] or None}
    )


@st.composite
def tensors(draw: st.DrawFn, trailing: tuple[int, ...], dtype: Any) -> types.TensorData:
    rows = draw(st.integers(0, 3))
    return types.TensorData.from_numpy(draw(_array(dtype, (rows, *trailing))))


@st.composite
def outputs(draw: st.DrawFn) -> types.ForwardBackwardOutput:
    signatures = st.dictionaries(
        NAME,
        st.tuples(st.sampled_from([(), (2,), (1, 3)]), st.sampled_from([np.float32, np.int64])),
        max_size=2,
    )
    datums_outputs = []
    for signature in draw(st.lists(signatures, max_size=3)):
        rows = draw(st.integers(1, 3))
        datums_outputs.append(
            {
                name: types.TensorData.from_numpy(draw(_array(dtype, (rows, *trailing))))
                for name, (trailing, dtype) in signature.items()
            }
        )
    return types.ForwardBackwardOutput(
        loss_fn_output_type=draw(st.text(string.ascii_letters, max_size=8)),
        loss_fn_outputs=datums_outputs,
        metrics=draw(st.dictionaries(NAME, st.floats(allow_nan=False), max_size=3)),
    )


@ROUND_TRIP
@given(output=outputs())
def test_forward_backward_output(output: types.ForwardBackwardOutput) -> None:
    decoded = _proto.decode_forward_backward_output(_codecs.encode_forward_backward_output(output))
    assert decoded == output


# Top-k cells (token id, logprob); (0, -99999.0) is the padding of the wire and never drawn.
CELL = st.tuples(TOKEN, FLOAT32).filter(lambda cell: cell != (0, -99999.0))
TOPK = st.lists(st.none() | st.lists(CELL, min_size=1, max_size=3), max_size=4)


@st.composite
def outcomes(draw: st.DrawFn) -> SampleOutcome:
    sequences = []
    sequence_topk = []
    for _ in range(draw(st.integers(0, 3))):
        tokens = draw(st.lists(TOKEN, max_size=4))
        logprobs = draw(st.none() | st.lists(FLOAT32, min_size=len(tokens), max_size=len(tokens)))
        sequences.append(
            types.SampledSequence(
                stop_reason=draw(st.sampled_from(list(types.StopReason))),
                tokens=tokens,
                logprobs=logprobs,
            )
        )
        sequence_topk.append(draw(st.none() | TOPK))
    length = draw(st.integers(0, 3))
    alt = draw(st.booleans())
    return SampleOutcome(
        response=types.SampleResponse(
            sequences=sequences,
            prompt_logprobs=draw(st.none() | st.lists(st.none() | FLOAT32, max_size=4)),
            topk_prompt_logprobs=draw(st.none() | TOPK),
        ),
        sequence_ids=[],
        sequence_topk=sequence_topk,
        target_prompt_logprobs=draw(st.none() | _array(np.float32, (length,))),
        alt_tokens=draw(_array(np.int64, (length, 2))) if alt else None,
        alt_logprobs=draw(_array(np.float32, (length, 2))) if alt else None,
        prompt_cache_hit_tokens=draw(st.integers(0, 2**31 - 1)),
    )


def _expected(outcome: SampleOutcome) -> types.SampleResponse:
    sent = outcome.response
    alt = None
    if outcome.alt_tokens is not None and outcome.alt_logprobs is not None:
        alt = types.PromptAltTokens(
            tokens=types.TensorData.from_numpy(outcome.alt_tokens),
            logprobs=types.TensorData.from_numpy(outcome.alt_logprobs),
        )
    target = outcome.target_prompt_logprobs
    return types.SampleResponse(
        sequences=[
            types.SampledSequence(
                stop_reason=sequence.stop_reason,
                tokens=sequence.tokens,
                logprobs=sequence.logprobs,
                topk_logprobs=topk,
            )
            for sequence, topk in zip(sent.sequences, outcome.sequence_topk, strict=True)
        ],
        prompt_logprobs=sent.prompt_logprobs,
        topk_prompt_logprobs=sent.topk_prompt_logprobs,
        target_prompt_logprobs=None if target is None else types.TensorData.from_numpy(target),
        prompt_cache_hit_tokens=outcome.prompt_cache_hit_tokens,
        prompt_alt_tokens=alt,
    )


@ROUND_TRIP
@given(outcome=outcomes())
def test_sample_response(outcome: SampleOutcome) -> None:
    decoded = _proto.decode_sample_response(_codecs.encode_sample_outcome(outcome))
    assert decoded == _expected(outcome)


# ---------------------------------------------------------------------------------------------
# Coverage: the round trips go through every table the decoders use
# ---------------------------------------------------------------------------------------------

DECODERS = (
    _codecs.FORWARD_BACKWARD_REQUEST,
    _proto.FORWARD_BACKWARD_OUTPUT,
    _proto.SAMPLE_RESPONSE,
)


def tables(message: _protowire.Message) -> Iterator[_protowire.Message]:
    """``message`` and every message table its fields read, map values included."""
    yield message
    for field in message.fields.values():
        owner = getattr(field.read, "__self__", None)
        if isinstance(owner, _protowire.MapEntry):
            owner = getattr(owner.value.read, "__self__", None)
        if isinstance(owner, _protowire.Message):
            yield from tables(owner)


def test_the_round_trips_read_every_table(monkeypatch: pytest.MonkeyPatch) -> None:
    read: set[str] = set()
    original = _protowire.read_message

    def recording(buf: bytes, start: int, end: int, message: _protowire.Message) -> Any:
        read.add(message.name)
        return original(buf, start, end, message)

    monkeypatch.setattr(_protowire, "read_message", recording)
    datum = types.Datum(
        model_input=types.ModelInput(
            chunks=[
                types.EncodedTextChunk(tokens=[1]),
                types.ImageChunk(data=b"\x89PNG", format="png", expected_tokens=1),
                dmel_chunk(2),
            ]
        ),
        loss_fn_inputs={"target_tokens": [1, 2, 3, 4], "custom": _csr(np.eye(2, dtype=np.float32))},
    )
    test_forward_backward_request.hypothesis.inner_test(  # type: ignore[attr-defined]
        {
            "model_id": "m",
            "seq_id": 1,
            "data": [datum],
            "loss_fn": "ppo",
            "loss_fn_config": {"clip": 0.2, "reference": "sampler"},
            "forward_only": False,
        }
    )
    tensor = types.TensorData.from_numpy(np.ones(2, dtype=np.float32))
    test_forward_backward_output.hypothesis.inner_test(  # type: ignore[attr-defined]
        types.ForwardBackwardOutput(
            loss_fn_output_type="x", loss_fn_outputs=[{"t": tensor}], metrics={"m": 1.0}
        )
    )
    sequence = types.SampledSequence(stop_reason="length", tokens=[3], logprobs=[-0.5])
    test_sample_response.hypothesis.inner_test(  # type: ignore[attr-defined]
        SampleOutcome(
            response=types.SampleResponse(
                sequences=[sequence], prompt_logprobs=[None], topk_prompt_logprobs=[[(1, -1.0)]]
            ),
            sequence_ids=["s"],
            sequence_topk=[[[(2, -2.0)]]],
            target_prompt_logprobs=np.zeros(1, dtype=np.float32),
            alt_tokens=np.zeros((1, 1), dtype=np.int64),
            alt_logprobs=np.zeros((1, 1), dtype=np.float32),
        )
    )
    every = {table.name for decoder in DECODERS for table in tables(decoder)}
    assert len(every) == 16
    assert every <= read
