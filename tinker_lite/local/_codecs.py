"""The local server's protobuf codecs: requests it reads and results it writes (WIRE.md §13.7).

The mirror of the client codecs in :mod:`tinker_lite._codec.proto`, built on the shared primitives
of :mod:`tinker_lite._codec.protowire`: :func:`decode_forward_backward_request`,
:func:`encode_forward_backward_output`, :func:`encode_sample_response`. Decoders raise
:class:`~tinker_lite._errors.WireFormatError` for malformed bytes and skip unknown fields."""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.protowire import (
    DTYPE_FLOAT32,
    DTYPE_INT64,
    F32,
    I32,
    I64,
    K1_LEN,
    K1_VARINT,
    K2_I64,
    K2_LEN,
    K3_LEN,
    K3_VARINT,
    K4_LEN,
    K4_VARINT,
    K5_LEN,
    K6_LEN,
    STOP_REASON_LENGTH,
    TOPK_MASK_LOGPROB,
    TOPK_MASK_TOKEN,
    WT_I64,
    WT_LEN,
    WT_VARINT,
    Writer,
    as_bytes,
    as_int32,
    decode_tensor,
    expect_wire_type,
    iter_fields,
    read_array,
    read_double,
    read_double_entry,
    read_entry,
    read_string,
)
from tinker_lite._errors import InvalidInputError, WireFormatError

__all__ = [
    "ProtoForwardBackwardRequest",
    "SampleOutcome",
    "decode_forward_backward_request",
    "encode_forward_backward_output",
    "encode_sample_outcome",
    "encode_sample_response",
    "peek_model_and_seq",
]

# ---------------------------------------------------------------------------------------------
# ForwardBackwardRequest (client encodes, server decodes)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ProtoForwardBackwardRequest:
    """A decoded ``tinker_public.ForwardBackwardRequest`` (forward when ``forward_only``).

    ``loss_fn_config`` merges both config maps (``loss_fn_config_v2`` wins); None when the
    request had neither.
    """

    model_id: str
    seq_id: int
    data: list[types.Datum]
    loss_fn: str
    loss_fn_config: dict[str, float | str] | None
    forward_only: bool


def decode_forward_backward_request(
    body: bytes | bytearray | memoryview,
) -> ProtoForwardBackwardRequest:
    """Decode a ``ForwardBackwardRequest`` body (sparse CSR tensors become dense)."""
    buf = as_bytes(body)
    model_id = ""
    seq_id = 0
    loss_fn = ""
    forward_only = False
    datum_ranges: list[tuple[int, int]] = []
    config_v1: dict[str, float] = {}
    config_v2: dict[str, float | str] = {}
    for field, wire_type, a, b in iter_fields(buf, 0, len(buf)):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.model_id")
            model_id = read_string(buf, a, b, "ForwardBackwardRequest.model_id")
        elif field == 2:
            expect_wire_type(wire_type, WT_VARINT, "ForwardBackwardRequest.seq_id")
            seq_id = as_int32(a)
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.data")
            datum_ranges.append((a, b))
        elif field == 4:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.loss_fn")
            loss_fn = read_string(buf, a, b, "ForwardBackwardRequest.loss_fn")
        elif field == 5:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.loss_fn_config")
            name, number = read_double_entry(buf, a, b, "ForwardBackwardRequest.loss_fn_config")
            config_v1[name] = number
        elif field == 6:
            expect_wire_type(wire_type, WT_VARINT, "ForwardBackwardRequest.forward_only")
            forward_only = a != 0
        elif field == 7:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardRequest.loss_fn_config_v2")
            name, value = _read_config_v2_entry(buf, a, b)
            config_v2[name] = value
    data = [_decode_datum(buf, a, b, index) for index, (a, b) in enumerate(datum_ranges)]
    config: dict[str, float | str] | None = None
    if config_v1 or config_v2:
        config = dict(config_v1)
        config.update(config_v2)
    return ProtoForwardBackwardRequest(
        model_id=model_id,
        seq_id=seq_id,
        data=data,
        loss_fn=loss_fn,
        loss_fn_config=config,
        forward_only=forward_only,
    )


