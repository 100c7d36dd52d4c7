"""Test helpers for tinker_lite._codec.proto: the golden-0.38 protobuf fixtures, a schema-driven
codec for their ``body_decoded`` rendering, and the classes protoc generates from the schema.

The "decoded dict" form is the one of ``../shared/wire/README.md`` (golden-0.38): field names as
keys in wire order, enums by name, array-holding ``bytes`` as ``{"int32le"|"int64le"|"float32le":
[...]}``, other bytes as ``{"base64": ...}``, maps as objects. The codec below is built on the
wire primitives of ``tinker_lite._codec.proto`` (varints, keys, the field scanner, the Writer).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.support.paths import REPO, SHARED
from tinker_lite import types
from tinker_lite._codec import protowire as _protowire

GOLDEN_DIR = SHARED / "wire" / "golden-0.38"
PROTO_FILE = REPO / "tests" / "fixtures" / "tinker_public.proto"

# ---------------------------------------------------------------------------------------------
# Schema (docs/protocol.rst §3.4). kind: scalar type, "message", "enum", "bytes", "map";
# "repeated" flag. For bytes: elem is "int32le" | "int64le" | "float32le" | "raw" | "dtype" (from
# the tensor's dtype, the message's own or its parent's).
# ---------------------------------------------------------------------------------------------

F = dict[str, Any]


def _f(number: int, kind: str, **extra: Any) -> F:
    return {"number": number, "kind": kind, **extra}


ENUMS: dict[str, dict[int, str]] = {
    "StopReason": {0: "STOP_REASON_STOP", 1: "STOP_REASON_LENGTH"},
    "DType": {
        0: "DTYPE_UNSPECIFIED",
        1: "DTYPE_FLOAT32",
        2: "DTYPE_INT64",
        3: "DTYPE_INT32",
        4: "DTYPE_BFLOAT16",
    },
}

SCHEMA: dict[str, dict[str, F]] = {
    "ForwardBackwardRequest": {
        "model_id": _f(1, "string"),
        "seq_id": _f(2, "int32"),
        "data": _f(3, "message", type="Datum", repeated=True),
        "loss_fn": _f(4, "string"),
        "loss_fn_config": _f(5, "map", value="double"),
        "forward_only": _f(6, "bool"),
        "loss_fn_config_v2": _f(7, "map", value="LossConfigValue"),
    },
    "LossConfigValue": {"number": _f(1, "double"), "text": _f(2, "string")},
    "Datum": {
        "model_input": _f(1, "message", type="Chunk", repeated=True),
        "loss_fn_inputs": _f(2, "map", value="Tensor"),
        "model_input_spans": _f(3, "message", type="ProvenanceSpan", repeated=True),
        "loss_fn_input_spans": _f(4, "message", type="ProvenanceSpan", repeated=True),
    },
    "ProvenanceSpan": {
        "prompt_tokens": _f(1, "message", type="PromptProvenanceSpan"),
        "sampled_tokens": _f(2, "message", type="SampledProvenanceSpan"),
    },
    "PromptProvenanceSpan": {
        "sequence_id": _f(1, "string"),
        "offset": _f(2, "int64"),
        "length": _f(3, "int64"),
    },
    "SampledProvenanceSpan": {
        "sequence_id": _f(1, "string"),
        "offset": _f(2, "int64"),
        "length": _f(3, "int64"),
    },
    "Chunk": {
        "encoded_text": _f(1, "message", type="EncodedTextChunk"),
        "image": _f(2, "message", type="ImageChunk"),
        "dmel": _f(3, "message", type="DmelChunk"),
    },
    "EncodedTextChunk": {"tokens": _f(1, "bytes", elem="int32le")},
    "ImageChunk": {
        "data": _f(1, "bytes", elem="raw"),
        "format": _f(2, "string"),
        "expected_tokens": _f(3, "int32"),
        "override_dimensions": _f(4, "message", type="ImageDimensions"),
    },
    "ImageDimensions": {"width": _f(1, "uint32"), "height": _f(2, "uint32")},
    "DmelChunk": {"dmel": _f(1, "bytes", elem="raw")},
    "Tensor": {
        "dense": _f(1, "bytes", elem="dtype"),
        "sparse_csr": _f(2, "message", type="SparseCsr"),
        "dtype": _f(3, "enum", type="DType"),
        "shape": _f(4, "int64", repeated=True),
    },
    "SparseCsr": {
        "values": _f(1, "bytes", elem="dtype"),
        "crow_indices": _f(2, "bytes", elem="int64le"),
        "col_indices": _f(3, "bytes", elem="int64le"),
    },
    "ForwardBackwardOutput": {
        "loss_fn_output_type": _f(1, "string"),
        "loss_fn_outputs": _f(2, "message", type="ArrayRecord", repeated=True),
        "metrics": _f(3, "map", value="double"),
    },
    "ArrayRecord": {
        "type_tag": _f(1, "string"),
        "fields": _f(2, "map", value="BatchedTensor"),
        "num_datums": _f(3, "int64"),
    },
    "BatchedTensor": {
        "data": _f(1, "bytes", elem="dtype"),
        "offsets": _f(2, "bytes", elem="int64le"),
        "dtype": _f(3, "enum", type="DType"),
        "trailing_shape": _f(4, "int64", repeated=True),
    },
    "SampleResponse": {
        "sequences": _f(1, "message", type="SampledSequence", repeated=True),
        "prompt_logprobs": _f(2, "bytes", elem="float32le"),
        "topk_prompt_logprobs": _f(3, "message", type="TopkLogprobs"),
        "prompt_cache_hit_tokens": _f(4, "int32"),
        "target_prompt_logprobs": _f(5, "message", type="Tensor"),
        "prompt_alt_tokens": _f(6, "message", type="PromptAltTokens"),
    },
    "SampledSequence": {
        "stop_reason": _f(1, "enum", type="StopReason"),
        "tokens": _f(2, "bytes", elem="int32le"),
        "logprobs": _f(3, "bytes", elem="float32le"),
        "topk_sampled_logprobs": _f(4, "message", type="TopkLogprobs"),
    },
    "TopkLogprobs": {
        "token_ids": _f(1, "bytes", elem="int32le"),
        "logprobs": _f(2, "bytes", elem="float32le"),
        "k": _f(3, "uint32"),
        "length": _f(4, "uint32"),
    },
    "PromptAltTokens": {
        "tokens": _f(1, "message", type="Tensor"),
        "logprobs": _f(2, "message", type="Tensor"),
    },
}

_ELEM_DTYPES: dict[str, np.dtype[Any]] = {
    "int32le": np.dtype("<i4"),
    "int64le": np.dtype("<i8"),
    "float32le": np.dtype("<f4"),
    "uint16le": np.dtype("<u2"),
}
_DTYPE_ELEMS = {
    "DTYPE_FLOAT32": "float32le",
    "DTYPE_INT64": "int64le",
    "DTYPE_INT32": "int32le",
    "DTYPE_BFLOAT16": "uint16le",
}
_VARINT_KINDS = {"int32", "int64", "uint32", "uint64", "bool", "enum"}


# ---------------------------------------------------------------------------------------------
# decoded dict -> bytes
# ---------------------------------------------------------------------------------------------


def encode_decoded(message: str, obj: dict[str, Any]) -> bytes:
    """Write a decoded-dict message back to bytes, keys in the dict's order."""
    return _encode_message(message, obj).getvalue()


