"""Malformed protobuf bodies: every decoder returns a value or raises WireFormatError, nothing else.

Random bytes, valid bodies with bytes replaced / inserted / deleted, and every truncation of a
valid body are fed to the three decoders of tinker_lite._codec.proto.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.proto import encode_decoded
from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite._errors import WireFormatError
from tinker_lite.local.protocol import codecs as _codecs

FUZZ = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _request_seeds() -> list[bytes]:
    datum = types.Datum(
        model_input=types.ModelInput(
            chunks=[
                types.EncodedTextChunk(tokens=[1, 2]),
                types.ImageChunk(data=b"\x89PNG\r\n", format="png", expected_tokens=1),
            ]
        ),
        loss_fn_inputs={
            "target_tokens": np.array([[1, 2], [3, 4], [5, 6]], np.int64),
            "weights": np.array([0.0, 1.0, 0.5], np.float32),
        },
    )
    plain = _proto.encode_forward_backward_request(
        model_id="run-1",
        seq_id=3,
        data=[datum, datum],
        loss_fn="dro",
        loss_fn_config={"beta": 0.5, "reference": "sampler"},
        forward_only=True,
    )
    sparse = encode_decoded(
        "ForwardBackwardRequest",
        {
            "data": [
                {
                    "model_input": [{"encoded_text": {"tokens": {"int32le": [1, 2]}}}],
                    "loss_fn_inputs": {
                        "weights": {
                            "sparse_csr": {
                                "values": {"float32le": [1.0, 2.0]},
                                "crow_indices": {"int64le": [0, 1, 2]},
                                "col_indices": {"int64le": [1, 0]},
                            },
                            "dtype": "DTYPE_FLOAT32",
                            "shape": [2, 2],
                        }
                    },
                }
            ]
        },
    )
    return [plain, sparse]


def _output_seeds() -> list[bytes]:
    out = types.ForwardBackwardOutput(
        loss_fn_output_type="a:CrossEntropyLossReturn",
        loss_fn_outputs=[
            {
                "logprobs": types.TensorData.from_numpy(np.array([-1.0, -2.0], np.float32)),
                "ids": types.TensorData.from_numpy(np.array([[1, 2]], np.int64)),
            },
            {
                "logprobs": types.TensorData.from_numpy(np.array([-3.0], np.float32)),
                "ids": types.TensorData.from_numpy(np.array([[3, 4]], np.int64)),
            },
            {},
        ],
        metrics={"loss:sum": 6.0},
    )
    bf16 = encode_decoded(
        "ForwardBackwardOutput",
        {
            "loss_fn_outputs": [
                {
                    "fields": {
                        "lp": {
                            "data": {"uint16le": [16256, 49152]},
                            "offsets": {"int64le": [0, 2, 4]},
                            "dtype": "DTYPE_BFLOAT16",
                        }
                    },
                    "num_datums": 2,
                }
            ]
        },
    )
    return [_codecs.encode_forward_backward_output(out), bf16]


def _sample_seeds() -> list[bytes]:
    resp = types.SampleResponse(
        sequences=[
            types.SampledSequence(
                stop_reason=types.StopReason.LENGTH, tokens=[1, 2], logprobs=[-0.5, -0.25]
            ),
            types.SampledSequence(stop_reason=types.StopReason.STOP, tokens=[3]),
        ],
        prompt_logprobs=[None, -1.0, -2.0],
        topk_prompt_logprobs=[None, [(4, -0.5), (5, -1.0)], [(6, -0.25)]],
    )
    return [_codecs.encode_sample_response(resp)]


DECODERS: dict[str, tuple[Callable[[bytes], Any], list[bytes]]] = {
    "request": (_codecs.decode_forward_backward_request, _request_seeds()),
    "output": (_proto.decode_forward_backward_output, _output_seeds()),
    "sample": (_proto.decode_sample_response, _sample_seeds()),
}


def _decode_or_wire_error(decoder: Callable[[bytes], Any], body: bytes) -> None:
    try:
        decoder(body)
    except WireFormatError:
        pass


@st.composite
def _mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    body = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["replace", "insert", "delete"]))
        pos = draw(st.integers(0, max(0, len(body) - 1)))
        if action == "replace" and body:
            body[pos] = draw(st.integers(0, 255))
        elif action == "insert":
            body[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif body:
            del body[pos : pos + draw(st.integers(1, 4))]
    return bytes(body)


def test_seeds_are_valid() -> None:
    for decoder, seeds in DECODERS.values():
        for seed in seeds:
            decoder(seed)


@pytest.mark.parametrize("name", list(DECODERS))
def test_every_truncation_is_handled(name: str) -> None:
    decoder, seeds = DECODERS[name]
    for seed in seeds:
        for end in range(len(seed)):
            _decode_or_wire_error(decoder, seed[:end])


@pytest.mark.parametrize("name", list(DECODERS))
@FUZZ
@given(data=st.data())
def test_random_bytes_are_handled(name: str, data: st.DataObject) -> None:
    decoder, _ = DECODERS[name]
    _decode_or_wire_error(decoder, data.draw(st.binary(max_size=200)))


@pytest.mark.parametrize("name", list(DECODERS))
@FUZZ
@given(data=st.data())
def test_mutated_bodies_are_handled(name: str, data: st.DataObject) -> None:
    decoder, seeds = DECODERS[name]
    _decode_or_wire_error(decoder, data.draw(_mutated(seeds)))
