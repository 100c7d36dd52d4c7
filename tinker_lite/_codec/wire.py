"""The one converter between tinker_lite models and the wire's JSON.

Encoding follows the tinker_lite profile (WIRE.md §P.1-P.2): every field whose value is not None
is sent (``type`` discriminators included), ``null`` never is, image bytes travel as base64,
float32 tensors as values that parse back to the same float32 numbers, NaN/Inf are rejected
before sending. With orjson installed (the ``fast`` extra) numpy arrays are written directly;
otherwise the stdlib ``json`` module is used. numpy is imported only for numpy values and
float32 tensors (their shortest float32 text); token ids and int64 values built from lists are
written without it. Decoding is lenient by default (unknown keys
ignored, new enum values kept) and strict on request (unknown keys rejected).

Size: about 800 lines, because encoding and the strict/lenient structuring hooks form one
converter configured once (STYLE.md practice 9); splitting it would split that configuration.

This module never does HTTP.
"""

from __future__ import annotations

import base64
import contextvars
import enum
import functools
import json
import math
import re
import reprlib
import sys
import types as _pytypes
import typing
from array import array
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar, Union

import attrs
import cattrs

from tinker_lite import types
from tinker_lite._errors import InvalidInputError, RequestErrorCategory, WireFormatError

if TYPE_CHECKING:
    import numpy.typing as npt

_orjson_module: Any
try:  # the `fast` extra
    import orjson as _orjson_module
except ImportError:  # pragma: no cover - exercised by the no-orjson test via monkeypatch
    _orjson_module = None

__all__ = ["decode", "dumps", "loads", "structure", "to_builtins"]

T = TypeVar("T")

# Read at call time, so tests and benchmarks can switch the fast path off.
_orjson: Any = _orjson_module

# ---------------------------------------------------------------------------------------------
# Unstructure (models -> JSON-able values)
# ---------------------------------------------------------------------------------------------


def _format_datetime(value: datetime) -> str:
    # WIRE.md §11.3: UTC with a `Z` suffix, microseconds only when non-zero.
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    spec = "microseconds" if value.microsecond else "seconds"
    return value.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def _finite_float(value: float, field: str) -> float:
    if not math.isfinite(value):
        raise InvalidInputError(
            field, f"is {value!r}", "JSON cannot carry NaN or Infinity; send a finite number"
        )
    return value