def _encode_message(message: str, obj: dict[str, Any]) -> _protowire.Writer:
    out = _protowire.Writer()
    fields = SCHEMA[message]
    for name, value in obj.items():
        spec = fields[name]
        number, kind = spec["number"], spec["kind"]
        if kind == "map":
            for key, item in value.items():
                entry = _protowire.Writer()
                entry.string_field(_protowire.field_key(1, _protowire.WT_LEN), key)
                if spec["value"] == "double":
                    entry.double_field(_protowire.field_key(2, _protowire.WT_I64), item)
                else:
                    entry.message_field(
                        _protowire.field_key(2, _protowire.WT_LEN),
                        _encode_message(spec["value"], item),
                    )
                out.message_field(_protowire.field_key(number, _protowire.WT_LEN), entry)
        elif spec.get("repeated"):
            if kind == "message":
                for item in value:
                    out.message_field(
                        _protowire.field_key(number, _protowire.WT_LEN),
                        _encode_message(spec["type"], item),
                    )
            else:
                out.packed_varints_field(_protowire.field_key(number, _protowire.WT_LEN), value)
        else:
            _encode_scalar(out, spec, value)
    return out


def _encode_scalar(out: _protowire.Writer, spec: F, value: Any) -> None:
    number, kind = spec["number"], spec["kind"]
    if kind == "message":
        out.message_field(
            _protowire.field_key(number, _protowire.WT_LEN), _encode_message(spec["type"], value)
        )
    elif kind == "string":
        out.string_field(_protowire.field_key(number, _protowire.WT_LEN), value)
    elif kind == "bytes":
        out.bytes_field(_protowire.field_key(number, _protowire.WT_LEN), _bytes_value(value))
    elif kind == "double":
        out.double_field(_protowire.field_key(number, _protowire.WT_I64), value)
    elif kind == "enum":
        names = {name: code for code, name in ENUMS[spec["type"]].items()}
        out.varint_field(
            _protowire.field_key(number, _protowire.WT_VARINT), names.get(value, value)
        )
    elif kind in _VARINT_KINDS:
        out.varint_field(_protowire.field_key(number, _protowire.WT_VARINT), int(value))
    else:  # pragma: no cover - the schema has no other kinds
        raise AssertionError(kind)


