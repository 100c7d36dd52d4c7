"""The safetensors file format, written and read by hand, and state trees as flat tensors.

A safetensors file is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the raw little-endian data. :func:`flatten_state` splits a
nested state (dicts, lists, arrays, scalars) into flat tensors plus a JSON manifest.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tinker_lite.local.refusals import CheckpointError

__all__ = ["flatten_state", "read_safetensors", "unflatten_state", "write_safetensors"]

_DTYPES: dict[str, str] = {
    "float32": "F32",
    "float64": "F64",
    "float16": "F16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}
_NP_DTYPES = {v: k for k, v in _DTYPES.items()}


def write_safetensors(
    path: Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None
) -> int:
    """Write ``tensors`` to ``path`` in the safetensors format; return the file size."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        dtype = _DTYPES.get(array.dtype.name)
        if dtype is None:
            raise CheckpointError(f"cannot store tensor {name!r} of dtype {array.dtype}")
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)
    return 8 + len(header_bytes) + offset


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Read a safetensors file: (tensors, metadata)."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise CheckpointError(f"{path.name} is not a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8 : 8 + n])
    except ValueError as e:
        raise CheckpointError(f"{path.name} has a corrupt header") from e
    metadata = header.pop("__metadata__", {}) or {}
    base = 8 + n
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        dtype = _NP_DTYPES.get(info["dtype"])
        if dtype is None:
            raise CheckpointError(f"{path.name}: unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        array = np.frombuffer(
            raw[base + start : base + end], dtype=np.dtype(dtype).newbyteorder("<")
        )
        tensors[name] = array.astype(dtype).reshape(info["shape"])
    return tensors, {str(k): str(v) for k, v in metadata.items()}


# ---------------------------------------------------------------------------------------------
# arbitrary state trees <-> flat tensors + a JSON manifest


def flatten_state(tree: Any) -> tuple[dict[str, np.ndarray], Any]:
    """Split a nested dict/list of arrays and scalars into flat tensors plus a JSON manifest."""
    tensors: dict[str, np.ndarray] = {}

    def walk(node: Any, prefix: str) -> Any:
        if isinstance(node, Mapping):
            return {"dict": {str(k): walk(v, f"{prefix}{k}.") for k, v in node.items()}}
        if isinstance(node, list | tuple):
            return {"list": [walk(v, f"{prefix}{i}.") for i, v in enumerate(node)]}
        if node is None:
            return {"none": True}
        if isinstance(node, bool):
            return {"bool": node}
        if isinstance(node, int):
            return {"int": node}
        if isinstance(node, float):
            return {"float": node}
        if isinstance(node, str):
            return {"str": node}
        array = np.asarray(node)
        key = prefix[:-1] if prefix else "value"
        while key in tensors:
            key += "_"
        tensors[key] = array
        return {"tensor": key}

    return tensors, walk(tree, "")


def unflatten_state(tensors: Mapping[str, np.ndarray], manifest: Any) -> Any:
    """Rebuild the tree that :func:`flatten_state` split."""
    if "dict" in manifest:
        return {k: unflatten_state(tensors, v) for k, v in manifest["dict"].items()}
    if "list" in manifest:
        return [unflatten_state(tensors, v) for v in manifest["list"]]
    if "tensor" in manifest:
        return np.array(tensors[manifest["tensor"]])
    if "none" in manifest:
        return None
    for key in ("bool", "int", "float", "str"):
        if key in manifest:
            return manifest[key]
    raise CheckpointError("corrupt checkpoint manifest")
