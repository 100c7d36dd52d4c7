"""Client protobuf codecs: the forward/forward_backward request and the results it reads back
(docs/protocol.rst §3.4; docs/architecture.rst, "The codec")."""

from __future__ import annotations

import functools
import itertools
import math
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from tinker_lite import types
from tinker_lite._codec import protowire as _protowire
from tinker_lite._codec.protowire import (
    BOOL_TRUE,
    CODE_F32,
    CODE_I32,
    DTYPE_FLOAT32,
    DTYPE_INT64,
    DTYPE_UNSPECIFIED,
    INT32_MAX,
    INT32_MIN,
    K1_I64,
    K1_LEN,
    K2_I64,
    K2_LEN,
    K2_VARINT,
    K3_LEN,
    K3_VARINT,
    K4_LEN,
    K5_LEN,
    K6_VARINT,
    K7_LEN,
    LIST,
    LITTLE_ENDIAN,
    PACKED,
    SMALL_VARINTS,
    STOP_REASON_LENGTH,
    STOP_REASON_STOP,
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
    encode_varint,
    map_field,
    owned,
    read_array,
    read_bytes,
    read_double,
    read_int32,
    read_int64,
    read_list,
    read_packed_int64s,
    read_string,
    read_uint32,
    read_values,
    read_view,
    tensor_dtype,
    widen,
)
from tinker_lite._codec.zstd import compress, zstd_available
from tinker_lite._errors import InvalidInputError

__all__ = [
    "compress",
    "decode_forward_backward_output",
    "decode_sample_response",
    "encode_forward_backward_request",
    "zstd_available",
]

# An ArrayRecord without fields still stands for num_datums (empty) outputs; bound it likewise.
_MAX_EMPTY_RECORD_DATUMS: Final = 1 << 16

# docs/protocol.rst §3.4: the stdlib typecode and dtype code of each TensorData dtype on the wire.
_TENSOR_CODES: Final = {"float32": ("f", DTYPE_FLOAT32), "int64": ("q", DTYPE_INT64)}


def encode_forward_backward_request(
    *,
    model_id: str,
    seq_id: int,
    data: Sequence[types.Datum],
    loss_fn: str,
    loss_fn_config: Mapping[str, float | str] | None,
    forward_only: bool,
) -> bytes:
    """The protobuf body of a forward (``forward_only``) or forward_backward request; what
    protobuf cannot carry (docs/protocol.rst §3.4) is an InvalidInputError."""
    out = Writer()
    if model_id:
        out.string_field(K1_LEN, model_id)
    if seq_id:
        if not INT32_MIN <= seq_id <= INT32_MAX:
            raise InvalidInputError("seq_id", f"{seq_id} does not fit in int32")
        out.varint_field(K2_VARINT, seq_id)
    for index, datum in enumerate(data):
        _encode_datum(out, datum, index)
    if loss_fn:
        out.string_field(K4_LEN, loss_fn)
    config_v2 = Writer()
    if loss_fn_config:
        # docs/protocol.rst §3.4: numbers go to loss_fn_config (double) and loss_fn_config_v2
        # (number); strings only to loss_fn_config_v2 (text). Entries in insertion order. A value
        # can be a numpy number only once numpy is loaded.
        np = sys.modules.get("numpy")
        numbers = (int, float) if np is None else (int, float, np.integer, np.floating)
        for name, given in loss_fn_config.items():
            value: object = given
            if not isinstance(name, str):
                raise InvalidInputError("loss_fn_config", f"keys must be strings, got {name!r}")
            entry_value = Writer()
            if isinstance(value, str):
                entry_value.string_field(K2_LEN, value)
            elif isinstance(value, numbers) and not isinstance(value, bool):
                number = float(cast("float", value))
                entry = Writer()
                entry.string_field(K1_LEN, name)
                entry.double_field(K2_I64, number)
                out.message_field(K5_LEN, entry)
                entry_value.double_field(K1_I64, number)
            else:
                raise InvalidInputError(
                    f"loss_fn_config[{name!r}]",
                    f"must be a number or a string, got {type(value).__name__}",
                )
            entry = Writer()
            entry.string_field(K1_LEN, name)
            entry.message_field(K2_LEN, entry_value)
            config_v2.message_field(K7_LEN, entry)
    if forward_only:
        out.raw(K6_VARINT + BOOL_TRUE)
    out.extend(config_v2)
    return out.getvalue()


