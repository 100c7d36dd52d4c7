"""Client protobuf codecs: the forward/forward_backward request, and the results it reads back.

The service's ``tinker_public`` schema (WIRE.md §13.7) is written and read by hand, so no protobuf
runtime is needed. Numeric arrays travel as little-endian bytes inside ``bytes`` fields; they are
copied in and out in one piece (numpy arrays, or the stdlib arrays of values built from lists),
never element by element, so a 500,000-number request encodes in a few milliseconds. Sampling
results and list-built requests are read and written without importing numpy. The wire
primitives live in :mod:`tinker_lite._codec.protowire`; the local server's codecs (the other
direction) live in ``tinker_lite.local._codecs``. Every decoder raises
:class:`~tinker_lite._errors.WireFormatError` for malformed bytes and skips fields it does not
know (a newer service may add some).
"""

from __future__ import annotations

import functools
import math
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import Final, cast

from tinker_lite import types
from tinker_lite._codec import protowire as _protowire
from tinker_lite._codec.protowire import (
    BOOL_TRUE,
    CODE_F32,
    CODE_I32,
    CONTENT_TYPE,
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
    SMALL_VARINTS,
    STOP_REASON_LENGTH,
    STOP_REASON_STOP,
    TOPK_MASK_LOGPROB,
    TOPK_MASK_TOKEN,
    WT_LEN,
    WT_VARINT,
    Writer,
    as_bytes,
    as_int32,
    as_int64,
    as_uint32,
    compress,
    decode_tensor,
    decompress,
    encode_varint,
    expect_wire_type,
    iter_fields,
    owned,
    read_array,
    read_double_entry,
    read_entry,
    read_int64s,
    read_string,
    read_values,
    tensor_dtype,
    widen,
    zstd_available,
)
from tinker_lite._errors import InvalidInputError, WireFormatError

__all__ = [
    "CONTENT_TYPE",
    "compress",
    "decode_forward_backward_output",
    "decode_sample_response",
    "decompress",
    "encode_forward_backward_request",
    "zstd_available",
]

# An ArrayRecord without fields still stands for num_datums (empty) outputs; bound it likewise.
_MAX_EMPTY_RECORD_DATUMS: Final = 1 << 16

# A stdlib array's bytes are the wire's little-endian bytes only on a little-endian host.
_LITTLE_ENDIAN: Final = sys.byteorder == "little"

# WIRE.md §13.7: the stdlib typecode and dtype code of each TensorData dtype on the wire.
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
    """Return the protobuf body of a forward (``forward_only``) or forward_backward request.

    Map entries (``loss_fn_inputs``, both config maps) are written in insertion order. An
    ImageChunk is sent as ``{data, format, expected_tokens}``: the schema has no place for the
    0.4.1 fields ``height``, ``width`` and ``tokens``. Raises InvalidInputError for what
    protobuf cannot carry: an ImageAssetPointerChunk, a token or ``seq_id`` outside int32, a
    config value that is neither a number nor a string.
    """
    out = Writer()
    if model_id:
        out.string_field(K1_LEN, model_id)
    if seq_id:
        if not INT32_MIN <= seq_id <= INT32_MAX:
            raise InvalidInputError("seq_id", f"{seq_id} does not fit in int32")
        out.varint_field(K2_VARINT, seq_id)
    for index, datum in enumerate(data):
        out.message_field(K3_LEN, _encode_datum(datum, index))
    if loss_fn:
        out.string_field(K4_LEN, loss_fn)
    config_v2 = Writer()
    if loss_fn_config:
        # WIRE.md §13.7: numbers go to loss_fn_config (double) and loss_fn_config_v2 (number);
        # strings only to loss_fn_config_v2 (text). Entries in insertion order.
        for name, given in loss_fn_config.items():
            value: object = given
            if not isinstance(name, str):
                raise InvalidInputError("loss_fn_config", f"keys must be strings, got {name!r}")
            entry_value = Writer()
            if isinstance(value, str):
                entry_value.string_field(K2_LEN, value)
            elif isinstance(value, (int, float, *_numpy_numbers())) and not isinstance(value, bool):
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


