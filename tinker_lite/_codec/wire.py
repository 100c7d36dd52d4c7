"""The one converter between tinker_lite models and the wire's JSON.

docs/architecture.rst, "The codec", explains it; docs/protocol.rst §3.1 and §3.2 give the rules.
"""

from __future__ import annotations

import base64
import enum
import functools
import json
import re
import reprlib
import sys
import typing
from array import array
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.disambiguators import create_default_dis_func
from cattrs.fns import identity
from cattrs.gen import (
    make_dict_structure_fn,
    make_dict_unstructure_fn_from_attrs,
    override,
)
from cattrs.preconf.json import make_converter

from tinker_lite import types
from tinker_lite._codec.float32_text import float32_values
from tinker_lite._errors import InvalidInputError, RequestErrorCategory, WireFormatError

if TYPE_CHECKING:
    import numpy.typing as npt

_orjson: Any
try:  # the `fast` extra; read at call time, so tests can switch it off
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised by the no-orjson test via monkeypatch
    _orjson = None

__all__ = ["dumps", "loads", "structure", "to_builtins"]

T = TypeVar("T")
_NONE = type(None)


def _is_model(cls: Any, name: str) -> bool:
    """Whether ``cls`` is ``types.<name>`` (its module is imported only on a name match)."""
    return getattr(cls, "__name__", None) == name and getattr(types, name) is cls


def _admits_none(tp: Any) -> bool:
    return tp is Any or (_is_union(tp) and _NONE in typing.get_args(tp))


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, type(int | str))


# Unstructure hooks. The "Hook:" comments say what the wire wants that preconf does not do.


def _format_datetime(value: datetime) -> str:
    # Hook: UTC with a `Z` suffix (docs/protocol.rst §9).
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    spec = "microseconds" if value.microsecond else "seconds"
    return value.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def _finite_float(value: float) -> float:
    # Hook: NaN/Infinity refused (orjson would write null).
    if value - value == 0.0:
        return value if value.__class__ is float else float(value)
    raise InvalidInputError(
        "value", f"is {value!r}", "JSON cannot carry NaN or Infinity; send a finite number"
    )


def _base64_text(value: bytes | bytearray | memoryview) -> str:
    # Hook: standard base64, not base85.
    return base64.b64encode(bytes(value)).decode("ascii")


def _check_finite(arr: npt.NDArray[Any]) -> None:
    import numpy as np

    if arr.size and not bool(np.isfinite(arr).all()):
        position = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InvalidInputError(
            "TensorData.data",
            f"holds {float(arr.flat[position])!r} at position {position}",
            "JSON cannot carry NaN or Infinity; replace or mask those values",
        )


def _unstructure_tensor(tensor: types.TensorData) -> dict[str, Any]:
    # Hook: the values live in a store cattrs cannot read; float32 goes to the encoder as an array.
    data: Any = tensor._values
    if tensor.dtype == "float32":
        data = tensor._numpy
        _check_finite(data)
    elif isinstance(data, array):
        data = data.tolist()  # int64 values built from a list: written without numpy
    out: dict[str, Any] = {"data": data, "dtype": tensor.dtype}
    if tensor.shape is not None:
        out["shape"] = list(tensor.shape)
    if tensor.sparse_crow_indices is not None:
        out["sparse_crow_indices"] = tensor.sparse_crow_indices
        out["sparse_col_indices"] = tensor.sparse_col_indices
    return out


def _unstructure_text_chunk(chunk: types.EncodedTextChunk) -> dict[str, Any]:
    # Hook: `tokens` would copy the int32 store into a list kept on the chunk.
    ids = chunk._current_ids()
    if ids is None or isinstance(ids, array):
        return {"tokens": chunk.tokens, "type": "encoded_text"}
    return {"tokens": ids, "type": "encoded_text"}


def _array_value(arr: npt.NDArray[Any]) -> npt.NDArray[Any]:
    import numpy as np

    if arr.dtype.kind == "f":
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        _check_finite(arr)
    elif arr.dtype.kind in "iub":
        arr = np.ascontiguousarray(arr, dtype=np.int64)
    else:
        raise InvalidInputError("value", f"unsupported dtype {arr.dtype}")
    return arr