def _read_config_v2_entry(buf: bytes, start: int, end: int) -> tuple[str, float | str]:
    where = "ForwardBackwardRequest.loss_fn_config_v2"
    name, entry_value = read_entry(buf, start, end, where, WT_LEN)
    value: float | str = 0.0
    if entry_value is not None:
        # LossConfigValue { oneof value { double number = 1; string text = 2; } }
        for inner, inner_type, c, d in iter_fields(buf, *entry_value):
            if inner == 1:
                expect_wire_type(inner_type, WT_I64, f"{where}[{name!r}].number")
                value = read_double(buf, c)
            elif inner == 2:
                expect_wire_type(inner_type, WT_LEN, f"{where}[{name!r}].text")
                value = read_string(buf, c, d, f"{where}[{name!r}].text")
    return name, value


def _decode_datum(buf: bytes, start: int, end: int, index: int) -> types.Datum:
    where = f"data[{index}]"
    chunks: list[types.ModelInputChunk] = []
    inputs: dict[str, types.TensorData] = {}
    try:
        for field, wire_type, a, b in iter_fields(buf, start, end):
            if field == 1:
                expect_wire_type(wire_type, WT_LEN, f"{where}.model_input")
                chunks.append(_decode_chunk(buf, a, b, f"{where}.model_input[{len(chunks)}]"))
            elif field == 2:
                expect_wire_type(wire_type, WT_LEN, f"{where}.loss_fn_inputs")
                name, tensor = _decode_tensor_entry(buf, a, b, f"{where}.loss_fn_inputs")
                inputs[name] = tensor
        return types.Datum(model_input=types.ModelInput(chunks=chunks), loss_fn_inputs=inputs)
    except InvalidInputError as exc:
        raise WireFormatError(f"protobuf: {where}: {exc}") from exc


def _decode_chunk(buf: bytes, start: int, end: int, where: str) -> types.ModelInputChunk:
    kind = 0
    a_sel = b_sel = 0
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field in (1, 2, 3):
            expect_wire_type(wire_type, WT_LEN, where)
            kind, a_sel, b_sel = field, a, b
    if kind == 1:
        token_range = (b_sel, b_sel)
        for field, wire_type, a, b in iter_fields(buf, a_sel, b_sel):
            if field == 1:
                expect_wire_type(wire_type, WT_LEN, f"{where}.encoded_text.tokens")
                token_range = (a, b)
        ids = read_array(buf, *token_range, I32, f"{where}.encoded_text.tokens")
        return types.EncodedTextChunk(tokens=ids)
    if kind == 2:
        data = b""
        image_format = ""
        expected: int | None = None
        for field, wire_type, a, b in iter_fields(buf, a_sel, b_sel):
            if field == 1:
                expect_wire_type(wire_type, WT_LEN, f"{where}.image.data")
                data = buf[a:b]
            elif field == 2:
                expect_wire_type(wire_type, WT_LEN, f"{where}.image.format")
                image_format = read_string(buf, a, b, f"{where}.image.format")
            elif field == 3:
                expect_wire_type(wire_type, WT_VARINT, f"{where}.image.expected_tokens")
                expected = as_int32(a)
        return types.ImageChunk(
            data=data,
            format=image_format,  # type: ignore[arg-type]  # validated by ImageChunk
            expected_tokens=expected,
        )
    if kind == 3:
        raise WireFormatError(f"protobuf: {where}: dmel (audio) chunks are not supported")
    raise WireFormatError(f"protobuf: {where}: chunk has no content")


def _decode_tensor_entry(
    buf: bytes, start: int, end: int, where: str
) -> tuple[str, types.TensorData]:
    name, tensor_range = read_entry(buf, start, end, where, WT_LEN)
    return name, decode_tensor(buf, *(tensor_range or (end, end)), f"{where}[{name!r}]")


# ---------------------------------------------------------------------------------------------
# ForwardBackwardOutput (server encodes, client decodes)
# ---------------------------------------------------------------------------------------------


def encode_forward_backward_output(out: types.ForwardBackwardOutput) -> bytes:
    """Return the protobuf body of a forward/forward_backward result.

    Consecutive datums whose outputs have the same keys, dtypes and trailing shapes share one
    ``ArrayRecord`` (datum data concatenated, int64 byte offsets).
    """
    message = Writer()
    if out.loss_fn_output_type:
        message.string_field(K1_LEN, out.loss_fn_output_type)
    group: list[dict[str, types.TensorData]] = []
    signature: tuple[tuple[str, str, tuple[int, ...]], ...] | None = None
    for outputs in out.loss_fn_outputs:
        current = tuple(
            (name, tensor.dtype, _trailing_shape(tensor)) for name, tensor in outputs.items()
        )
        if group and current != signature:
            message.message_field(K2_LEN, _encode_array_record(group, signature or ()))
            group = []
        group.append(outputs)
        signature = current
    if group:
        message.message_field(K2_LEN, _encode_array_record(group, signature or ()))
    for name, value in out.metrics.items():
        entry = Writer()
        entry.string_field(K1_LEN, name)
        entry.double_field(K2_I64, float(value))
        message.message_field(K3_LEN, entry)
    return message.getvalue()