def _encode_datum(datum: types.Datum, index: int) -> Writer:
    # The hot path of a large request: each text chunk and each tensor becomes one header piece
    # (all its nested keys and length prefixes) plus its array, sizes computed up front.
    out = Writer()
    parts = out.parts
    size = 0
    for position, chunk in enumerate(datum.model_input.chunks):
        if isinstance(chunk, types.EncodedTextChunk):
            ids = chunk._current_ids()
            packed: bytes | memoryview
            # Ids were checked when the chunk was made: their int32 bytes go out without a copy.
            if ids is None:
                tokens = chunk.tokens
                packed = _pack_tokens(tokens, index, position) if tokens else b""
            elif isinstance(ids, array):
                packed = (
                    memoryview(ids).cast("B")
                    if _LITTLE_ENDIAN
                    else _pack_tokens(ids, index, position)
                )
            elif ids.dtype == _protowire.I32:
                packed = ids.data.cast("B")
            else:
                tokens = chunk.tokens
                packed = _pack_tokens(tokens, index, position) if tokens else b""
            count = len(packed)
            head = _text_chunk_head(count)
            parts.append(head)
            parts.append(packed)
            size += len(head) + count
        elif isinstance(chunk, types.ImageChunk):
            where = f"data[{index}].model_input.chunks[{position}]"
            chunk_message = Writer()
            chunk_message.message_field(K2_LEN, _encode_image(chunk, where))
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
        if tensor.is_sparse:
            entry = _sparse_tensor_entry(name, tensor, index)
            parts.append(entry)
            size += len(entry)
            continue
        view, code = _tensor_bytes(tensor, index, name)
        count = len(view)
        shape = tensor.shape
        head, tail = _tensor_entry_frame(name, count, code, tuple(shape) if shape else ())
        parts.append(head)
        parts.append(view)
        parts.append(tail)
        size += len(head) + count + len(tail)
    out.size = size
    return out


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


def _numpy_numbers() -> tuple[type, ...]:
    """numpy's integer and floating types when numpy is loaded (else no value is one)."""
    np = sys.modules.get("numpy")
    return () if np is None else (np.integer, np.floating)


def _wire_dtype(tensor: types.TensorData, index: int, name: str) -> tuple[str, int]:
    # WIRE.md §13.7: float tensors as float32 LE (DTYPE_FLOAT32), int tensors as int64 LE.
    known = _TENSOR_CODES.get(tensor.dtype)
    if known is None:
        raise InvalidInputError(
            f"data[{index}].loss_fn_inputs[{name!r}].dtype",
            f"must be int64 or float32, got {tensor.dtype!r}",
        )
    return known


def _tensor_bytes(tensor: types.TensorData, index: int, name: str) -> tuple[memoryview, int]:
    typecode, code = _wire_dtype(tensor, index, name)
    stored = tensor._values
    if type(stored) is array and stored.typecode == typecode and _LITTLE_ENDIAN:
        return memoryview(stored).cast("B"), code  # values built from lists: no numpy, no copy
    dtype = _protowire.F32 if typecode == "f" else _protowire.I64
    values = (
        stored
        if tensor.sparse_crow_indices is None and type(stored) is not array
        else (tensor._dense_flat())
    )
    if values.dtype == dtype and values.ndim == 1 and values.flags.c_contiguous:
        return values.data.cast("B"), code  # the usual case: no copy, no conversion
    import numpy as np

    return np.ascontiguousarray(values, dtype=dtype).reshape(-1).data.cast("B"), code


def _pack_tokens(tokens: Sequence[int], index: int, position: int) -> bytes:
    # WIRE.md §13.7: token ids are int32 little-endian.
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


def _encode_image(chunk: types.ImageChunk, where: str) -> Writer:
    # WIRE.md §13.7 / golden-0.38: an image chunk is image {data, format, expected_tokens}.
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


def decode_forward_backward_output(
    body: bytes | bytearray | memoryview,
) -> types.ForwardBackwardOutput:
    """Decode a ``ForwardBackwardOutput`` body into per-datum TensorData and metrics."""
    buf = as_bytes(body)
    output_type = ""
    outputs: list[dict[str, types.TensorData]] = []
    metrics: dict[str, float] = {}
    for field, wire_type, a, b in iter_fields(buf, 0, len(buf)):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardOutput.loss_fn_output_type")
            output_type = read_string(buf, a, b, "ForwardBackwardOutput.loss_fn_output_type")
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardOutput.loss_fn_outputs")
            outputs.extend(_decode_array_record(buf, a, b, len(outputs)))
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, "ForwardBackwardOutput.metrics")
            name, number = read_double_entry(buf, a, b, "ForwardBackwardOutput.metrics")
            metrics[name] = number
    # WIRE.md §13.6: the output type is reduced to the part after the last ':'.
    return types.ForwardBackwardOutput(
        loss_fn_output_type=output_type.rsplit(":", 1)[-1],
        loss_fn_outputs=outputs,
        metrics=metrics,
    )


