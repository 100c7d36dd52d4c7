"""The local server's protobuf codecs: requests it reads and results it writes
(docs/protocol.rst §3.4).

The mirror of the client codecs in :mod:`tinker_lite._codec.proto`, built on the shared primitives
of :mod:`tinker_lite._codec.protowire`: :func:`decode_forward_backward_request` (the request's
messages declared as field tables for the shared reader), :func:`encode_forward_backward_output`,
:func:`encode_sample_response`. Decoders raise :class:`~tinker_lite._errors.WireFormatError` for
malformed bytes and skip unknown fields."""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    LIST,
    STOP_REASON_LENGTH,
    TENSOR,
    TOPK_MASK_LOGPROB,
    TOPK_MASK_TOKEN,
    WT_I64,
    WT_LEN,
    WT_VARINT,
    Field,
    FieldError,
    Message,
    Writer,
    decode,
    map_field,
    read_array,
    read_bool,
    read_bytes,
    read_double,
    read_int32,
    read_message,
    read_string,
    read_view,
)
from tinker_lite._errors import WireFormatError

if TYPE_CHECKING:
    from tinker_lite.local.service.sampling import SampleOutcome

__all__ = [
    "ProtoForwardBackwardRequest",
    "decode_forward_backward_request",
    "encode_forward_backward_output",
    "encode_sample_outcome",
    "encode_sample_response",
    "peek_model_and_seq",
    "sample_outcome_json",
]

# ---------------------------------------------------------------------------------------------
# ForwardBackwardRequest (client encodes, server decodes): the tables of its messages
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


ENCODED_TEXT_CHUNK = Message(
    "EncodedTextChunk",
    {1: Field("tokens", WT_LEN, read_view)},
    lambda values: types.EncodedTextChunk(
        tokens=read_array(values.get("tokens", b""), I32, "tokens")
    ),
)

IMAGE_CHUNK = Message(
    "ImageChunk",
    {
        1: Field("data", WT_LEN, read_bytes),
        2: Field("format", WT_LEN, read_string),
        3: Field("expected_tokens", WT_VARINT, read_int32),
    },
    lambda values: types.ImageChunk(
        data=values.get("data", b""),
        format=values.get("format", ""),
        expected_tokens=values.get("expected_tokens"),
    ),
)


def _dmel_chunk(values: dict[str, Any]) -> types.DmelChunk:
    chunk = types.DmelChunk(dmel=values.get("dmel", b""))
    chunk.length  # noqa: B018 - a malformed header is refused here, as the client refuses it
    return chunk


DMEL_CHUNK = Message("DmelChunk", {1: Field("dmel", WT_LEN, read_bytes)}, _dmel_chunk)


def _chunk(values: dict[str, Any]) -> types.ModelInputChunk:
    _, chunk = values.get("chunk", (None, None))
    if chunk is None:
        raise FieldError("chunk has no content")
    result: types.ModelInputChunk = chunk
    return result


CHUNK = Message(
    "Chunk",
    {
        1: Field("encoded_text", WT_LEN, ENCODED_TEXT_CHUNK.read, oneof="chunk"),
        2: Field("image", WT_LEN, IMAGE_CHUNK.read, oneof="chunk"),
        3: Field("dmel", WT_LEN, DMEL_CHUNK.read, oneof="chunk"),
    },
    _chunk,
)

# Values of the map entries (map<string, Tensor>, map<string, double>).
_TENSOR_VALUE = Field("value", WT_LEN, TENSOR.read)
_NUMBER_VALUE = Field("value", WT_I64, read_double)

DATUM = Message(
    "Datum",
    {
        1: Field("model_input", WT_LEN, CHUNK.read, LIST),
        2: map_field("loss_fn_inputs", _TENSOR_VALUE),
    },
    lambda values: types.Datum(
        model_input=types.ModelInput(chunks=values.get("model_input", [])),
        loss_fn_inputs=values.get("loss_fn_inputs", {}),
    ),
)