def _unstructure_other(cls: Any) -> Callable[[Any], Any]:
    """The hook of a type no other hook takes: JSON scalars, numpy values, or a refusal."""
    if not isinstance(cls, type) or cls in (int, bool, _NONE):
        return identity
    if issubclass(cls, (bytearray, memoryview)):
        return _base64_text
    np = sys.modules.get("numpy")  # a value can be a numpy object only once numpy is loaded
    if np is not None and issubclass(cls, np.ndarray):
        return _array_value
    if np is not None and issubclass(cls, np.generic):
        return lambda value: _converter.unstructure(value.item())
    name = cls.__name__

    def refuse(value: Any) -> Any:
        raise InvalidInputError(
            "value", f"cannot be sent as JSON: {name}", "use numbers, strings, lists, dicts"
        )

    return refuse


# By class name: the models are looked up (and their modules imported) only when one is met.
_SPECIAL_UNSTRUCTURE: dict[str, Callable[[Any], dict[str, Any]]] = {
    "TensorData": _unstructure_tensor,
    "EncodedTextChunk": _unstructure_text_chunk,
}


# The keys a model sends where that is not its fields in order (docs/protocol.rst §3.1).
_WIRE_KEYS: dict[str, tuple[str, ...]] = {"Datum": ("loss_fn_inputs", "model_input")}