def _decode_array_record(
    buf: bytes, start: int, end: int, first_index: int
) -> list[dict[str, types.TensorData]]:
    where = "ForwardBackwardOutput.loss_fn_outputs"
    num_datums = 0
    columns: dict[str, list[types.TensorData]] = {}
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.fields")
            name, tensor_range = read_entry(buf, a, b, f"{where}.fields", WT_LEN)
            columns[name] = _decode_batched_tensor(
                buf, *(tensor_range or (b, b)), f"{where}.fields[{name!r}]"
            )
        elif field == 3:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.num_datums")
            num_datums = as_int64(a)
        elif field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.type_tag")
    sizes = {len(column) for column in columns.values()}
    if len(sizes) > 1 or (sizes and num_datums and sizes != {num_datums}):
        raise WireFormatError(
            f"protobuf: {where}: fields hold {sorted(sizes)} datums, num_datums is {num_datums}"
        )
    count = sizes.pop() if sizes else num_datums
    if count < 0 or (not columns and count > _MAX_EMPTY_RECORD_DATUMS):
        raise WireFormatError(f"protobuf: {where}.num_datums {num_datums} is invalid")
    return [{name: column[i] for name, column in columns.items()} for i in range(count)]


def _decode_batched_tensor(buf: bytes, start: int, end: int, where: str) -> list[types.TensorData]:
    data_range = offsets_range = (end, end)
    code = DTYPE_UNSPECIFIED
    trailing: list[int] = []
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.data")
            data_range = (a, b)
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.offsets")
            offsets_range = (a, b)
        elif field == 3:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.dtype")
            code = as_int32(a)
        elif field == 4:
            read_int64s(buf, wire_type, a, b, into=trailing, where=f"{where}.trailing_shape")
    wire_dtype, dtype_name = tensor_dtype(code, where)
    itemsize = wire_dtype.itemsize
    import numpy as np

    values = read_array(buf, *data_range, wire_dtype, f"{where}.data")
    offsets = read_array(buf, *offsets_range, _protowire.I64, f"{where}.offsets")
    if any(dim < 0 for dim in trailing):
        raise WireFormatError(f"protobuf: {where}.trailing_shape {trailing} is negative")
    per_row = math.prod(trailing)
    if offsets.size == 0:
        if values.size:
            raise WireFormatError(f"protobuf: {where} has data but no offsets")
        return []
    # WIRE.md §13.6: offsets are int64 byte offsets into data, one per datum plus the end.
    nbytes = data_range[1] - data_range[0]
    if (
        int(offsets[0]) < 0
        or int(offsets[-1]) > nbytes
        or bool(np.any(np.diff(offsets) < 0))
        or bool(np.any(offsets % itemsize))
    ):
        raise WireFormatError(f"protobuf: {where}.offsets are out of range or not aligned")
    # One copy for all datums, aligned and independent of the body they were read from.
    widened = owned(widen(values, code))
    # In Python: numpy's int64 floor_divide alone pages in 1 MiB of its library (RSS).
    bounds = [offset // itemsize for offset in offsets.tolist()]
    result: list[types.TensorData] = []
    trusted = types.TensorData._trusted
    for i in range(len(bounds) - 1):
        segment = widened[bounds[i] : bounds[i + 1]]
        size = segment.size
        if per_row:
            if size % per_row:
                raise WireFormatError(
                    f"protobuf: {where}: datum {i} has {size} values, "
                    f"not a multiple of trailing shape {trailing}"
                )
            shape = [size // per_row, *trailing]
        elif size:
            raise WireFormatError(f"protobuf: {where}: values with an empty trailing shape")
        else:
            shape = [0, *trailing]
        result.append(trusted(segment, dtype_name, shape))
    return result


def decode_sample_response(body: bytes | bytearray | memoryview) -> types.SampleResponse:
    """Decode a ``SampleResponse`` body (NaN prompt logprobs and top-k padding become None)."""
    buf = as_bytes(body)
    sequences: list[types.SampledSequence] = []
    prompt_logprobs: list[float | None] | None = None
    topk: list[list[tuple[int, float]] | None] | None = None
    cache_hits = 0
    target: types.TensorData | None = None
    alt: types.PromptAltTokens | None = None
    for field, wire_type, a, b in iter_fields(buf, 0, len(buf)):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.sequences")
            sequences.append(_decode_sampled_sequence(buf, a, b, len(sequences)))
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.prompt_logprobs")
            values = read_values(buf, a, b, CODE_F32, "SampleResponse.prompt_logprobs").tolist()
            prompt_logprobs = [None if math.isnan(value) else value for value in values]
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.topk_prompt_logprobs")
            topk = _decode_topk(buf, a, b, "SampleResponse.topk_prompt_logprobs")
        elif field == 4:
            expect_wire_type(wire_type, WT_VARINT, "SampleResponse.prompt_cache_hit_tokens")
            cache_hits = as_int32(a)
        elif field == 5:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.target_prompt_logprobs")
            target = decode_tensor(buf, a, b, "SampleResponse.target_prompt_logprobs")
        elif field == 6:
            expect_wire_type(wire_type, WT_LEN, "SampleResponse.prompt_alt_tokens")
            alt = _decode_prompt_alt_tokens(buf, a, b)
    return types.SampleResponse(
        sequences=sequences,
        prompt_logprobs=prompt_logprobs,
        topk_prompt_logprobs=topk,
        target_prompt_logprobs=target,
        prompt_cache_hit_tokens=cache_hits,
        prompt_alt_tokens=alt,
    )


def _decode_prompt_alt_tokens(buf: bytes, start: int, end: int) -> types.PromptAltTokens:
    where = "SampleResponse.prompt_alt_tokens"
    tokens = logprobs = None
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field in (1, 2):
            expect_wire_type(wire_type, WT_LEN, f"{where}.{'tokens' if field == 1 else 'logprobs'}")
            tensor = decode_tensor(buf, a, b, where)
            if field == 1:
                tokens = tensor
            else:
                logprobs = tensor
    if tokens is None or logprobs is None:
        raise WireFormatError(f"protobuf: {where} needs both tokens and logprobs")
    return types.PromptAltTokens(tokens=tokens, logprobs=logprobs)


def _decode_sampled_sequence(buf: bytes, start: int, end: int, index: int) -> types.SampledSequence:
    where = f"SampleResponse.sequences[{index}]"
    reason = STOP_REASON_STOP
    tokens: list[int] = []
    logprobs: list[float] | None = None
    topk: list[list[tuple[int, float]] | None] | None = None
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.stop_reason")
            reason = as_int32(a)
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.tokens")
            tokens = read_values(buf, a, b, CODE_I32, f"{where}.tokens").tolist()
        elif field == 3:
            expect_wire_type(wire_type, WT_LEN, f"{where}.logprobs")
            logprobs = read_values(buf, a, b, CODE_F32, f"{where}.logprobs").tolist()
        elif field == 4:
            expect_wire_type(wire_type, WT_LEN, f"{where}.topk_sampled_logprobs")
            topk = _decode_topk(buf, a, b, f"{where}.topk_sampled_logprobs")
    if reason == STOP_REASON_STOP:
        stop_reason = types.StopReason.STOP
    elif reason == STOP_REASON_LENGTH:
        stop_reason = types.StopReason.LENGTH
    else:
        # A reason newer than this release: kept (StopReason tolerates unknown values).
        stop_reason = types.StopReason(f"stop_reason_{reason}")
    return types.SampledSequence(
        stop_reason=stop_reason, tokens=tokens, logprobs=logprobs, topk_logprobs=topk
    )


def _decode_topk(
    buf: bytes, start: int, end: int, where: str
) -> list[list[tuple[int, float]] | None]:
    ids_range = logprobs_range = (end, end)
    k = length = 0
    for field, wire_type, a, b in iter_fields(buf, start, end):
        if field == 1:
            expect_wire_type(wire_type, WT_LEN, f"{where}.token_ids")
            ids_range = (a, b)
        elif field == 2:
            expect_wire_type(wire_type, WT_LEN, f"{where}.logprobs")
            logprobs_range = (a, b)
        elif field == 3:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.k")
            k = as_uint32(a)
        elif field == 4:
            expect_wire_type(wire_type, WT_VARINT, f"{where}.length")
            length = as_uint32(a)
    token_ids = read_values(buf, *ids_range, CODE_I32, f"{where}.token_ids").tolist()
    logprobs = read_values(buf, *logprobs_range, CODE_F32, f"{where}.logprobs").tolist()
    if len(token_ids) != k * length or len(logprobs) != k * length:
        raise WireFormatError(
            f"protobuf: {where}: {len(token_ids)} token ids and {len(logprobs)} logprobs "
            f"for length {length} x k {k}"
        )
    if k == 0:
        return [None] * length
    id_rows = [token_ids[start : start + k] for start in range(0, k * length, k)]
    lp_rows = [logprobs[start : start + k] for start in range(0, k * length, k)]
    rows: list[list[tuple[int, float]] | None] = []
    for id_row, lp_row in zip(id_rows, lp_rows, strict=True):
        cells = [
            (token, logprob)
            for token, logprob in zip(id_row, lp_row, strict=True)
            if token != TOPK_MASK_TOKEN or logprob != TOPK_MASK_LOGPROB
        ]
        rows.append(cells or None)
    return rows
