"""Unit tests of tinker_lite._codec.proto: wire primitives, the public codecs' rules and their
errors."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import pytest

from tests.support.audio import tensor_container
from tests.support.proto import decode_to_dict, encode_decoded
from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite._codec import protowire as _protowire
from tinker_lite._codec import zstd as _zstd_codec
from tinker_lite._errors import InvalidInputError, WireFormatError
from tinker_lite.local.protocol import codecs as _codecs
from tinker_lite.local.service.sampling import SampleOutcome

# ---------------------------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**63 - 1, b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f"),
        (-1, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    ],
)
def test_varint_encoding(value: int, encoded: bytes) -> None:
    assert _protowire.encode_varint(value) == encoded
    decoded, end = _protowire.read_varint(encoded, 0, len(encoded))
    assert end == len(encoded)
    assert _protowire.as_int64(decoded) == value


def test_varint_round_trip_over_bit_lengths() -> None:
    for bits in range(63):
        for value in (1 << bits, (1 << bits) - 1, -(1 << bits), -(1 << 63)):
            encoded = _protowire.encode_varint(value)
            decoded, _ = _protowire.read_varint(encoded, 0, len(encoded))
            assert _protowire.as_int64(decoded) == value


def test_int32_views_of_varints() -> None:
    assert _protowire.as_int32(_protowire.read_varint(_protowire.encode_varint(-5), 0, 10)[0]) == -5
    assert _protowire.as_int32(2**32 + 7) == 7
    assert _protowire.as_uint32(2**32 + 7) == 7
    assert _protowire.as_int32(2**31) == -(2**31)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80" * 10 + b"\x01"])
def test_bad_varints_raise_wire_format_error(data: bytes) -> None:
    with pytest.raises(WireFormatError, match="varint"):
        _protowire.read_varint(data, 0, len(data))


def test_field_keys() -> None:
    assert _protowire.field_key(1, _protowire.WT_LEN) == b"\x0a"
    assert _protowire.field_key(3, _protowire.WT_VARINT) == b"\x18"
    assert _protowire.field_key(16, _protowire.WT_I64) == b"\x81\x01"


def test_iter_fields_yields_every_wire_type() -> None:
    body = (
        b"\x08\x96\x01"  # 1: varint 150
        + b"\x11"
        + struct.pack("<d", 2.5)  # 2: fixed64
        + b"\x1a\x03abc"  # 3: bytes
        + b"\x25"
        + struct.pack("<f", 1.5)  # 4: fixed32
        + b"\x2b\x08\x01\x2c"  # 5: group holding 1: varint 1
        + b"\x30\x00"  # 6: varint 0
    )
    fields = list(_protowire.iter_fields(body, 0, len(body)))
    assert [(f, wt) for f, wt, _, _ in fields] == [(1, 0), (2, 1), (3, 2), (4, 5), (5, 3), (6, 0)]
    assert fields[0][2] == 150
    assert _protowire.read_double(body, fields[1][2]) == 2.5
    assert body[fields[2][2] : fields[2][3]] == b"abc"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"\x0a\x05ab", "bytes long"),  # length past the end
        (b"\x00\x01", "field number 0"),
        (b"\x0e", "wire type 6"),
        (b"\x0f", "wire type 7"),
        (b"\x0c", "wire type 4"),  # end-group without a start
        (b"\x09\x00\x00", "fixed64"),
        (b"\x0d\x00", "fixed32"),
        (b"\x0b\x08\x01", "group"),  # unterminated group
        (b"\x0b\x14", "mismatched"),  # group 1 closed as group 2
        (b"\x08", "varint"),
    ],
)
def test_iter_fields_rejects_malformed_bytes(body: bytes, match: str) -> None:
    with pytest.raises(WireFormatError, match=match):
        list(_protowire.iter_fields(body, 0, len(body)))


def test_packed_and_unpacked_repeated_int64_are_both_read() -> None:
    shape = _protowire.Field(
        "shape", _protowire.WT_LEN, _protowire.read_packed_int64s, _protowire.PACKED
    )
    table = _protowire.Message("Tensor", {4: shape})
    packed = _protowire.encode_varint(3) + _protowire.encode_varint(-1)
    key = _protowire.field_key(4, _protowire.WT_LEN)
    body = (
        key
        + bytes([len(packed)])
        + packed
        + _protowire.field_key(4, _protowire.WT_VARINT)
        + b"\x09"
    )
    assert _protowire.read_message(body, 0, len(body), table) == {"shape": [3, -1, 9]}
    fixed = _protowire.field_key(4, _protowire.WT_I64) + bytes(8)
    with pytest.raises(WireFormatError, match="shape: has wire type 1"):
        _protowire.read_message(fixed, 0, len(fixed), table)


def test_writer_joins_pieces_once() -> None:
    inner = _protowire.Writer()
    inner.varint_field(_protowire.field_key(1, _protowire.WT_VARINT), 5)
    inner.array_field(_protowire.field_key(2, _protowire.WT_LEN), np.array([1, 2], "<i4"))
    outer = _protowire.Writer()
    outer.string_field(_protowire.field_key(1, _protowire.WT_LEN), "é")
    outer.message_field(_protowire.field_key(2, _protowire.WT_LEN), inner)
    outer.packed_varints_field(_protowire.field_key(3, _protowire.WT_LEN), [1, 300])
    outer.double_field(_protowire.field_key(4, _protowire.WT_I64), 0.5)
    body = outer.getvalue()
    assert outer.size == len(body)
    assert body == (
        b"\x0a\x02\xc3\xa9"
        + b"\x12\x0c\x08\x05\x12\x08\x01\x00\x00\x00\x02\x00\x00\x00"
        + b"\x1a\x03\x01\xac\x02"
        + b"\x21"
        + struct.pack("<d", 0.5)
    )


# ---------------------------------------------------------------------------------------------
# ForwardBackwardRequest
# ---------------------------------------------------------------------------------------------


def _datum(tokens: list[int] | None = None) -> types.Datum:
    tokens = tokens or [1, 2, 3]
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens),
        loss_fn_inputs={"target_tokens": [t + 1 for t in tokens], "weights": [1.0] * len(tokens)},
    )


def _encode(**overrides: Any) -> bytes:
    args: dict[str, Any] = {
        "model_id": "m",
        "seq_id": 1,
        "data": [_datum()],
        "loss_fn": "cross_entropy",
        "loss_fn_config": None,
        "forward_only": False,
    }
    args.update(overrides)
    return _proto.encode_forward_backward_request(**args)


def test_request_layout_follows_the_schema() -> None:
    body = _encode(loss_fn_config={"b": 2.0, "a": "x"}, forward_only=True)
    decoded = decode_to_dict("ForwardBackwardRequest", body)
    assert list(decoded) == [
        "model_id",
        "seq_id",
        "data",
        "loss_fn",
        "loss_fn_config",
        "forward_only",
        "loss_fn_config_v2",
    ]
    assert decoded["data"] == [
        {
            "model_input": [{"encoded_text": {"tokens": {"int32le": [1, 2, 3]}}}],
            "loss_fn_inputs": {
                "target_tokens": {
                    "dense": {"int64le": [2, 3, 4]},
                    "dtype": "DTYPE_INT64",
                    "shape": [3],
                },
                "weights": {
                    "dense": {"float32le": [1.0, 1.0, 1.0]},
                    "dtype": "DTYPE_FLOAT32",
                    "shape": [3],
                },
            },
        }
    ]
    # docs/protocol.rst §3.4: numbers in both maps, strings in v2 only, insertion order kept.
    assert decoded["loss_fn_config"] == {"b": 2.0}
    assert list(decoded["loss_fn_config_v2"].items()) == [
        ("b", {"number": 2.0}),
        ("a", {"text": "x"}),
    ]
    assert encode_decoded("ForwardBackwardRequest", decoded) == body


def test_request_defaults_are_not_written() -> None:
    body = _encode(model_id="", seq_id=0, data=[], loss_fn="", loss_fn_config={})
    assert body == b""
    assert _codecs.decode_forward_backward_request(body) == _codecs.ProtoForwardBackwardRequest(
        model_id="", seq_id=0, data=[], loss_fn="", loss_fn_config=None, forward_only=False
    )


def test_request_config_values_keep_their_kind() -> None:
    config = {"clip": np.float32(0.5), "n": 3, "zero": 0.0, "mode": "sampler", "nan": math.nan}
    request = _codecs.decode_forward_backward_request(_encode(loss_fn_config=config))
    assert request.loss_fn_config is not None
    assert request.loss_fn_config["clip"] == 0.5
    assert request.loss_fn_config["n"] == 3.0
    assert request.loss_fn_config["zero"] == 0.0
    assert request.loss_fn_config["mode"] == "sampler"
    assert math.isnan(float(request.loss_fn_config["nan"]))


@pytest.mark.parametrize("value", [True, None, [1.0], {"a": 1}])
def test_request_config_rejects_other_values(value: object) -> None:
    with pytest.raises(InvalidInputError, match=r"loss_fn_config\['k'\]"):
        _encode(loss_fn_config={"k": value})


def test_request_shape_is_written_only_when_known() -> None:
    tensor = types.TensorData(data=np.arange(3, dtype=np.int64), dtype="int64")
    assert tensor.shape is None
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]), loss_fn_inputs={"target_tokens": tensor}
    )
    decoded = decode_to_dict("ForwardBackwardRequest", _encode(data=[datum]))
    assert "shape" not in decoded["data"][0]["loss_fn_inputs"]["target_tokens"]


def test_request_image_chunk() -> None:
    chunks: list[types.ModelInputChunk] = [
        types.EncodedTextChunk(tokens=[5]),
        types.ImageChunk(data=b"\x89PNG", format="png", expected_tokens=2, height=4, width=4),
    ]
    datum = types.Datum(
        model_input=types.ModelInput(chunks=chunks), loss_fn_inputs={"weights": [0.0, 0.0, 1.0]}
    )
    decoded = decode_to_dict("ForwardBackwardRequest", _encode(data=[datum]))
    assert decoded["data"][0]["model_input"][1] == {
        "image": {"data": {"base64": "iVBORw=="}, "format": "png", "expected_tokens": 2}
    }


def test_request_dmel_chunk() -> None:
    # 0.38 request_conv: Chunk.dmel (field 3) = DmelChunk {dmel (1): the bytes, as given}
    dmel = tensor_container((3, 80), constant=True, payload=b"\x00\x01")
    chunks: list[types.ModelInputChunk] = [
        types.EncodedTextChunk(tokens=[5]),
        types.DmelChunk(dmel=dmel),
    ]
    datum = types.Datum(
        model_input=types.ModelInput(chunks=chunks), loss_fn_inputs={"weights": [0.0] * 4}
    )
    body = _encode(data=[datum])
    decoded = decode_to_dict("ForwardBackwardRequest", body)
    assert decoded["data"][0]["model_input"][1] == {"dmel": {"dmel": {"base64": "/gECA1AAAQ=="}}}
    # The Chunk message's bytes: 1a (field 3, LEN) 09, 0a (field 1, LEN) 07, the 7 dmel bytes.
    assert b"\x0a\x0b\x1a\x09\x0a\x07" + dmel in body
    # The server side decoder reads it back into the same chunk.
    assert _codecs.decode_forward_backward_request(body).data == [datum]


def test_request_with_a_malformed_dmel_header_is_refused_by_the_decoder() -> None:
    chunks: list[types.ModelInputChunk] = [
        types.EncodedTextChunk(tokens=[5]),
        types.DmelChunk(dmel=b"\x01\x02\x07"),
    ]
    datum = types.Datum(model_input=types.ModelInput(chunks=chunks), loss_fn_inputs={})
    body = _encode(data=[datum])  # the encoder copies the bytes; the client checks before it
    with pytest.raises(WireFormatError, match=r"model_input\[1\]\.dmel: DmelChunk\.dmel: the Ten"):
        _codecs.decode_forward_backward_request(body)


def test_request_image_asset_pointer_cannot_be_encoded() -> None:
    pointer = types.ImageAssetPointerChunk(location="s3://x.png", format="png", expected_tokens=1)
    datum = types.Datum(
        model_input=types.ModelInput(chunks=[types.EncodedTextChunk(tokens=[1]), pointer]),
        loss_fn_inputs={},
    )
    with pytest.raises(InvalidInputError, match=r"data\[1\]\.model_input\.chunks\[1\]") as info:
        _encode(data=[_datum(), datum])
    assert "ImageAssetPointerChunk" in str(info.value)


def test_request_token_outside_int32_names_the_datum() -> None:
    chunk = types.EncodedTextChunk(tokens=[1, 2, 3])
    object.__setattr__(chunk, "tokens", [1, 2**31, 3])  # bypass the model's own check
    datum = types.Datum(model_input=types.ModelInput(chunks=[chunk]), loss_fn_inputs={})
    with pytest.raises(InvalidInputError, match=r"data\[2\]\.model_input\.chunks\[0\]\.tokens"):
        _encode(data=[_datum(), _datum(), datum])


def test_request_seq_id_outside_int32_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="seq_id"):
        _encode(seq_id=2**31)


def test_request_negative_seq_id_round_trips() -> None:
    assert _codecs.decode_forward_backward_request(_encode(seq_id=-3)).seq_id == -3


def test_request_round_trip_through_the_server_decoder() -> None:
    data = [
        _datum([1, 2]),
        types.Datum(
            model_input=types.ModelInput.from_ints([4, 5, 6]),
            loss_fn_inputs={
                "target_tokens": np.arange(6, dtype=np.int64).reshape(3, 2),
                "weights": np.ones((3, 2), np.float32),
                "extra": types.TensorData(data=np.array([0.5, 1.5], np.float32), dtype="float32"),
            },
        ),
    ]
    request = _codecs.decode_forward_backward_request(
        _encode(data=data, loss_fn_config={"beta": 0.1}, forward_only=True)
    )
    assert request.data == data
    assert request.loss_fn_config == {"beta": 0.1}
    assert request.forward_only is True


def test_request_decoder_merges_config_maps_v2_first() -> None:
    body = encode_decoded(
        "ForwardBackwardRequest",
        {
            "loss_fn_config": {"a": 1.0, "b": 2.0},
            "loss_fn_config_v2": {"b": {"text": "two"}, "c": {"number": 3.0}},
        },
    )
    config = _codecs.decode_forward_backward_request(body).loss_fn_config
    assert config == {"a": 1.0, "b": "two", "c": 3.0}


@pytest.mark.parametrize(
    ("decoded", "match"),
    [
        ({"data": [{"model_input": [{}]}]}, "no content"),
        ({"data": [{"model_input": [{"dmel": {}}]}]}, "dmel"),
        ({"data": [{"model_input": [{"encoded_text": {"tokens": {"int32le": [-1]}}}]}]}, "token"),
        (
            {
                "data": [
                    {
                        "model_input": [{"encoded_text": {"tokens": {"int32le": [1]}}}],
                        "loss_fn_inputs": {"w": {"dense": {"float32le": [1.0]}}},
                    }
                ]
            },
            "DTYPE_UNSPECIFIED",
        ),
        (
            {
                "data": [
                    {
                        "model_input": [{"encoded_text": {"tokens": {"int32le": [1]}}}],
                        "loss_fn_inputs": {
                            "w": {
                                "dense": {"float32le": [1.0]},
                                "dtype": "DTYPE_FLOAT32",
                                "shape": [2],
                            }
                        },
                    }
                ]
            },
            "does not match",
        ),
        (
            {
                "data": [
                    {
                        "model_input": [{"encoded_text": {"tokens": {"int32le": [1]}}}],
                        "loss_fn_inputs": {
                            "w": {
                                "sparse_csr": {
                                    "values": {"float32le": [1.0]},
                                    "crow_indices": {"int64le": [0, 1]},
                                    "col_indices": {"int64le": [5]},
                                },
                                "dtype": "DTYPE_FLOAT32",
                                "shape": [1, 2],
                            }
                        },
                    }
                ]
            },
            "sparse CSR",
        ),
        (
            {
                "data": [
                    {
                        "model_input": [
                            {"image": {"data": {"base64": "AA=="}, "format": "gif"}},
                        ],
                    }
                ]
            },
            "format",
        ),
    ],
)
def test_request_decoder_rejects_invalid_content(decoded: dict[str, Any], match: str) -> None:
    body = encode_decoded("ForwardBackwardRequest", decoded)
    with pytest.raises(WireFormatError, match=match):
        _codecs.decode_forward_backward_request(body)


def test_request_decoder_rejects_wrong_wire_types() -> None:
    with pytest.raises(WireFormatError, match="model_id"):
        _codecs.decode_forward_backward_request(b"\x08\x01")  # model_id as a varint
    with pytest.raises(WireFormatError, match="seq_id"):
        _codecs.decode_forward_backward_request(b"\x12\x00")  # seq_id as bytes


def test_decoders_skip_unknown_fields() -> None:
    unknown = (
        b"\xf8\x07\x01" + b"\x82\x08\x02hi" + b"\x8d\x08\x00\x00\x00\x00" + b"\x8b\x08\x8c\x08"
    )
    body = _encode(loss_fn_config={"a": 1.0})
    assert _codecs.decode_forward_backward_request(unknown + body) == (
        _codecs.decode_forward_backward_request(body)
    )
    out = types.ForwardBackwardOutput(
        loss_fn_output_type="T", loss_fn_outputs=[], metrics={"loss:sum": 1.0}
    )
    assert (
        _proto.decode_forward_backward_output(unknown + _codecs.encode_forward_backward_output(out))
        == out
    )
    resp = types.SampleResponse(sequences=[])
    assert _proto.decode_sample_response(unknown + _codecs.encode_sample_response(resp)) == resp


def test_decoders_accept_bytearray_and_memoryview() -> None:
    body = _encode()
    expected = _codecs.decode_forward_backward_request(body)
    assert _codecs.decode_forward_backward_request(bytearray(body)) == expected
    assert _codecs.decode_forward_backward_request(memoryview(body)) == expected
    with pytest.raises(WireFormatError):
        _codecs.decode_forward_backward_request("text")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# ForwardBackwardOutput
# ---------------------------------------------------------------------------------------------


def _output_body(records: list[dict[str, Any]], output_type: str = "") -> bytes:
    decoded: dict[str, Any] = {"loss_fn_outputs": records}
    if output_type:
        decoded = {"loss_fn_output_type": output_type, **decoded}
    return encode_decoded("ForwardBackwardOutput", decoded)


def test_output_round_trip_and_layout() -> None:
    out = types.ForwardBackwardOutput(
        loss_fn_output_type="CrossEntropyLossReturn",
        loss_fn_outputs=[
            {"logprobs": types.TensorData.from_numpy(np.array([-1.0, -2.0], np.float32))},
            {"logprobs": types.TensorData.from_numpy(np.array([-3.0], np.float32))},
        ],
        metrics={"loss:sum": 6.0},
    )
    body = _codecs.encode_forward_backward_output(out)
    assert _proto.decode_forward_backward_output(body) == out
    decoded = decode_to_dict("ForwardBackwardOutput", body)
    assert decoded["loss_fn_outputs"] == [
        {
            "fields": {
                "logprobs": {
                    "data": {"float32le": [-1.0, -2.0, -3.0]},
                    "offsets": {"int64le": [0, 8, 12]},
                    "dtype": "DTYPE_FLOAT32",
                }
            },
            "num_datums": 2,
        }
    ]


@pytest.mark.parametrize(
    ("output_type", "expected"),
    [("CrossEntropyLossReturn", "CrossEntropyLossReturn"), ("a:b:Tail", "Tail"), ("", "")],
)
def test_output_type_is_reduced_after_the_last_colon(output_type: str, expected: str) -> None:
    body = _output_body([], output_type)
    assert _proto.decode_forward_backward_output(body).loss_fn_output_type == expected


def test_output_bfloat16_is_widened_and_int32_reported_as_int64() -> None:
    values = np.array([1.0, -0.5, 3.0], np.float32)
    bits = (values.view(np.uint32) >> 16).tolist()
    body = _output_body(
        [
            {
                "fields": {
                    "lp": {
                        "data": {"uint16le": bits},
                        "offsets": {"int64le": [0, 6]},
                        "dtype": "DTYPE_BFLOAT16",
                    },
                    "ids": {
                        "data": {"int32le": [7, -8, 9]},
                        "offsets": {"int64le": [0, 12]},
                        "dtype": "DTYPE_INT32",
                        "trailing_shape": [3],
                    },
                },
                "num_datums": 1,
            }
        ]
    )
    (outputs,) = _proto.decode_forward_backward_output(body).loss_fn_outputs
    assert outputs["lp"].dtype == "float32"
    assert outputs["lp"].data == [1.0, -0.5, 3.0]
    assert outputs["ids"].dtype == "int64"
    assert outputs["ids"].shape == [1, 3]
    assert outputs["ids"].data == [7, -8, 9]


def test_output_empty_record_stands_for_empty_outputs() -> None:
    body = _output_body([{"num_datums": 3}])
    assert _proto.decode_forward_backward_output(body).loss_fn_outputs == [{}, {}, {}]


def _batched(**overrides: Any) -> dict[str, Any]:
    tensor: dict[str, Any] = {
        "data": {"float32le": [1.0, 2.0, 3.0, 4.0]},
        "offsets": {"int64le": [0, 8, 16]},
        "dtype": "DTYPE_FLOAT32",
    }
    tensor.update(overrides)
    return {"fields": {"x": tensor}, "num_datums": 2}


@pytest.mark.parametrize(
    "record",
    [
        _batched(offsets={"int64le": [0, 8, 20]}),  # past the end
        _batched(offsets={"int64le": [0, 6, 16]}),  # not aligned to float32
        _batched(offsets={"int64le": [8, 4, 16]}),  # decreasing
        _batched(offsets={"int64le": [-8, 8, 16]}),  # negative
        _batched(offsets={"int64le": []}),  # data but no offsets
        _batched(offsets={"base64": "AAAA"}),  # not a multiple of 8 bytes
        _batched(data={"base64": "AAA="}),  # not a multiple of 4 bytes
        _batched(dtype="DTYPE_UNSPECIFIED"),
        _batched(trailing_shape=[3]),  # 2 values per datum, rows of 3
        _batched(trailing_shape=[-2]),
        _batched(trailing_shape=[0]),
        {**_batched(), "num_datums": 5},
        {"num_datums": -1},
        {"num_datums": 2**40},
    ],
)
def test_output_decoder_rejects_inconsistent_records(record: dict[str, Any]) -> None:
    with pytest.raises(WireFormatError):
        _proto.decode_forward_backward_output(_output_body([record]))


def test_output_encoder_splits_records_by_signature() -> None:
    def td(values: list[float], shape: list[int] | None = None) -> types.TensorData:
        return types.TensorData(data=np.array(values, np.float32), dtype="float32", shape=shape)

    out = types.ForwardBackwardOutput(
        loss_fn_output_type="T",
        loss_fn_outputs=[
            {"a": td([1.0])},
            {"a": td([2.0, 3.0])},
            {"a": td([1.0, 2.0], [1, 2])},
            {"b": td([5.0])},
        ],
        metrics={},
    )
    body = _codecs.encode_forward_backward_output(out)
    records = decode_to_dict("ForwardBackwardOutput", body)["loss_fn_outputs"]
    assert [r["num_datums"] for r in records] == [2, 1, 1]
    decoded = _proto.decode_forward_backward_output(body)
    assert decoded.loss_fn_outputs[0]["a"].shape == [1]
    assert decoded.loss_fn_outputs[2]["a"].shape == [1, 2]
    assert decoded == types.ForwardBackwardOutput(
        loss_fn_output_type="T",
        loss_fn_outputs=[
            {"a": td([1.0], [1])},
            {"a": td([2.0, 3.0], [2])},
            {"a": td([1.0, 2.0], [1, 2])},
            {"b": td([5.0], [1])},
        ],
        metrics={},
    )


# ---------------------------------------------------------------------------------------------
# SampleResponse
# ---------------------------------------------------------------------------------------------


def test_sample_round_trip() -> None:
    resp = types.SampleResponse(
        sequences=[
            types.SampledSequence(
                stop_reason=types.StopReason.LENGTH, tokens=[1, 2], logprobs=[-0.5, -0.25]
            ),
            types.SampledSequence(stop_reason=types.StopReason.STOP, tokens=[3]),
        ],
        prompt_logprobs=[None, -1.0],
        topk_prompt_logprobs=[None, [(4, -0.5), (0, -1.0)]],
    )
    body = _codecs.encode_sample_response(resp)
    assert _proto.decode_sample_response(body) == resp
    decoded = decode_to_dict("SampleResponse", body)
    assert decoded["topk_prompt_logprobs"] == {
        "token_ids": {"int32le": [0, 0, 4, 0]},
        "logprobs": {"float32le": [-99999.0, -99999.0, -0.5, -1.0]},
        "k": 2,
        "length": 2,
    }
    assert math.isnan(decoded["prompt_logprobs"]["float32le"][0])
    assert "stop_reason" not in decoded["sequences"][1]  # STOP is the enum default


def test_sample_topk_sentinels_are_dropped() -> None:
    body = encode_decoded(
        "SampleResponse",
        {
            "topk_prompt_logprobs": {
                "token_ids": {"int32le": [0, 0, 5, 0, 0, 6]},
                "logprobs": {"float32le": [-99999.0, -99999.0, -1.0, -99999.0, -2.0, -3.0]},
                "k": 2,
                "length": 3,
            }
        },
    )
    assert _proto.decode_sample_response(body).topk_prompt_logprobs == [
        None,
        [(5, -1.0)],
        [(0, -2.0), (6, -3.0)],
    ]


def test_sample_unknown_stop_reason_is_kept() -> None:
    body = encode_decoded("SampleResponse", {"sequences": [{"stop_reason": 7}]})
    (sequence,) = _proto.decode_sample_response(body).sequences
    assert str(sequence.stop_reason) == "stop_reason_7"
    assert not types.StopReason.is_known(sequence.stop_reason.value)


@pytest.mark.parametrize(
    "decoded",
    [
        {"topk_prompt_logprobs": {"token_ids": {"int32le": [1, 2]}, "k": 2, "length": 2}},
        {"topk_prompt_logprobs": {"token_ids": {"int32le": [1]}, "logprobs": {"float32le": [0.0]}}},
        {"prompt_logprobs": {"base64": "AAA="}},
        {"sequences": [{"tokens": {"base64": "AAAAAAA="}}]},
        {"sequences": [{"logprobs": {"base64": "AA=="}}]},
    ],
)
def test_sample_decoder_rejects_inconsistent_arrays(decoded: dict[str, Any]) -> None:
    with pytest.raises(WireFormatError):
        _proto.decode_sample_response(encode_decoded("SampleResponse", decoded))


def test_sample_encoder_rejects_unknown_stop_reason_and_big_tokens() -> None:
    odd = types.SampledSequence(stop_reason=types.StopReason("aborted"), tokens=[1])
    with pytest.raises(WireFormatError, match="stop_reason"):
        _codecs.encode_sample_response(types.SampleResponse(sequences=[odd]))
    big = types.SampledSequence(stop_reason=types.StopReason.STOP, tokens=[2**31])
    with pytest.raises(WireFormatError, match="int32"):
        _codecs.encode_sample_response(types.SampleResponse(sequences=[big]))
    for row in ([(2**31, -0.5)], [(1, "x")], [(1, -0.5, 2)]):
        topk = types.SampleResponse(sequences=[], topk_prompt_logprobs=[None, row])  # type: ignore[list-item]
        with pytest.raises(WireFormatError, match=r"topk_prompt_logprobs\[1\].*int32 token"):
            _codecs.encode_sample_response(topk)


# ---------------------------------------------------------------------------------------------
# Content type and zstd
# ---------------------------------------------------------------------------------------------


def test_zstd_helpers_follow_availability(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_zstd_codec, "_zstd", lambda: None)
    assert _proto.zstd_available() is False
    with pytest.raises(WireFormatError, match="zstandard"):
        _proto.compress(b"x")


def test_zstd_round_trip_when_installed() -> None:
    zstandard = pytest.importorskip("zstandard")
    body = _encode()
    assert zstandard.ZstdDecompressor().decompressobj().decompress(_proto.compress(body)) == body


def test_sample_outcome_round_trips_the_038_fields() -> None:
    response = types.SampleResponse(
        sequences=[
            types.SampledSequence(stop_reason="length", tokens=[5, 6], logprobs=[-1.0, -2.0]),
            types.SampledSequence(stop_reason="stop", tokens=[7], logprobs=[-0.5]),
        ],
        prompt_logprobs=[None, -1.5, -2.5],
    )
    outcome = SampleOutcome(
        response,
        sequence_ids=["r:0", "r:1"],
        sequence_topk=[[[(5, -1.0), (9, -1.25)], [(6, -2.0)]], None],
        target_prompt_logprobs=np.array([[-1.5, 0.0], [-2.5, -3.0]], dtype=np.float32),
        alt_tokens=np.array([[1, 2], [3, 4]], dtype=np.int64),
        alt_logprobs=np.array([[-0.25, -0.5], [-0.75, -1.0]], dtype=np.float32),
        prompt_cache_hit_tokens=2,
    )
    decoded = _proto.decode_sample_response(_codecs.encode_sample_outcome(outcome))
    assert decoded.sequences[0].topk_logprobs == [[(5, -1.0), (9, -1.25)], [(6, -2.0)]]
    assert decoded.sequences[1].topk_logprobs is None
    assert decoded.prompt_cache_hit_tokens == 2
    assert decoded.target_prompt_logprobs is not None
    assert decoded.target_prompt_logprobs.to_numpy().tolist() == [[-1.5, 0.0], [-2.5, -3.0]]
    alt = decoded.prompt_alt_tokens
    assert alt is not None
    assert alt.tokens.dtype == "int64"
    assert alt.tokens.to_numpy().tolist() == [[1, 2], [3, 4]]
    assert alt.logprobs.to_numpy().tolist() == [[-0.25, -0.5], [-0.75, -1.0]]
    as_json = _codecs.sample_outcome_json(outcome)
    assert as_json["sequences"][0]["topk_logprobs"] == [[[5, -1.0], [9, -1.25]], [[6, -2.0]]]
    assert as_json["prompt_alt_tokens"]["tokens"] == {
        "data": [1, 2, 3, 4],
        "dtype": "int64",
        "shape": [2, 2],
    }