def _encode_datum(out: Writer, datum: types.Datum, index: int) -> None:
    # The hot path of a large request: each text chunk and each tensor becomes one header piece
    # (all its nested keys and length prefixes) plus its array, sizes computed up front; the
    # datum's own key and length go in front once its size is known.
    parts = out.parts
    at = len(parts)
    parts.append(b"")
    size = 0
    for position, chunk in enumerate(datum.model_input.chunks):
        if isinstance(chunk, types.EncodedTextChunk):
            ids = chunk._current_ids()
            packed: bytes | memoryview
            # Ids were checked when the chunk was made: their int32 bytes go out without a copy.
            if isinstance(ids, array) and LITTLE_ENDIAN:
                packed = memoryview(ids).cast("B")
            elif ids is not None and not isinstance(ids, array) and ids.dtype == _protowire.I32:
                packed = ids.data.cast("B")
            else:
                tokens = chunk.tokens
                packed = _pack_tokens(tokens, index, position) if tokens else b""
            count = len(packed)
            head = _text_chunk_head(count)
            parts.append(head)
            parts.append(packed)
            size += len(head) + count
        elif isinstance(chunk, (types.ImageChunk, types.DmelChunk)):
            chunk_message = _encode_media(chunk, f"data[{index}].model_input.chunks[{position}]")
            head = K1_LEN + encode_varint(chunk_message.size)
            parts.append(head)
            parts.extend(chunk_message.parts)
            size += len(head) + chunk_message.size
        elif isinstance(chunk, types.ImageAssetPointerChunk):
            raise InvalidInputError(
                f"data[{index}].model_input.chunks[{position}]",
                "an ImageAssetPointerChunk cannot be sent as protobuf",
                "pass the image bytes in an ImageChunk, or use wire='json'",
            )
        else:
            raise InvalidInputError(
                f"data[{index}].model_input.chunks[{position}]",
                f"unsupported chunk type {type(chunk).__name__}",
            )
    for name, tensor in datum.loss_fn_inputs.items():
        if tensor.sparse_crow_indices is not None:
            entry = _sparse_tensor_entry(name, tensor, index)
            parts.append(entry)
            size += len(entry)
            continue
        shape = tuple(tensor.shape or ())
        # A tensor's values never change: its wire pieces are kept with it, for the same key.
        memo = getattr(tensor, "_memo_wire", None)
        if memo is None or memo[0] != name or memo[1] != shape:
            view, code = _tensor_bytes(tensor, index, name)
            head, tail = _tensor_entry_frame(name, len(view), code, shape)
            memo = (name, shape, head, view, tail, len(head) + len(view) + len(tail))
            object.__setattr__(tensor, "_memo_wire", memo)
        parts += memo[2:5]
        size += memo[5]
    head = K3_LEN + encode_varint(size)
    parts[at] = head
    out.size += len(head) + size


# Requests repeat the same few sizes and keys, so the bytes around each array are remembered.


@functools.lru_cache(maxsize=1024)
def _text_chunk_head(count: int) -> bytes:
    """Return the bytes before ``count`` bytes of int32 token ids in a Datum."""
    # Datum.model_input -> Chunk.encoded_text -> EncodedTextChunk.tokens
    text_head = K1_LEN + encode_varint(count) if count else b""
    text_size = len(text_head) + count
    chunk_head = K1_LEN + encode_varint(text_size)
    chunk_size = len(chunk_head) + text_size
    return K1_LEN + encode_varint(chunk_size) + chunk_head + text_head