def _unstructure_model_factory(cls: type, conv: cattrs.Converter) -> Callable[[Any], Any]:
    special = _SPECIAL_UNSTRUCTURE.get(cls.__name__)
    if special is not None and _is_model(cls, cls.__name__):
        return special
    attrs.resolve_types(cls)
    fields = attrs.fields_dict(cls)
    keys = _WIRE_KEYS.get(cls.__name__)
    if keys is None or not _is_model(cls, cls.__name__):
        keys = tuple(fields)
    sent = [fields[key] for key in keys]
    generated: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn_from_attrs(
        sent, cls, conv, _cattrs_include_init_false=True
    )
    # Hook: None fields are left out (docs/protocol.rst §3.1); cattrs' omit_if_default compares
    # with the default instead, and reorders.
    nullable: frozenset[str] = getattr(cls, "_wire_nullable", frozenset())
    omitted = tuple(
        field.name for field in sent if _admits_none(field.type) and field.name not in nullable
    )
    if not omitted:
        return generated

    def unstructure_model(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = generated(obj)
        for name in omitted:
            if out[name] is None:
                del out[name]
        return out

    return unstructure_model


# Structure hooks. Scalar hooks refuse what preconf would coerce (int("8"), str(5), bool("no")).

_PREVIEW = reprlib.Repr()
_PREVIEW.maxlevel = 3
_PREVIEW.maxstring = 60
_PREVIEW.maxother = 60


def _describe(value: Any) -> str:
    """A bounded preview: a huge answer is never repr'd whole."""
    text = _PREVIEW.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _structure_int(value: Any, _: Any) -> int:
    if value.__class__ is int:
        return value
    if value.__class__ is float and value.is_integer():
        return int(value)
    raise WireFormatError(f"expected an integer, got {_describe(value)}")


def _structure_float(value: Any, _: Any) -> float:
    if value.__class__ is float or value.__class__ is int:
        return float(value)
    raise WireFormatError(f"expected a number, got {_describe(value)}")


def _structure_bool(value: Any, _: Any) -> bool:
    if value.__class__ is bool:
        return value
    raise WireFormatError(f"expected true or false, got {_describe(value)}")


def _structure_str(value: Any, tp: Any, *, strict: bool) -> Any:
    if tp is not str:
        # A str enum reaches the str hook (cattrs dispatches along the MRO).
        return _structure_enum(value, tp, strict=strict)
    if value.__class__ is str or isinstance(value, str):
        return value
    raise WireFormatError(f"expected a string, got {_describe(value)}")


def _structure_enum(value: Any, cls: type[enum.Enum], *, strict: bool) -> Any:
    # Hook: new values kept when lenient, refused when strict (docs/protocol.rst §4.4, §5.6).
    known = cls._value2member_map_
    if not isinstance(value, str):
        raise WireFormatError(f"expected one of {sorted(known)}, got {_describe(value)}")
    if cls is RequestErrorCategory:
        # docs/protocol.rst §5.1: capitalised forms are read too.
        if strict and value.lower() not in known:
            raise WireFormatError(f"expected one of {sorted(known)}, got {value!r}")
        return RequestErrorCategory.parse(value)
    if strict and value not in known:
        raise WireFormatError(f"expected one of {sorted(known)}, got {value!r}")
    return cls(value)


def _structure_base64(value: Any, _: Any) -> Any:
    # Hook: base64 text, which the model decodes; preconf reads base85.
    if isinstance(value, (str, bytes)):
        return value
    raise WireFormatError(f"expected base64 text, got {_describe(value)}")


_FRACTION = re.compile(r"\.(\d+)")


def _structure_datetime(value: Any, _: Any) -> datetime:
    # Hook: `Z`, any number of fraction digits (3.10's fromisoformat takes neither), or epoch.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise WireFormatError(f"timestamp {_describe(value)} is out of range") from None
    if not isinstance(value, str):
        raise WireFormatError(f"expected an ISO-8601 datetime, got {_describe(value)}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise WireFormatError(f"expected an ISO-8601 datetime, got {_describe(value)}") from None


_TENSOR_KEYS = frozenset({"data", "dtype", "shape", "sparse_crow_indices", "sparse_col_indices"})


def _structure_tensor(value: Any, _: Any, *, strict: bool) -> types.TensorData:
    # Hook: the constructor fills the model's own store and checks the sparse layout.
    if not isinstance(value, Mapping):
        raise WireFormatError(f"expected a tensor object, got {_describe(value)}")
    if strict and value.keys() - _TENSOR_KEYS:
        raise WireFormatError(f"unknown keys {sorted(value.keys() - _TENSOR_KEYS)}")
    if "data" not in value or "dtype" not in value:
        raise WireFormatError("a tensor needs 'data' and 'dtype'")
    if value.get("sparse_crow_indices") is not None:
        # docs/protocol.rst §3.3: kept sparse, as the official SDK does; to_numpy() densifies.
        shape = value.get("shape")
        if not isinstance(shape, list) or len(shape) != 2 or any(type(d) is not int for d in shape):
            raise WireFormatError("a sparse tensor needs a 2-D shape")
        if value.get("sparse_col_indices") is None:
            raise WireFormatError("a sparse tensor needs 'sparse_col_indices'")
        return types.TensorData(
            data=value["data"],
            dtype=value["dtype"],
            shape=shape,
            sparse_crow_indices=value["sparse_crow_indices"],
            sparse_col_indices=value["sparse_col_indices"],
        )
    return types.TensorData(data=value["data"], dtype=value["dtype"], shape=value.get("shape"))


def _is_list(tp: Any) -> bool:
    return tp is list or typing.get_origin(tp) is list


def _list_factory(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    # Hook: only a JSON array is a list; a list of plain numbers is taken in one pass.
    items = list_structure_factory(tp, conv)
    args = typing.get_args(tp)
    number = args[0] if args and args[0] in (int, float) else None

    def structure_list(value: Any, _: Any) -> list[Any]:
        if value.__class__ is not list:
            raise WireFormatError(f"expected a list, got {_describe(value)}")
        if number is not None and all(item.__class__ is number for item in value):
            return value[:]
        result: list[Any] = items(value, tp)
        return result

    return structure_list


def _is_models_union(tp: Any) -> bool:
    if not _is_union(tp):
        return False
    members = [arg for arg in typing.get_args(tp) if arg is not _NONE]
    return len(members) > 1 and all(isinstance(arg, type) and attrs.has(arg) for arg in members)


def _models_union_factory(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Read a union of models by their literal tag, or by their keys for untagged 0.4.1 chunks."""
    members = tuple(arg for arg in typing.get_args(tp) if arg is not _NONE)
    optional = len(members) < len(typing.get_args(tp))
    by_tag = create_default_dis_func(conv, *members)
    untagged = None
    if {cls.__name__ for cls in members} == _CHUNK_NAMES:
        untagged = create_default_dis_func(conv, *members, use_literals=False)
    hooks = {cls: conv.get_structure_hook(cls) for cls in members}
    expected = " | ".join(cls.__name__ for cls in members)

    def structure_union(value: Any, _: Any) -> Any:
        if value is None and optional:
            return None
        try:
            cls = by_tag(value)
        except (KeyError, ValueError):
            if untagged is None or not isinstance(value, Mapping) or "type" in value:
                raise WireFormatError(f"expected {expected}, got {_describe(value)}") from None
            cls = untagged(value)
        return hooks[cls](value, cls)

    return structure_union


_CHUNK_NAMES = frozenset({"EncodedTextChunk", "ImageChunk", "ImageAssetPointerChunk", "DmelChunk"})


def _passed_to_model(value: Any, _: Any) -> Any:
    return value


def _structure_model_factory(
    cls: type, conv: cattrs.Converter, *, strict: bool
) -> Callable[[Any, Any], Any]:
    if _is_model(cls, "TensorData"):
        return functools.partial(_structure_tensor, strict=strict)
    attrs.resolve_types(cls)
    fields = attrs.fields(cls)
    # Unions cattrs cannot tell apart are read by the model's converter, token ids by its packing.
    passed = [
        field.name
        for field in fields
        if field.converter is not None
        and _is_union(field.type)
        and not _is_models_union(field.type)
    ]
    if _is_model(cls, "EncodedTextChunk"):
        passed.append("tokens")
    overrides: dict[str, Any] = {name: override(struct_hook=_passed_to_model) for name in passed}
    generated: Callable[[Any, Any], Any] = make_dict_structure_fn(cls, conv, **overrides)
    name = cls.__name__
    # Hook: init=False tags, which cattrs skips: strictly, they must hold their value.
    fixed = {field.name: field.default for field in fields if not field.init}
    # Hook: leniently, a null stands for an absent key where None is not allowed.
    defaulted = tuple(
        field.name
        for field in fields
        if field.init and field.default is not attrs.NOTHING and not _admits_none(field.type)
    )

    def structure_model(value: Any, _: Any) -> Any:
        if value.__class__ is not dict and not isinstance(value, Mapping):
            raise WireFormatError(f"expected an object for {name}, got {_describe(value)}")
        if strict:
            if fixed and not fixed.keys().isdisjoint(value):
                for key, expected in fixed.items():
                    if key in value and value[key] != expected:
                        raise WireFormatError(
                            f"{key} must be {expected!r}, got {_describe(value[key])}"
                        )
                value = {key: item for key, item in value.items() if key not in fixed}
        else:
            for key in defaulted:
                if key in value and value[key] is None:
                    value = {k: v for k, v in value.items() if v is not None or k not in defaulted}
                    break
        return generated(value, cls)

    return structure_model


@functools.cache
def _make_converter(*, strict: bool, detailed: bool) -> cattrs.Converter:
    """preconf json with the wire's hooks; ``detailed`` only once a fast read has failed."""
    conv = make_converter(
        forbid_extra_keys=strict,
        detailed_validation=detailed,
        unstructure_fallback_factory=_unstructure_other,
        unstruct_collection_overrides={tuple: list},
    )
    conv.register_unstructure_hook(float, _finite_float)
    conv.register_unstructure_hook(bytes, _base64_text)
    conv.register_unstructure_hook(datetime, _format_datetime)
    conv.register_unstructure_hook_factory(attrs.has, _unstructure_model_factory)
    for scalar, hook in (
        (str, functools.partial(_structure_str, strict=strict)),
        (int, _structure_int),
        (float, _structure_float),
        (bool, _structure_bool),
        (bytes, _structure_base64),
        (datetime, _structure_datetime),
    ):
        conv.register_structure_hook(scalar, hook)
    conv.register_structure_hook_factory(_is_list, _list_factory)
    conv.register_structure_hook_factory(_is_models_union, _models_union_factory)
    conv.register_structure_hook_factory(
        attrs.has, functools.partial(_structure_model_factory, strict=strict)
    )
    return conv


_converter = _make_converter(strict=False, detailed=False)


def _tree(obj: Any) -> Any:
    try:
        return _converter.unstructure(obj)
    except InvalidInputError as exc:
        path = _refused_at(obj).lstrip(".")
        raise InvalidInputError(path or exc.field, exc.problem, exc.hint) from None


def _refused_at(value: Any) -> str:
    """The path to the part of ``value`` the converter refuses (slow: after a refusal)."""
    if attrs.has(type(value)):
        if type(value).__name__ in _SPECIAL_UNSTRUCTURE:
            return ""
        steps: Any = ((f".{f.name}", getattr(value, f.name)) for f in attrs.fields(type(value)))
    elif isinstance(value, Mapping):
        steps = ((f"[{key!r}]", item) for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        steps = ((f"[{index}]", item) for index, item in enumerate(value))
    else:
        return ""
    for step, item in steps:
        try:
            _converter.unstructure(item)
        except InvalidInputError:
            # A ForwardBackwardInput holds the caller's arguments: the path starts there.
            within = _refused_at(item)
            return within if _is_model(type(item), "ForwardBackwardInput") else step + within
    return ""


def _json_default(value: Any) -> Any:
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype == np.float32:
            return float32_values(value)
        return value.tolist()
    raise TypeError(f"cannot encode {type(value).__name__}")


def _builtins(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {key: _builtins(item) for key, item in tree.items()}
    if isinstance(tree, list):
        return [_builtins(item) for item in tree]
    if isinstance(tree, enum.Enum):
        return tree.value
    np = sys.modules.get("numpy")
    if np is not None and isinstance(tree, np.ndarray):
        return _json_default(tree)
    return tree


def to_builtins(obj: Any) -> Any:
    """Return what :func:`dumps` would send, as Python builtins (dicts, lists, numbers, str)."""
    return _builtins(_tree(obj))


def dumps(obj: Any) -> bytes:
    """Encode a model or a JSON-able value as compact UTF-8 JSON (docs/protocol.rst §3.1).

    InvalidInputError (naming the path) for NaN/Infinity; WireFormatError for what JSON cannot
    carry.
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
    except (TypeError, ValueError) as exc:
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
        if isinstance(exc, json.JSONDecodeError):
            exc.doc = ""  # the cause keeps no copy of the body (it may echo a credential)
        raise WireFormatError(f"body is not valid JSON ({exc}): {preview!r}") from exc


# Why the wire's JSON cannot be read: cattrs' exception groups -> a WireFormatError naming the
# path (``at data[0].loss_fn_inputs``) and what was expected there.


def _first_problem(
    exc: BaseException, path: str = "", tp: Any = None
) -> tuple[str, str, BaseException]:
    """The path, description and exception of a cattrs exception group's first error."""
    if isinstance(exc, cattrs.BaseValidationError):
        for inner in exc.exceptions:
            for note in getattr(inner, "__notes__", ()):
                if isinstance(note, cattrs.AttributeValidationNote):
                    if isinstance(inner, KeyError) and inner.args == (note.name,):
                        return path, f"missing required key {note.name!r}", inner
                    return _first_problem(inner, f"{path}.{note.name}", note.type)
                if isinstance(note, cattrs.IterableValidationNote):
                    return _first_problem(inner, f"{path}[{note.index!r}]", note.type)
        return _first_problem(exc.exceptions[0], path, tp)
    return path, _describe_error(exc, tp), exc


def _describe_error(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, (WireFormatError, InvalidInputError)):
        return str(exc)
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown keys {sorted(exc.extra_fields)} for {exc.cl.__name__}"
    if isinstance(exc, KeyError):
        return f"missing required key {exc.args[0]!r}"
    if isinstance(exc, AttributeError):
        return "expected an object"
    if typing.get_origin(tp) is typing.Literal:
        return f"expected one of {list(typing.get_args(tp))}"
    return f"expected {_type_name(tp)}: {exc}" if tp is not None else str(exc)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def structure(data: Any, cls: type[T], *, strict: bool = False) -> T:
    """Build a model from parsed JSON, leniently unless ``strict`` (docs/protocol.rst §2.6).

    WireFormatError names the path and what was expected there.
    """
    conv = _make_converter(strict=True, detailed=False) if strict else _converter
    try:
        result: T = conv.structure(data, cls)
    except Exception as fast_error:
        # Any failure is read again by the detailed converter, for its path (cattrs never escapes).
        try:
            _make_converter(strict=strict, detailed=True).structure(data, cls)
        except Exception as exc:  # cattrs' exception group, or an error before any field
            path, problem, cause = _first_problem(exc)
        else:  # pragma: no cover - both modes run the same hooks
            path, problem, cause = "", _describe_error(fast_error, None), fast_error
        where = f" at {path.lstrip('.')}" if path else ""
        raise WireFormatError(f"cannot read {_type_name(cls)}{where}: {problem}") from cause
    return result