LOSS_CONFIG_VALUE = Message(
    "LossConfigValue",
    {
        1: Field("number", WT_I64, read_double, oneof="value"),
        2: Field("text", WT_LEN, read_string, oneof="value"),
    },
    lambda values: values.get("value", ("number", 0.0))[1],
)


def _forward_backward_request(values: dict[str, Any]) -> ProtoForwardBackwardRequest:
    config: dict[str, float | str] | None = None
    if "loss_fn_config" in values or "loss_fn_config_v2" in values:
        config = {**values.get("loss_fn_config", {}), **values.get("loss_fn_config_v2", {})}
    return ProtoForwardBackwardRequest(
        model_id=values.get("model_id", ""),
        seq_id=values.get("seq_id", 0),
        data=values.get("data", []),
        loss_fn=values.get("loss_fn", ""),
        loss_fn_config=config,
        forward_only=values.get("forward_only", False),
    )


_MODEL_ID = Field("model_id", WT_LEN, read_string)
_SEQ_ID = Field("seq_id", WT_VARINT, read_int32)

FORWARD_BACKWARD_REQUEST = Message(
    "ForwardBackwardRequest",
    {
        1: _MODEL_ID,
        2: _SEQ_ID,
        3: Field("data", WT_LEN, DATUM.read, LIST),
        4: Field("loss_fn", WT_LEN, read_string),
        5: map_field("loss_fn_config", _NUMBER_VALUE, 0.0),
        6: Field("forward_only", WT_VARINT, read_bool),
        7: map_field("loss_fn_config_v2", Field("value", WT_LEN, LOSS_CONFIG_VALUE.read)),
    },
    _forward_backward_request,
)


def decode_forward_backward_request(
    body: bytes | bytearray | memoryview,
) -> ProtoForwardBackwardRequest:
    """Decode a ``ForwardBackwardRequest`` body (sparse CSR tensors become dense)."""
    request: ProtoForwardBackwardRequest = decode(body, FORWARD_BACKWARD_REQUEST)
    return request


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


def sample_outcome_json(outcome: SampleOutcome) -> dict[str, Any]:
    """The JSON answer of a sample: the response model's keys plus the 0.38 ones."""
    body: dict[str, Any] = _wire.to_builtins(outcome.response)
    for index, sequence in enumerate(body["sequences"]):
        sequence["sequence_id"] = outcome.sequence_ids[index]
        topk = outcome.sequence_topk[index]
        if topk is not None:
            sequence["topk_logprobs"] = [
                None if row is None else [[t, lp] for t, lp in row] for row in topk
            ]
    body["prompt_cache_hit_tokens"] = outcome.prompt_cache_hit_tokens
    if outcome.target_prompt_logprobs is not None:
        body["target_prompt_logprobs"] = _tensor_json(outcome.target_prompt_logprobs, "float32")
    if outcome.alt_tokens is not None and outcome.alt_logprobs is not None:
        body["prompt_alt_tokens"] = {
            "tokens": _tensor_json(outcome.alt_tokens, "int64"),
            "logprobs": _tensor_json(outcome.alt_logprobs, "float32"),
        }
    return body


def _tensor_json(array: npt.NDArray[Any], dtype: str) -> dict[str, Any]:
    return {"data": array.reshape(-1).tolist(), "dtype": dtype, "shape": list(array.shape)}


def _encode_tensor(array: npt.NDArray[Any], code: int) -> Writer:
    """A dense ``Tensor`` message (docs/protocol.rst §3.4): bytes, dtype, packed shape."""
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
        # docs/protocol.rst §3.4: a missing prompt logprob travels as NaN.
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
                if isinstance(token, int) and not -(2**31) <= token < 2**31:  # numpy < 2 wraps
                    raise OverflowError(f"Python integer {token} out of bounds for int32")
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
    try:
        head = read_message(body, 0, len(body), _REQUEST_HEAD)
    except WireFormatError:
        return None
    model_id = head.get("model_id")
    return (model_id, head.get("seq_id", 0)) if model_id else None


# The fields of a ForwardBackwardRequest that say where it goes; the rest is left unread.
_REQUEST_HEAD = Message("ForwardBackwardRequest", {1: _MODEL_ID, 2: _SEQ_ID})