@functools.lru_cache(maxsize=1024)
def _tensor_entry_frame(
    name: str, count: int, code: int, shape: tuple[int, ...]
) -> tuple[bytes, bytes]:
    """Return the bytes before and after a tensor's ``count`` data bytes in a Datum."""
    # Datum.loss_fn_inputs entry {key, value: Tensor {dense, dtype, shape}}
    dense_head = K1_LEN + encode_varint(count)
    tail = K3_VARINT + SMALL_VARINTS[code]
    if shape:
        packed_shape = b"".join([encode_varint(dim) for dim in shape])
        tail += K4_LEN + encode_varint(len(packed_shape)) + packed_shape
    tensor_size = len(dense_head) + count + len(tail)
    name_bytes = name.encode("utf-8")
    key_and_value_head = (
        K1_LEN + encode_varint(len(name_bytes)) + name_bytes + K2_LEN + encode_varint(tensor_size)
    )
    entry_size = len(key_and_value_head) + tensor_size
    return K2_LEN + encode_varint(entry_size) + key_and_value_head + dense_head, tail


def _sparse_tensor_entry(name: str, tensor: types.TensorData, index: int) -> bytes:
    """A Datum.loss_fn_inputs entry holding a sparse CSR tensor as 0.38 sends it (golden-0.38):
    Tensor {sparse_csr {values, crow_indices, col_indices (int64 LE)}, dtype, shape}."""
    import numpy as np

    typecode, code = _wire_dtype(tensor, index, name)
    dtype = np.dtype("<f4" if typecode == "f" else "<i8")
    csr = Writer()
    csr.array_field(K1_LEN, np.ascontiguousarray(tensor.data, dtype=dtype))
    csr.array_field(K2_LEN, np.ascontiguousarray(tensor.sparse_crow_indices, dtype="<i8"))
    csr.array_field(K3_LEN, np.ascontiguousarray(tensor.sparse_col_indices, dtype="<i8"))
    message = Writer()
    message.message_field(K2_LEN, csr)
    message.varint_field(K3_VARINT, code)
    if tensor.shape:
        message.packed_varints_field(K4_LEN, tensor.shape)
    entry = Writer()
    entry.string_field(K1_LEN, name)
    entry.message_field(K2_LEN, message)
    frame = Writer()
    frame.message_field(K2_LEN, entry)
    return frame.getvalue()


def _wire_dtype(tensor: types.TensorData, index: int, name: str) -> tuple[str, int]:
    # docs/protocol.rst §3.4: float tensors as float32 LE (DTYPE_FLOAT32), int tensors as int64 LE.
    known = _TENSOR_CODES.get(tensor.dtype)
    if known is None:
        raise InvalidInputError(
            f"data[{index}].loss_fn_inputs[{name!r}].dtype",
            f"must be int64 or float32, got {tensor.dtype!r}",
        )
    return known


def _tensor_bytes(tensor: types.TensorData, index: int, name: str) -> tuple[memoryview, int]:
    typecode, code = _wire_dtype(tensor, index, name)
    values = tensor._values  # dense: a sparse tensor is written by _sparse_tensor_entry
    if type(values) is array:
        if values.typecode == typecode and LITTLE_ENDIAN:
            return memoryview(values).cast("B"), code  # values built from lists: no numpy
        values = tensor._dense_flat()
    dtype = _protowire.F32 if typecode == "f" else _protowire.I64
    if values.dtype == dtype and values.flags.c_contiguous:
        return values.data.cast("B"), code  # the usual case: no copy, no conversion
    import numpy as np

    return np.ascontiguousarray(values, dtype=dtype).reshape(-1).data.cast("B"), code


def _pack_tokens(tokens: Sequence[int], index: int, position: int) -> bytes:
    # docs/protocol.rst §3.4: token ids are int32 little-endian.
    try:
        return struct.pack(f"<{len(tokens)}i", *tokens)
    except struct.error:
        bad = next(
            (t for t in tokens if not isinstance(t, int) or not INT32_MIN <= t <= INT32_MAX),
            None,
        )
        raise InvalidInputError(
            f"data[{index}].model_input.chunks[{position}].tokens",
            f"token {bad!r} does not fit in int32",
            "token ids are int32 vocabulary indices",
        ) from None