def _bytes_value(value: dict[str, Any]) -> bytes:
    ((elem, payload),) = value.items()
    if elem == "base64":
        return base64.b64decode(payload)
    encoded: bytes = np.asarray(payload, dtype=_ELEM_DTYPES[elem]).tobytes()
    return encoded


# ---------------------------------------------------------------------------------------------
# bytes -> decoded dict
# ---------------------------------------------------------------------------------------------


def decode_to_dict(message: str, body: bytes, *, sort_maps: bool = False) -> dict[str, Any]:
    """Read bytes into the decoded-dict form (fields in wire order, maps optionally sorted)."""
    return _decode_message(message, body, 0, len(body), dtype=None, sort_maps=sort_maps)


def _decode_message(
    message: str, buf: bytes, start: int, end: int, *, dtype: str | None, sort_maps: bool
) -> dict[str, Any]:
    fields = SCHEMA[message]
    by_number = {spec["number"]: (name, spec) for name, spec in fields.items()}
    if "dtype" in fields:
        for number, wire_type, a, _ in _protowire.iter_fields(buf, start, end):
            if number == fields["dtype"]["number"] and wire_type == _protowire.WT_VARINT:
                dtype = ENUMS["DType"].get(a, str(a))
    out: dict[str, Any] = {}
    for number, wire_type, a, b in _protowire.iter_fields(buf, start, end):
        if number not in by_number:
            continue
        name, spec = by_number[number]
        kind = spec["kind"]
        if kind == "map":
            key, value = _decode_entry(spec, buf, a, b, dtype=dtype, sort_maps=sort_maps)
            out.setdefault(name, {})[key] = value
        elif kind == "message":
            value = _decode_message(spec["type"], buf, a, b, dtype=dtype, sort_maps=sort_maps)
            if spec.get("repeated"):
                out.setdefault(name, []).append(value)
            else:
                out[name] = value
        elif spec.get("repeated"):
            values: list[int] = out.setdefault(name, [])
            if wire_type == _protowire.WT_VARINT:
                values.append(_protowire.as_int64(a))
            else:
                values.extend(_protowire.read_packed_int64s(buf, a, b))
        elif kind == "string":
            out[name] = buf[a:b].decode("utf-8")
        elif kind == "bytes":
            out[name] = _decode_bytes(spec["elem"], buf[a:b], dtype)
        elif kind == "double":
            out[name] = _protowire.read_double(buf, a)
        elif kind == "enum":
            out[name] = ENUMS[spec["type"]].get(_protowire.as_int32(a), _protowire.as_int32(a))
        elif kind == "bool":
            out[name] = a != 0
        elif kind == "int32":
            out[name] = _protowire.as_int32(a)
        elif kind == "int64":
            out[name] = _protowire.as_int64(a)
        elif kind == "uint32":
            out[name] = _protowire.as_uint32(a)
        else:
            out[name] = a
    if sort_maps:
        for name, spec in fields.items():
            if spec["kind"] == "map" and name in out:
                out[name] = dict(sorted(out[name].items()))
    return out


def _decode_entry(
    spec: F, buf: bytes, start: int, end: int, *, dtype: str | None, sort_maps: bool
) -> tuple[str, Any]:
    key = ""
    value: Any = 0.0 if spec["value"] == "double" else {}
    for number, _wire_type, a, b in _protowire.iter_fields(buf, start, end):
        if number == 1:
            key = buf[a:b].decode("utf-8")
        elif number == 2:
            if spec["value"] == "double":
                value = _protowire.read_double(buf, a)
            else:
                value = _decode_message(spec["value"], buf, a, b, dtype=dtype, sort_maps=sort_maps)
    return key, value