def _trailing_shape(tensor: types.TensorData) -> tuple[int, ...]:
    shape = tensor.shape
    return tuple(shape[1:]) if shape else ()


def _encode_array_record(
    group: list[dict[str, types.TensorData]],
    signature: tuple[tuple[str, str, tuple[int, ...]], ...],
) -> Writer:
    record = Writer()
    for name, dtype_name, trailing in signature:
        dtype: np.dtype[Any] = F32 if dtype_name == "float32" else I64
        code = DTYPE_FLOAT32 if dtype_name == "float32" else DTYPE_INT64
        arrays = [
            np.ascontiguousarray(outputs[name]._dense_flat(), dtype=dtype) for outputs in group
        ]
        offsets = np.zeros(len(arrays) + 1, dtype=I64)
        np.cumsum([array.nbytes for array in arrays], out=offsets[1:])
        batched = Writer()
        data = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
        if data.size:
            batched.array_field(K1_LEN, data)
        batched.array_field(K2_LEN, offsets)
        batched.varint_field(K3_VARINT, code)
        if trailing:
            batched.packed_varints_field(K4_LEN, trailing)
        entry = Writer()
        entry.string_field(K1_LEN, name)
        entry.message_field(K2_LEN, batched)
        record.message_field(K2_LEN, entry)
    record.varint_field(K3_VARINT, len(group))
    return record


# ---------------------------------------------------------------------------------------------
# SampleResponse (server encodes, client decodes)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SampleOutcome:
    """A sample result with the 0.38 fields the shared response model may not hold (yet).

    ``sequence_topk[i]``: ``topk_sample_logprobs`` rows of sequence i (None when not asked for);
    the arrays answer ``target_prompt_logprobs`` (float32) and ``prompt_alt_tokens_k`` (int64 ids,
    float32 logprobs), each ``(len(prompt) - 1, k)``.
    """

    response: types.SampleResponse
    sequence_ids: list[str]
    sequence_topk: list[list[list[tuple[int, float]] | None] | None]
    target_prompt_logprobs: npt.NDArray[Any] | None = None
    alt_tokens: npt.NDArray[Any] | None = None
    alt_logprobs: npt.NDArray[Any] | None = None
    prompt_cache_hit_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        """The JSON answer: the response model's keys plus the 0.38 ones."""
        body: dict[str, Any] = _wire.to_builtins(self.response)
        for index, sequence in enumerate(body["sequences"]):
            sequence["sequence_id"] = self.sequence_ids[index]
            topk = self.sequence_topk[index]
            if topk is not None:
                sequence["topk_logprobs"] = [
                    None if row is None else [[t, lp] for t, lp in row] for row in topk
                ]
        body["prompt_cache_hit_tokens"] = self.prompt_cache_hit_tokens
        if self.target_prompt_logprobs is not None:
            body["target_prompt_logprobs"] = _tensor_json(self.target_prompt_logprobs, "float32")
        if self.alt_tokens is not None and self.alt_logprobs is not None:
            body["prompt_alt_tokens"] = {
                "tokens": _tensor_json(self.alt_tokens, "int64"),
                "logprobs": _tensor_json(self.alt_logprobs, "float32"),
            }
        return body


def _tensor_json(array: npt.NDArray[Any], dtype: str) -> dict[str, Any]:
    return {"data": array.reshape(-1).tolist(), "dtype": dtype, "shape": list(array.shape)}


def _encode_tensor(array: npt.NDArray[Any], code: int) -> Writer:
    """A dense ``Tensor`` message (WIRE.md §13.7): bytes, dtype, packed shape."""
    tensor = Writer()
    dtype = F32 if code == DTYPE_FLOAT32 else I64
    contiguous = np.ascontiguousarray(array, dtype=dtype)
    if contiguous.size:
        tensor.array_field(K1_LEN, contiguous)
    tensor.varint_field(K3_VARINT, code)
    tensor.packed_varints_field(K4_LEN, [int(dim) for dim in contiguous.shape])
    return tensor