def _encode_media(chunk: types.ImageChunk | types.DmelChunk, where: str) -> Writer:
    """A Chunk message holding an image (field 2) or audio (field 3: DmelChunk {dmel})."""
    message = Writer()
    if isinstance(chunk, types.ImageChunk):
        message.message_field(K2_LEN, _encode_image(chunk, where))
    else:
        # request_conv (0.38): the TensorContainer bytes are copied through as they are.
        dmel = Writer()
        if chunk.dmel:
            dmel.bytes_field(K1_LEN, chunk.dmel)
        message.message_field(K3_LEN, dmel)
    return message


def _encode_image(chunk: types.ImageChunk, where: str) -> Writer:
    # docs/protocol.rst §3.4 / golden-0.38: an image chunk is image {data, format, expected_tokens}.
    image = Writer()
    if chunk.data:
        image.bytes_field(K1_LEN, chunk.data)
    if chunk.format:
        image.string_field(K2_LEN, chunk.format)
    if chunk.expected_tokens is not None:
        if not INT32_MIN <= chunk.expected_tokens <= INT32_MAX:
            raise InvalidInputError(f"{where}.expected_tokens", "does not fit in int32")
        image.varint_field(K3_VARINT, chunk.expected_tokens)
    return image


# ---------------------------------------------------------------------------------------------
# Results (docs/protocol.rst §3.4): the tables of the messages a client reads
# ---------------------------------------------------------------------------------------------