def _decode_bytes(elem: str, data: bytes, dtype: str | None) -> dict[str, Any]:
    if elem == "dtype":
        elem = _DTYPE_ELEMS.get(dtype or "", "raw")
    if elem == "raw":
        return {"base64": base64.b64encode(data).decode("ascii")}
    return {elem: np.frombuffer(data, dtype=_ELEM_DTYPES[elem]).tolist()}


def canonical(message: str, body: bytes) -> bytes:
    """Return ``body`` re-encoded with every map's entries sorted by key (order-free compare)."""
    return encode_decoded(message, decode_to_dict(message, body, sort_maps=True))


# ---------------------------------------------------------------------------------------------
# Golden fixtures
# ---------------------------------------------------------------------------------------------


def golden_proto_fixtures() -> list[tuple[str, dict[str, Any]]]:
    """Return ``(name, fixture)`` for every golden-0.38 file with a protobuf body."""
    if not GOLDEN_DIR.is_dir():
        return []
    found = []
    for path in sorted(GOLDEN_DIR.glob("*.json")):
        fixture = json.loads(path.read_text(encoding="utf-8"))
        if fixture.get("body_base64"):
            found.append((path.stem, fixture))
    return found


def golden_message_bytes(fixture: dict[str, Any]) -> bytes:
    """Return the fixture's protobuf bytes (decompressed when it was sent zstd-compressed)."""
    encoded = fixture.get("body_decompressed_base64") or fixture["body_base64"]
    return base64.b64decode(encoded)


def datums_from_decoded(decoded: dict[str, Any]) -> list[types.Datum]:
    """Rebuild tinker_lite Datums from a decoded ForwardBackwardRequest (dense tensors only)."""
    data = []
    for datum in decoded.get("data", []):
        chunks: list[types.ModelInputChunk] = []
        for chunk in datum.get("model_input", []):
            if "encoded_text" in chunk:
                tokens = chunk["encoded_text"].get("tokens", {"int32le": []})["int32le"]
                chunks.append(types.EncodedTextChunk(tokens=tokens))
            else:
                image = chunk["image"]
                chunks.append(
                    types.ImageChunk(
                        data=base64.b64decode(image["data"]["base64"]),
                        format=image["format"],
                        expected_tokens=image.get("expected_tokens"),
                    )
                )
        inputs = {}
        for name, tensor in datum.get("loss_fn_inputs", {}).items():
            ((elem, values),) = tensor["dense"].items()
            dtype: types.TensorDtype = "int64" if tensor["dtype"] == "DTYPE_INT64" else "float32"
            inputs[name] = types.TensorData(
                data=np.asarray(values, dtype=_ELEM_DTYPES[elem]),
                dtype=dtype,
                shape=tensor.get("shape"),
            )
        data.append(types.Datum(model_input=types.ModelInput(chunks=chunks), loss_fn_inputs=inputs))
    return data


def config_from_decoded(decoded: dict[str, Any]) -> dict[str, float | str] | None:
    """Rebuild the caller's loss_fn_config (v2 holds every key; numbers also in v1)."""
    config: dict[str, float | str] = dict(decoded.get("loss_fn_config", {}))
    for name, value in decoded.get("loss_fn_config_v2", {}).items():
        config[name] = value["number"] if "number" in value else value["text"]
    return config or None


# ---------------------------------------------------------------------------------------------
# Classes generated by protoc (grpcio-tools) from tests/fixtures/tinker_public.proto
# ---------------------------------------------------------------------------------------------


_generated: list[ModuleType] = []


def generated_module(out_dir: Path) -> ModuleType:
    """Compile the schema with grpc_tools.protoc into ``out_dir`` and import the module.

    Compiled once per process (the protobuf runtime keeps one descriptor pool). Skips the
    calling test when protobuf or grpcio-tools is not installed.
    """
    pytest.importorskip("google.protobuf")
    pytest.importorskip("grpc_tools.protoc")
    if _generated:
        return _generated[0]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_FILE.parent}",
            f"--python_out={out_dir}",
            str(PROTO_FILE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"protoc failed: {result.stderr}")
    module_path = out_dir / "tinker_public_pb2.py"
    spec = importlib.util.spec_from_file_location("tinker_public_pb2", module_path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _generated.append(module)
    return module