def _value(value: Any, field: str) -> Any:
    """Unstructure one value; numpy arrays are left in place for the encoder."""
    kind = type(value)
    if kind is str or kind is int or kind is bool:
        return value
    if kind is float:
        return _finite_float(value, field)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _finite_float(float(value), field)
    if attrs.has(kind):
        return _converter.unstructure(value)
    if isinstance(value, (list, tuple)):
        return [_value(item, f"{field}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(field, f"keys must be strings, got {key!r}")
            out[key] = _value(item, f"{field}[{key!r}]")
        return out
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime):
        return _format_datetime(value)
    np = sys.modules.get("numpy")  # a value can be a numpy object only once numpy is loaded
    if np is not None and isinstance(value, np.generic):
        return _value(value.item(), field)
    if np is not None and isinstance(value, np.ndarray):
        return _array_value(value, field)
    raise InvalidInputError(
        field,
        f"cannot be sent as JSON: {type(value).__name__}",
        "use numbers, strings, lists, dicts",
    )


def _array_value(arr: npt.NDArray[Any], field: str) -> npt.NDArray[Any]:
    import numpy as np

    if arr.dtype.kind == "f":
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        _check_finite(arr, field)
    elif arr.dtype.kind in "iub":
        arr = np.ascontiguousarray(arr, dtype=np.int64)
    else:
        raise InvalidInputError(field, f"unsupported dtype {arr.dtype}")
    return arr


def _check_finite(arr: npt.NDArray[Any], field: str) -> None:
    import numpy as np

    if arr.size and not bool(np.isfinite(arr).all()):
        position = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InvalidInputError(
            field,
            f"holds {float(arr.flat[position])!r} at position {position}",
            "JSON cannot carry NaN or Infinity; replace or mask those values",
        )


def _unstructure_tensor(tensor: types.TensorData, field: str) -> dict[str, Any]:
    data: Any = tensor._values
    if tensor.dtype == "float32":
        # Written by _float32_values (numpy) for the shortest text of each float32.
        data = tensor._numpy
        _check_finite(data, field)
    elif isinstance(data, array):
        data = data.tolist()  # int64 values built from a list: written without numpy
    out: dict[str, Any] = {"data": data, "dtype": tensor.dtype}
    if tensor.shape is not None:
        out["shape"] = list(tensor.shape)
    if tensor.sparse_crow_indices is not None:
        out["sparse_crow_indices"] = tensor.sparse_crow_indices
        out["sparse_col_indices"] = tensor.sparse_col_indices
    return out


def _unstructure_chunk(chunk: types.ModelInputChunk) -> dict[str, Any]:
    if isinstance(chunk, types.EncodedTextChunk):
        ids = chunk._current_ids()  # written as a list of ints, like `tokens`
        if ids is None or isinstance(ids, array):
            return {"tokens": chunk.tokens, "type": "encoded_text"}
        return {"tokens": ids, "type": "encoded_text"}
    return _unstructure_attrs_generic(chunk)


def _unstructure_model_input(model_input: types.ModelInput) -> dict[str, Any]:
    return {"chunks": [_unstructure_chunk(chunk) for chunk in model_input.chunks]}


def _unstructure_datum(datum: types.Datum, prefix: str = "") -> dict[str, Any]:
    inputs = {
        key: _unstructure_tensor(tensor, f"{prefix}loss_fn_inputs[{key!r}]")
        for key, tensor in datum.loss_fn_inputs.items()
    }
    return {"loss_fn_inputs": inputs, "model_input": _unstructure_model_input(datum.model_input)}


def _unstructure_fb_input(fb_input: types.ForwardBackwardInput) -> dict[str, Any]:
    # WIRE.md §P.1: a non-finite value is reported with its datum index and key.
    data = [
        _unstructure_datum(datum, f"data[{index}].") for index, datum in enumerate(fb_input.data)
    ]
    out: dict[str, Any] = {"data": data, "loss_fn": fb_input.loss_fn}
    if fb_input.loss_fn_config is not None:
        out["loss_fn_config"] = _value(fb_input.loss_fn_config, "loss_fn_config")
    return out


_FIELD_NAMES: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


def _unstructure_attrs_generic(obj: Any) -> dict[str, Any]:
    cls = type(obj)
    spec = _FIELD_NAMES.get(cls)
    if spec is None:
        names = tuple(field.name for field in attrs.fields(cls))
        nullable: frozenset[str] = getattr(cls, "_wire_nullable", frozenset())
        spec = _FIELD_NAMES[cls] = (names, nullable)
    names, nullable = spec
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(obj, name)
        if value is None:
            # WIRE.md §P.1: null is never sent, except on the hand-built bodies that need it.
            if name in nullable:
                out[name] = None
            continue
        out[name] = _value(value, name)
    return out


# By class name: the models are looked up (and their modules imported) only when one is met.
_SPECIAL_UNSTRUCTURE: dict[str, Callable[[Any], Any]] = {
    "TensorData": lambda tensor: _unstructure_tensor(tensor, "TensorData.data"),
    "ModelInput": _unstructure_model_input,
    "EncodedTextChunk": _unstructure_chunk,
    "Datum": _unstructure_datum,
    "ForwardBackwardInput": _unstructure_fb_input,
}


def _is_model(cls: Any, name: str) -> bool:
    """Whether ``cls`` is the model ``types.<name>`` (imports its module only on a name match)."""
    return getattr(cls, "__name__", None) == name and getattr(types, name) is cls


def _unstructure_factory(cls: type) -> Callable[[Any], Any]:
    special = _SPECIAL_UNSTRUCTURE.get(cls.__name__)
    if special is not None and _is_model(cls, cls.__name__):
        return special
    return _unstructure_attrs_generic


# ---------------------------------------------------------------------------------------------
# Structure (JSON values -> models)
# ---------------------------------------------------------------------------------------------


class _PathError(Exception):
    """A decoding failure, with the path to the offending value."""

    def __init__(self, message: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def at(self, segment: str) -> _PathError:
        return _PathError(self.message, (segment, *self.path))


_PREVIEW = reprlib.Repr()
_PREVIEW.maxlevel = 3
_PREVIEW.maxstring = 60
_PREVIEW.maxother = 60


def _describe(value: Any) -> str:
    # A bounded preview: a whole (possibly huge or deeply nested) answer is never repr'd.
    text = _PREVIEW.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _guard(segment: str, value: Any, tp: Any) -> Any:
    try:
        return _converter.structure(value, tp)
    except _PathError as exc:
        raise exc.at(segment) from exc.__cause__
    except (InvalidInputError, WireFormatError, ValueError, TypeError, KeyError) as exc:
        raise _PathError(str(exc)).at(segment) from exc


def _struct_str(value: Any, tp: Any) -> str:
    if tp is not str and _is_enum(tp):
        # A str enum reaches the str hook (class hooks match subclasses): read it as an enum.
        result: str = _enum_hook(tp)(value, tp)
        return result
    if not isinstance(value, str):
        raise _PathError(f"expected a string, got {_describe(value)}")
    return value


def _struct_int(value: Any, _: Any) -> int:
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _PathError(f"expected an integer, got {_describe(value)}")


def _struct_float(value: Any, _: Any) -> float:
    if type(value) is float or (type(value) is int):
        return float(value)
    raise _PathError(f"expected a number, got {_describe(value)}")


def _struct_bool(value: Any, _: Any) -> bool:
    if type(value) is bool:
        return value
    raise _PathError(f"expected true or false, got {_describe(value)}")


def _struct_any(value: Any, _: Any) -> Any:
    return value


def _struct_bytes(value: Any, _: Any) -> Any:
    # Models decode base64 text themselves (ImageChunk.data).
    if isinstance(value, (str, bytes)):
        return value
    raise _PathError(f"expected base64 text, got {_describe(value)}")


_FRACTION = re.compile(r"\.(\d+)")


def _struct_datetime(value: Any, _: Any) -> datetime:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise _PathError(f"timestamp {_describe(value)} is out of range") from None
    if not isinstance(value, str):
        raise _PathError(f"expected an ISO-8601 datetime, got {_describe(value)}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Python 3.10's fromisoformat accepts only 3 or 6 fraction digits.
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise _PathError(f"expected an ISO-8601 datetime, got {_describe(value)}") from None


def _struct_tensor(value: Any, _: Any) -> types.TensorData:
    if not isinstance(value, Mapping):
        raise _PathError(f"expected a tensor object, got {_describe(value)}")
    if _strict.get() and value.keys() - _TENSOR_KEYS:
        raise _PathError(f"unknown keys {sorted(value.keys() - _TENSOR_KEYS)}")
    if "data" not in value or "dtype" not in value:
        raise _PathError("a tensor needs 'data' and 'dtype'")
    data = value["data"]
    shape = value.get("shape")
    if value.get("sparse_crow_indices") is not None:
        _check_sparse_shape(value)
        # WIRE.md §13.3: kept sparse, as the official SDK does; to_numpy() densifies.
        return types.TensorData(
            data=data,
            dtype=value["dtype"],
            shape=shape,
            sparse_crow_indices=value["sparse_crow_indices"],
            sparse_col_indices=value.get("sparse_col_indices"),
        )
    return types.TensorData(data=data, dtype=value["dtype"], shape=shape)


_TENSOR_KEYS = frozenset({"data", "dtype", "shape", "sparse_crow_indices", "sparse_col_indices"})


def _check_sparse_shape(value: Mapping[str, Any]) -> None:
    # WIRE.md §13.3: a sparse CSR tensor carries nnz values, row pointers and column indices.
    shape = value.get("shape")
    if not isinstance(shape, list) or len(shape) != 2 or any(type(d) is not int for d in shape):
        raise _PathError("a sparse tensor needs a 2-D shape")
    if value.get("sparse_col_indices") is None:
        raise _PathError("a sparse tensor needs 'sparse_col_indices'")


def _chunk_class(value: Mapping[str, Any]) -> type:
    kind = value.get("type")
    if kind is not None:
        for cls in (types.EncodedTextChunk, types.ImageChunk, types.ImageAssetPointerChunk):
            if attrs.fields_dict(cls)["type"].default == kind:
                return cls
        raise _PathError(f"unknown chunk type {kind!r}")
    # WIRE.md §2.1: 0.4.1 sends no `type`; the kind follows from the keys.
    if "tokens" in value and isinstance(value["tokens"], list):
        return types.EncodedTextChunk
    if "location" in value:
        return types.ImageAssetPointerChunk
    if "data" in value:
        return types.ImageChunk
    raise _PathError(f"cannot tell the chunk kind of {_describe(value)}")


def _struct_chunk(value: Any, _: Any) -> types.ModelInputChunk:
    if not isinstance(value, Mapping):
        raise _PathError(f"expected a chunk object, got {_describe(value)}")
    cls = _chunk_class(value)
    if cls is types.EncodedTextChunk and not _strict.get() and "tokens" in value:
        return types.EncodedTextChunk(tokens=value["tokens"])
    result: types.ModelInputChunk = _structure_attrs(value, cls)
    return result


# Telemetry event kind -> the name of its model in `types`.
_EVENT_CLASSES: dict[str, str] = {
    "SESSION_START": "SessionStartEvent",
    "SESSION_END": "SessionEndEvent",
    "UNHANDLED_EXCEPTION": "UnhandledExceptionEvent",
    "GENERIC_EVENT": "GenericEvent",
}
_CHUNK_NAMES = frozenset({"EncodedTextChunk", "ImageChunk", "ImageAssetPointerChunk"})
_EVENT_NAMES = frozenset(_EVENT_CLASSES.values())


def _struct_event(value: Any, _: Any) -> Any:
    if not isinstance(value, Mapping) or value.get("event") not in _EVENT_CLASSES:
        raise _PathError(f"expected a telemetry event, got {_describe(value)}")
    return _structure_attrs(value, getattr(types, _EVENT_CLASSES[value["event"]]))


def _struct_enum_factory(cls: type[enum.Enum]) -> Callable[[Any, Any], Any]:
    known = {member.value for member in cls}

    def structure_enum(value: Any, _: Any) -> Any:
        if not isinstance(value, str):
            raise _PathError(f"expected one of {sorted(known)}, got {_describe(value)}")
        if cls is RequestErrorCategory:
            # WIRE.md §3.7: lower-case on the wire; capitalised forms are read too.
            if _strict.get() and value.lower() not in known:
                raise _PathError(f"expected one of {sorted(known)}, got {value!r}")
            return RequestErrorCategory.parse(value)
        if _strict.get() and value not in known:
            raise _PathError(f"expected one of {sorted(known)}, got {value!r}")
        return cls(value)

    return structure_enum


@functools.cache
def _enum_hook(cls: type[enum.Enum]) -> Callable[[Any, Any], Any]:
    return _struct_enum_factory(cls)


def _struct_literal(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(tp)

    def structure_literal(value: Any, _: Any) -> Any:
        if value not in allowed:
            raise _PathError(f"expected one of {list(allowed)}, got {_describe(value)}")
        return value

    return structure_literal


def _struct_list_factory(tp: Any) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)
    elem = args[0] if args else Any

    def structure_list(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, list):
            raise _PathError(f"expected a list, got {_describe(value)}")
        if elem is int and all(type(item) is int for item in value):
            return list(value)
        if elem is float and all(type(item) is float for item in value):
            return list(value)
        out = []
        for index, item in enumerate(value):
            out.append(_guard(f"[{index}]", item, elem))
        return out

    return structure_list


def _struct_tuple_factory(tp: Any) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)

    def structure_tuple(value: Any, _: Any) -> tuple[Any, ...]:
        if not isinstance(value, (list, tuple)):
            raise _PathError(f"expected a list, got {_describe(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_guard(f"[{i}]", item, args[0]) for i, item in enumerate(value))
        if len(value) != len(args):
            raise _PathError(f"expected {len(args)} items, got {len(value)}")
        return tuple(_guard(f"[{i}]", value[i], args[i]) for i in range(len(args)))

    return structure_tuple


def _struct_dict_factory(tp: Any) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)
    value_type = args[1] if len(args) == 2 else Any

    def structure_dict(value: Any, _: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise _PathError(f"expected an object, got {_describe(value)}")
        if value_type is Any:
            return dict(value)
        return {key: _guard(f"[{key!r}]", item, value_type) for key, item in value.items()}

    return structure_dict


def _is_model_union(classes: tuple[Any, ...], names: frozenset[str]) -> bool:
    """Whether ``classes`` are exactly the models of ``types`` named ``names``."""
    given = {getattr(cls, "__name__", None) for cls in classes}
    return given == names and all(_is_model(cls, cls.__name__) for cls in classes)


def _struct_union_factory(tp: Any) -> Callable[[Any, Any], Any]:
    args = typing.get_args(tp)
    non_none = tuple(arg for arg in args if arg is not type(None))
    optional = len(non_none) != len(args)
    if _is_model_union(non_none, _CHUNK_NAMES):
        inner: Callable[[Any, Any], Any] = _struct_chunk
    elif _is_model_union(non_none, _EVENT_NAMES):
        inner = _struct_event
    elif len(non_none) == 1:
        target = non_none[0]

        def inner(value: Any, _: Any) -> Any:
            return _converter.structure(value, target)
    elif (tagged := _discriminated(non_none)) is not None:
        inner = tagged
    else:
        # Mixed scalar unions (`float | str`, `str | list[str] | list[int]`): the model's own
        # validators check the value.
        inner = _struct_any

    def structure_union(value: Any, _: Any) -> Any:
        if value is None:
            if optional:
                return None
            raise _PathError("expected a value, got null")
        return inner(value, tp)

    return structure_union


def _discriminated(classes: tuple[Any, ...]) -> Callable[[Any, Any], Any] | None:
    """A hook for a union of models told apart by their ``type`` (or ``state``) value, or None."""
    if not all(isinstance(cls, type) and attrs.has(cls) for cls in classes):
        return None
    for tag in ("type", "state"):
        by_value: dict[Any, type] = {}
        for cls in classes:
            field = attrs.fields_dict(cls).get(tag)
            if field is None or field.default is attrs.NOTHING or field.default in by_value:
                break
            by_value[field.default] = cls
        else:
            return _tagged_union_hook(tag, by_value)
    return None


def _tagged_union_hook(tag: str, by_value: dict[Any, type]) -> Callable[[Any, Any], Any]:
    def structure_tagged(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping) or value.get(tag) not in by_value:
            raise _PathError(
                f"expected an object with {tag} in {sorted(map(str, by_value))}, "
                f"got {_describe(value)}"
            )
        return _structure_attrs(value, by_value[value[tag]])

    return structure_tagged


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, _pytypes.UnionType)


def _field_specs(
    cls: type,
) -> tuple[list[tuple[str, str, Any, bool, bool]], dict[str, Any], set[str]]:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    specs = []
    fixed: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if not field.init:
            fixed[field.name] = field.default
            continue
        tp = hints[field.name]
        allows_none = _is_union(tp) and type(None) in typing.get_args(tp)
        specs.append(
            (field.name, field.alias or field.name, tp, field.default is attrs.NOTHING, allows_none)
        )
    return specs, fixed, {field.name for field in attrs.fields(cls)}


_SPEC_CACHE: dict[
    type, tuple[list[tuple[str, str, Any, bool, bool]], dict[str, Any], set[str]]
] = {}


def _structure_attrs(value: Any, cls: type[T]) -> T:
    if not isinstance(value, Mapping):
        raise _PathError(f"expected an object for {cls.__name__}, got {_describe(value)}")
    spec = _SPEC_CACHE.get(cls)
    if spec is None:
        spec = _SPEC_CACHE[cls] = _field_specs(cls)
    specs, fixed, known = spec
    strict = _strict.get()
    if strict:
        extra = value.keys() - known
        if extra:
            raise _PathError(f"unknown keys {sorted(extra)} for {cls.__name__}")
        for name, expected in fixed.items():
            if name in value and value[name] != expected:
                raise _PathError(f"{name} must be {expected!r}, got {_describe(value[name])}")
    kwargs: dict[str, Any] = {}
    for name, alias, tp, required, allows_none in specs:
        if name not in value:
            if required:
                raise _PathError(f"missing required key {name!r} for {cls.__name__}")
            continue
        item = value[name]
        if item is None and not allows_none:
            if required or strict:
                raise _PathError(f"{name} must not be null")
            continue
        kwargs[alias] = _guard(name, item, tp)
    try:
        return cls(**kwargs)
    except InvalidInputError as exc:
        raise _PathError(str(exc)) from exc
    except TypeError as exc:
        raise _PathError(f"cannot build {cls.__name__}: {exc}") from exc


# Whether the current decode forbids unknown keys and values (per thread of control).
_strict: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tinker_lite_wire_strict", default=False
)


def _is_attrs_model(tp: Any) -> bool:
    return isinstance(tp, type) and attrs.has(tp) and not _is_model(tp, "TensorData")


def _is_tensor_data(tp: Any) -> bool:
    return _is_model(tp, "TensorData")


def _is_any(tp: Any) -> bool:
    return tp is Any


def _is_ndarray(tp: Any) -> bool:
    np = sys.modules.get("numpy")  # an annotation names ndarray only once numpy is loaded
    return np is not None and (tp is np.ndarray or typing.get_origin(tp) is np.ndarray)


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Literal


def _is_list(tp: Any) -> bool:
    return tp is list or typing.get_origin(tp) is list


def _is_tuple(tp: Any) -> bool:
    return typing.get_origin(tp) is tuple


def _is_dict(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) in (dict, Mapping)


def _build_converter() -> cattrs.Converter:
    conv = cattrs.Converter()
    conv.register_unstructure_hook_factory(attrs.has, _unstructure_factory)
    # Class hooks also match subclasses (a str enum is a str), so each enum gets its own hook.
    for cls, hook in (
        (str, _struct_str),
        (int, _struct_int),
        (float, _struct_float),
        (bool, _struct_bool),
        (bytes, _struct_bytes),
        (datetime, _struct_datetime),
    ):
        conv.register_structure_hook(cls, hook)
    conv.register_structure_hook_func(_is_tensor_data, _struct_tensor)
    conv.register_structure_hook_func(_is_any, _struct_any)
    conv.register_structure_hook_func(_is_ndarray, _struct_any)
    conv.register_structure_hook_factory(_is_enum, _struct_enum_factory)
    conv.register_structure_hook_factory(_is_literal, _struct_literal)
    conv.register_structure_hook_factory(_is_list, _struct_list_factory)
    conv.register_structure_hook_factory(_is_tuple, _struct_tuple_factory)
    conv.register_structure_hook_factory(_is_dict, _struct_dict_factory)
    conv.register_structure_hook_factory(_is_union, _struct_union_factory)
    conv.register_structure_hook_func(_is_attrs_model, _structure_attrs)
    return conv


_converter = _build_converter()


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------


def _tree(obj: Any) -> Any:
    if attrs.has(type(obj)):
        return _converter.unstructure(obj)
    return _value(obj, "body")


# Exact powers of ten: float(10**i) is exact for i <= 22.
_POW10 = [float(10**i) for i in range(23)]


def _float32_values(arr: npt.NDArray[Any]) -> list[float]:
    """Return float32 values as Python floats whose repr is a short decimal for that float32.

    WIRE.md §P.2: the text must parse back to the same float32; `0.1` is preferred over the
    widened `0.10000000149011612`. Each value is rounded to the fewest significant digits (1-9)
    that still read back as the same float32; a value that cannot be shortened this way (very
    large or very small magnitudes) keeps its exact widened value.
    """
    import numpy as np

    pow10 = np.array(_POW10)
    wide = arr.astype(np.float64)
    result = wide.copy()
    index = np.flatnonzero(np.isfinite(wide) & (wide != 0))
    if index.size:
        values = wide[index]
        target = arr[index]
        magnitude = np.floor(np.log10(np.abs(values))).astype(np.int64)
        pending = np.ones(index.size, dtype=bool)
        for digits in range(1, 10):
            shift = digits - 1 - magnitude
            usable = pending & (np.abs(shift) <= 22)
            if not usable.any():
                break
            scale = pow10[np.clip(np.abs(shift), 0, 22)]
            up = shift >= 0
            # q / 10**k and q * 10**k are correctly rounded, so the double is the nearest one
            # to the decimal and its repr is that decimal.
            with np.errstate(over="ignore", invalid="ignore"):
                candidate = np.where(
                    up, np.round(values * scale) / scale, np.round(values / scale) * scale
                )
                good = usable & (candidate.astype(np.float32) == target)
            result[index[good]] = candidate[good]
            pending &= ~good
            if not pending.any():
                break
    values_list: list[float] = result.tolist()
    return values_list


def _json_default(value: Any) -> Any:
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype == np.float32:
            return _float32_values(value)
        return value.tolist()
    raise TypeError(f"cannot encode {type(value).__name__}")


def _builtins(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {key: _builtins(item) for key, item in tree.items()}
    if isinstance(tree, list):
        return [_builtins(item) for item in tree]
    np = sys.modules.get("numpy")
    if np is not None and isinstance(tree, np.ndarray):
        return _json_default(tree)
    return tree


def to_builtins(obj: Any) -> Any:
    """Return what :func:`dumps` would send, as Python builtins (dicts, lists, numbers, str)."""
    return _builtins(_tree(obj))


def dumps(obj: Any) -> bytes:
    """Encode a model (or a plain JSON-able value) as compact UTF-8 JSON per WIRE.md §P.1.

    Model fields that are None are left out; plain dicts and lists are written as given (a None
    there is sent as null). Raises InvalidInputError (naming the datum index and key) for
    NaN/Infinity and WireFormatError for values JSON cannot carry.
    """
    tree = _tree(obj)
    fast = _orjson
    try:
        if fast is not None:
            encoded: bytes = fast.dumps(tree, option=fast.OPT_SERIALIZE_NUMPY)
            return encoded
        return json.dumps(
            tree, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_json_default
        ).encode("utf-8")
    except (TypeError, ValueError) as exc:  # NaN/Inf were refused above, by _tree
        raise WireFormatError(f"cannot encode {type(obj).__name__} as JSON: {exc}") from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse a JSON body; raises WireFormatError when it is not valid JSON."""
    try:
        if _orjson is not None:
            return _orjson.loads(data)
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        return json.loads(data, parse_constant=_reject_constant)
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: the stdlib parser on a deeply nested body (orjson stops at 1024).
        preview = bytes(data[:80]) if not isinstance(data, str) else data[:80].encode()
        raise WireFormatError(f"body is not valid JSON ({exc}): {preview!r}") from exc


def structure(data: Any, cls: type[T], *, strict: bool = False) -> T:
    """Build a model from parsed JSON.

    Lenient by default: unknown keys are ignored and new enum values kept. ``strict=True``
    rejects unknown keys and values. Raises WireFormatError naming the path on a mismatch.
    """
    token = _strict.set(strict)
    try:
        result: T = _converter.structure(data, cls)
        return result
    except _PathError as exc:
        path = "".join(
            segment if segment.startswith("[") else f".{segment}" for segment in exc.path
        ).lstrip(".")
        where = f" at {path}" if path else ""
        raise WireFormatError(f"cannot read {_type_name(cls)}{where}: {exc.message}") from (
            exc.__cause__
        )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        if isinstance(exc, WireFormatError):
            raise
        raise WireFormatError(f"cannot read {_type_name(cls)}: {exc}") from exc
    finally:
        _strict.reset(token)


def _type_name(cls: Any) -> str:
    return getattr(cls, "__name__", repr(cls))


def decode(body: bytes | bytearray | memoryview | str, cls: type[T], *, strict: bool = False) -> T:
    """Parse a JSON body and build ``cls`` from it (see :func:`structure`)."""
    return structure(loads(body), cls, strict=strict)