def _split_batched(values: dict[str, Any]) -> list[types.TensorData]:
    """A BatchedTensor: the datums' values in one array, cut at int64 byte offsets."""
    code = values.get("dtype", DTYPE_UNSPECIFIED)
    trailing: list[int] = values.get("trailing_shape", [])
    wire_dtype, dtype_name = tensor_dtype(code)
    itemsize = wire_dtype.itemsize
    data = values.get("data", b"")
    flat = read_array(data, wire_dtype, "data")
    offsets = read_array(values.get("offsets", b""), _protowire.I64, "offsets").tolist()
    if any(dim < 0 for dim in trailing):
        raise FieldError(f"trailing_shape {trailing} is negative")
    if not offsets:
        if flat.size:
            raise FieldError("has data but no offsets")
        return []
    # docs/protocol.rst §3.4: offsets are int64 byte offsets into data, one per datum plus the end.
    if (
        offsets[0] < 0
        or offsets[-1] > len(data)
        or offsets != sorted(offsets)
        or any(offset % itemsize for offset in offsets)
    ):
        raise FieldError("offsets are out of range or not aligned")
    bounds = [offset // itemsize for offset in offsets]
    sizes = [end - start for start, end in itertools.pairwise(bounds)]
    per_row = math.prod(trailing)
    for size in set(sizes):
        if (size % per_row) if per_row else size:
            i = sizes.index(size)
            if not per_row:
                raise FieldError("values with an empty trailing shape")
            raise FieldError(
                f"datum {i} has {size} values, not a multiple of trailing shape {trailing}"
            )
    # One copy for all datums, aligned and independent of the body they were read from.
    widened = owned(widen(flat, code))
    if len(set(sizes)) == 1:  # the usual case: equal datums are the rows of one matrix
        segments = list(widened[bounds[0] : bounds[-1]].reshape(len(sizes), sizes[0]))
    else:
        segments = [widened[start:end] for start, end in itertools.pairwise(bounds)]
    trusted = types.TensorData._trusted
    return [
        trusted(segment, dtype_name, [size // per_row if per_row else 0, *trailing])
        for segment, size in zip(segments, sizes, strict=True)
    ]


BATCHED_TENSOR: Final = Message(
    "BatchedTensor",
    {
        1: Field("data", WT_LEN, read_view),
        2: Field("offsets", WT_LEN, read_view),
        3: Field("dtype", WT_VARINT, read_int32),
        4: Field("trailing_shape", WT_LEN, read_packed_int64s, PACKED),
    },
    _split_batched,
)


def _record_outputs(values: dict[str, Any]) -> list[dict[str, types.TensorData]]:
    """An ArrayRecord: its columns (one tensor per datum) turned into per-datum outputs."""
    columns: dict[str, list[types.TensorData]] = values.get("fields", {})
    num_datums: int = values.get("num_datums", 0)
    sizes = {len(column) for column in columns.values()}
    if len(sizes) > 1 or (sizes and num_datums and sizes != {num_datums}):
        raise FieldError(f"fields hold {sorted(sizes)} datums, num_datums is {num_datums}")
    count = sizes.pop() if sizes else num_datums
    if count < 0 or (not columns and count > _MAX_EMPTY_RECORD_DATUMS):
        raise FieldError(f"num_datums {num_datums} is invalid")
    if len(columns) == 1:  # the usual case (logprobs alone) without a dict comprehension per datum
        ((name, column),) = columns.items()
        return [{name: tensor} for tensor in column]
    return [{name: column[i] for name, column in columns.items()} for i in range(count)]


ARRAY_RECORD: Final = Message(
    "ArrayRecord",
    {
        1: Field("type_tag", WT_LEN, read_bytes),  # not used: only its wire type is checked
        2: map_field("fields", Field("value", WT_LEN, BATCHED_TENSOR.read)),
        3: Field("num_datums", WT_VARINT, read_int64),
    },
    _record_outputs,
)


def _forward_backward_output(values: dict[str, Any]) -> types.ForwardBackwardOutput:
    # docs/protocol.rst §3.4: the output type is reduced to the part after the last ':'.
    records: list[list[dict[str, types.TensorData]]] = values.get("loss_fn_outputs", [])
    return types.ForwardBackwardOutput(
        loss_fn_output_type=values.get("loss_fn_output_type", "").rsplit(":", 1)[-1],
        loss_fn_outputs=[outputs for record in records for outputs in record],
        metrics=values.get("metrics", {}),
    )


FORWARD_BACKWARD_OUTPUT: Final = Message(
    "ForwardBackwardOutput",
    {
        1: Field("loss_fn_output_type", WT_LEN, read_string),
        2: Field("loss_fn_outputs", WT_LEN, ARRAY_RECORD.read, LIST),
        3: map_field("metrics", Field("value", WT_I64, read_double), 0.0),
    },
    _forward_backward_output,
)


def decode_forward_backward_output(
    body: bytes | bytearray | memoryview,
) -> types.ForwardBackwardOutput:
    """Decode a ``ForwardBackwardOutput`` body into per-datum TensorData and metrics."""
    return cast("types.ForwardBackwardOutput", decode(body, FORWARD_BACKWARD_OUTPUT))


def _topk_rows(values: dict[str, Any]) -> list[list[tuple[int, float]] | None]:
    """TopkLogprobs: ``length`` rows of ``k`` (token id, logprob) cells, padding dropped."""
    k: int = values.get("k", 0)
    length: int = values.get("length", 0)
    token_ids = read_values(values.get("token_ids", b""), CODE_I32, "token_ids").tolist()
    logprobs = read_values(values.get("logprobs", b""), CODE_F32, "logprobs").tolist()
    if len(token_ids) != k * length or len(logprobs) != k * length:
        raise FieldError(
            f"{len(token_ids)} token ids and {len(logprobs)} logprobs for length {length} x k {k}"
        )
    if k == 0:
        return [None] * length
    rows: list[list[tuple[int, float]] | None] = []
    for start in range(0, k * length, k):
        # docs/protocol.rst §3.4: cells padded with (token 0, logprob -99999.0) are empty.
        cells = [
            (token, logprob)
            for token, logprob in zip(
                token_ids[start : start + k], logprobs[start : start + k], strict=True
            )
            if token != TOPK_MASK_TOKEN or logprob != TOPK_MASK_LOGPROB
        ]
        rows.append(cells or None)
    return rows


TOPK_LOGPROBS: Final = Message(
    "TopkLogprobs",
    {
        1: Field("token_ids", WT_LEN, read_view),
        2: Field("logprobs", WT_LEN, read_view),
        3: Field("k", WT_VARINT, read_uint32),
        4: Field("length", WT_VARINT, read_uint32),
    },
    _topk_rows,
)


def _sampled_sequence(values: dict[str, Any]) -> types.SampledSequence:
    reason = values.get("stop_reason", STOP_REASON_STOP)
    if reason == STOP_REASON_STOP:
        stop_reason = types.StopReason.STOP
    elif reason == STOP_REASON_LENGTH:
        stop_reason = types.StopReason.LENGTH
    else:
        # A reason newer than this release: kept (StopReason tolerates unknown values).
        stop_reason = types.StopReason(f"stop_reason_{reason}")
    return types.SampledSequence(
        stop_reason=stop_reason,
        tokens=values.get("tokens", []),
        logprobs=values.get("logprobs"),
        topk_logprobs=values.get("topk_sampled_logprobs"),
    )


def _int32_list(buf: bytes, a: int, b: int) -> list[int]:
    return read_list(buf, a, b, CODE_I32)


def _float32_list(buf: bytes, a: int, b: int) -> list[float]:
    return read_list(buf, a, b, CODE_F32)


def _prompt_logprobs(buf: bytes, a: int, b: int) -> list[float | None]:
    # docs/protocol.rst §3.4: a prompt position without a logprob travels as NaN.
    return [None if math.isnan(value) else value for value in _float32_list(buf, a, b)]


SAMPLED_SEQUENCE: Final = Message(
    "SampledSequence",
    {
        1: Field("stop_reason", WT_VARINT, read_int32),
        2: Field("tokens", WT_LEN, _int32_list),
        3: Field("logprobs", WT_LEN, _float32_list),
        4: Field("topk_sampled_logprobs", WT_LEN, TOPK_LOGPROBS.read),
    },
    _sampled_sequence,
)


def _prompt_alt_tokens(values: dict[str, Any]) -> types.PromptAltTokens:
    if "tokens" not in values or "logprobs" not in values:
        raise FieldError("needs both tokens and logprobs")
    return types.PromptAltTokens(tokens=values["tokens"], logprobs=values["logprobs"])


PROMPT_ALT_TOKENS: Final = Message(
    "PromptAltTokens",
    {1: Field("tokens", WT_LEN, TENSOR.read), 2: Field("logprobs", WT_LEN, TENSOR.read)},
    _prompt_alt_tokens,
)


def _sample_response(values: dict[str, Any]) -> types.SampleResponse:
    return types.SampleResponse(
        sequences=values.get("sequences", []),
        prompt_logprobs=values.get("prompt_logprobs"),
        topk_prompt_logprobs=values.get("topk_prompt_logprobs"),
        target_prompt_logprobs=values.get("target_prompt_logprobs"),
        prompt_cache_hit_tokens=values.get("prompt_cache_hit_tokens", 0),
        prompt_alt_tokens=values.get("prompt_alt_tokens"),
    )


SAMPLE_RESPONSE: Final = Message(
    "SampleResponse",
    {
        1: Field("sequences", WT_LEN, SAMPLED_SEQUENCE.read, LIST),
        2: Field("prompt_logprobs", WT_LEN, _prompt_logprobs),
        3: Field("topk_prompt_logprobs", WT_LEN, TOPK_LOGPROBS.read),
        4: Field("prompt_cache_hit_tokens", WT_VARINT, read_int32),
        5: Field("target_prompt_logprobs", WT_LEN, TENSOR.read),
        6: Field("prompt_alt_tokens", WT_LEN, PROMPT_ALT_TOKENS.read),
    },
    _sample_response,
)


def decode_sample_response(body: bytes | bytearray | memoryview) -> types.SampleResponse:
    """Decode a ``SampleResponse`` body (NaN prompt logprobs and top-k padding become None)."""
    return cast("types.SampleResponse", decode(body, SAMPLE_RESPONSE))