def encode_sample_outcome(outcome: SampleOutcome) -> bytes:
    """Return the protobuf body of a sample result with its 0.38 fields."""
    message = Writer()
    message.extend(_encode_sequences_and_prompt(outcome.response, outcome.sequence_topk))
    if outcome.prompt_cache_hit_tokens:
        message.varint_field(K4_VARINT, outcome.prompt_cache_hit_tokens)
    if outcome.target_prompt_logprobs is not None:
        message.message_field(K5_LEN, _encode_tensor(outcome.target_prompt_logprobs, DTYPE_FLOAT32))
    if outcome.alt_tokens is not None and outcome.alt_logprobs is not None:
        alt = Writer()
        alt.message_field(K1_LEN, _encode_tensor(outcome.alt_tokens, DTYPE_INT64))
        alt.message_field(K2_LEN, _encode_tensor(outcome.alt_logprobs, DTYPE_FLOAT32))
        message.message_field(K6_LEN, alt)
    return message.getvalue()


def encode_sample_response(resp: types.SampleResponse) -> bytes:
    """Return the protobuf body of a sample result."""
    return _encode_sequences_and_prompt(resp, None).getvalue()


def _encode_sequences_and_prompt(
    resp: types.SampleResponse,
    sequence_topk: Sequence[Sequence[Sequence[tuple[int, float]] | None] | None] | None,
) -> Writer:
    message = Writer()
    for index, sequence in enumerate(resp.sequences):
        where = f"sequences[{index}]"
        seq = Writer()
        reason = str(sequence.stop_reason)
        if reason == types.StopReason.LENGTH.value:
            seq.varint_field(K1_VARINT, STOP_REASON_LENGTH)
        elif reason != types.StopReason.STOP.value:
            raise WireFormatError(f"protobuf: {where}.stop_reason {reason!r} has no enum value")
        if sequence.tokens:
            seq.bytes_field(K2_LEN, _pack_int32s(sequence.tokens, f"{where}.tokens"))
        if sequence.logprobs is not None:
            seq.array_field(K3_LEN, np.asarray(sequence.logprobs, dtype=F32))
        topk = sequence_topk[index] if sequence_topk is not None else None
        if topk is not None:
            seq.message_field(K4_LEN, _encode_topk(topk))
        message.message_field(K1_LEN, seq)
    if resp.prompt_logprobs is not None:
        # WIRE.md §13.6: a missing prompt logprob travels as NaN.
        values = [math.nan if value is None else value for value in resp.prompt_logprobs]
        message.array_field(K2_LEN, np.asarray(values, dtype=F32))
    if resp.topk_prompt_logprobs is not None:
        message.message_field(K3_LEN, _encode_topk(resp.topk_prompt_logprobs))
    return message


def _pack_int32s(values: Sequence[int], where: str) -> bytes:
    try:
        return struct.pack(f"<{len(values)}i", *values)
    except struct.error as exc:
        raise WireFormatError(f"protobuf: {where} holds a value outside int32") from exc


def _encode_topk(rows: Sequence[Sequence[tuple[int, float]] | None]) -> Writer:
    k = max((len(row) for row in rows if row), default=0)
    length = len(rows)
    token_ids = np.full((length, k), TOPK_MASK_TOKEN, dtype=I32)
    logprobs = np.full((length, k), TOPK_MASK_LOGPROB, dtype=F32)
    for i, row in enumerate(rows):
        try:
            for j, (token, logprob) in enumerate(row or ()):
                token_ids[i, j] = token
                logprobs[i, j] = logprob
        except (OverflowError, TypeError, ValueError) as exc:
            raise WireFormatError(
                f"protobuf: topk_prompt_logprobs[{i}] needs (int32 token, float) pairs: {exc}"
            ) from exc
    topk = Writer()
    if token_ids.size:
        topk.array_field(K1_LEN, token_ids)
        topk.array_field(K2_LEN, logprobs)
    if k:
        topk.varint_field(K3_VARINT, k)
    if length:
        topk.varint_field(K4_VARINT, length)
    return topk


def peek_model_and_seq(body: bytes) -> tuple[str, int] | None:
    """``(model_id, seq_id)`` of a ForwardBackwardRequest body, or None when unreadable.

    Used for a request refused before it was queued: its seq_id must still be consumed.
    """
    model_id: str | None = None
    seq_id = 0
    try:
        for field, wire_type, a, b in iter_fields(body, 0, len(body)):
            if field == 1 and wire_type == WT_LEN:
                model_id = read_string(body, a, b, "ForwardBackwardRequest.model_id")
            elif field == 2 and wire_type == WT_VARINT:
                seq_id = as_int32(a)
    except WireFormatError:
        return None
    return (model_id, seq_id) if model_id else None
