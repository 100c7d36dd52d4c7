"""Validators and array helpers shared by the models; each error names the field.

numpy is imported only where a numpy value needs it: values built from Python lists are kept in
stdlib ``array.array`` stores (int32 token ids, int64 / float32 tensor values), which numpy
reads without a copy when it is asked for (``to_numpy()``, the protobuf encoder). A value can
be a numpy object only once the program has imported numpy, so the type checks look numpy up in
``sys.modules`` instead of importing it.
"""

from __future__ import annotations

import base64
import binascii
import enum
import math
import struct
import sys
import warnings
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime
from operator import countOf
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from tinker_lite._errors import InvalidInputError

from .tensor_dtype import TensorDtype

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_INT64_MAX = 2**63 - 1


_TOKEN_LIMIT = 2**31  # docs/protocol.rst §3.4: tokens travel as int32 in protobuf bodies

# Typecodes of the stdlib stores: int32 token ids, int64 and float32 tensor values.
_INT32_CODE = "i"
_INT64_CODE = "q"
_FLOAT32_CODE = "f"
if array(_INT32_CODE).itemsize != 4 or array(_FLOAT32_CODE).itemsize != 4:  # pragma: no cover
    raise ImportError("tinker_lite needs a platform whose C int and float are 32 bits")

# Flat values of a tensor or a run of token ids: a stdlib array (built from Python lists) or a
# flat, read-only numpy array (built from numpy / torch values, or once numpy was asked for).
FlatValues: TypeAlias = Union["npt.NDArray[Any]", "array[Any]"]


# numpy's types by name, once numpy is loaded (checked on every model built from arrays).
_NUMPY_TYPES: dict[str, Any] = {}


def _numpy_type(name: str) -> Any:
    """Return numpy's ``name`` type for isinstance checks, or ``()`` when numpy is not loaded."""
    found = _NUMPY_TYPES.get(name)
    if found is None:
        found = getattr(sys.modules.get("numpy"), name, None)
        if found is None:
            return ()
        _NUMPY_TYPES[name] = found
    return found


def _is_numpy_array(value: object) -> bool:
    return isinstance(value, _NUMPY_TYPES.get("ndarray") or _numpy_type("ndarray"))


def _is_bool(value: object) -> bool:
    return isinstance(value, (bool, _numpy_type("bool_")))


def _is_integer(value: object) -> bool:
    """Whether ``value`` is an int or numpy integer (not a bool)."""
    if type(value) is int:
        return True
    return not _is_bool(value) and isinstance(value, (int, _numpy_type("integer")))


ImageFormat = Literal["png", "jpeg"]


class _LenientStrEnum(str, enum.Enum):
    """A str enum that reads any case and keeps values it does not know."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if not isinstance(value, str):
            return None
        lowered = value.strip().lower()
        for member in cls:
            if member.value == lowered:
                return member
        # docs/protocol.rst §4.4/§5.6: newer services may add values; keep them instead of failing
        # to decode.
        pseudo = str.__new__(cls, value)
        pseudo._name_ = value.upper()
        pseudo._value_ = value
        return pseudo

    @classmethod
    def is_known(cls, value: object) -> bool:
        """Return whether ``value`` is one of the values this release knows."""
        return isinstance(value, str) and value in cls._value2member_map_

    def __str__(self) -> str:
        return str(self.value)


def _check_int(field: str, value: object, *, minimum: int | None = None, hint: str = "") -> int:
    if not _is_integer(value):
        raise InvalidInputError(field, f"must be an integer, got {value!r}", hint)
    number: Any = value  # an int or a numpy integer, checked above
    result = int(number)
    if minimum is not None and result < minimum:
        raise InvalidInputError(field, f"must be >= {minimum}, got {result}", hint)
    return result


def _check_opt_int(
    field: str, value: object, *, minimum: int | None = None, hint: str = ""
) -> int | None:
    return None if value is None else _check_int(field, value, minimum=minimum, hint=hint)


def _check_float(field: str, value: object, hint: str = "") -> float:
    kind = type(value)
    if kind is not float and kind is not int:
        if _is_bool(value) or not isinstance(value, (int, float, _numpy_type("number"))):
            raise InvalidInputError(field, f"must be a number, got {value!r}", hint)
        if isinstance(value, (complex, _numpy_type("complexfloating"))):
            raise InvalidInputError(field, f"must be a real number, got {value!r}", hint)
    number: Any = value  # a real number, checked above
    result = float(number)
    if not math.isfinite(result):
        raise InvalidInputError(field, f"must be finite, got {result!r}", hint)
    return result


def _check_str(field: str, value: object, *, allow_empty: bool = False, hint: str = "") -> str:
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}", hint)
    if not allow_empty and not value:
        raise InvalidInputError(field, "must not be empty", hint)
    return value


def _check_opt_str(field: str, value: object, *, hint: str = "") -> str | None:
    return None if value is None else _check_str(field, value, hint=hint)


def _check_bool(field: str, value: object) -> bool:
    if not _is_bool(value):
        raise InvalidInputError(field, f"must be True or False, got {value!r}")
    return bool(value)


def _check_mapping(field: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(field, f"must be a dict, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise InvalidInputError(field, f"keys must be strings, got {key!r}")
    return dict(value)


def check_tinker_path(field: str, value: object) -> str:
    """Return ``value`` if it is a ``tinker://`` path; InvalidInputError naming ``field`` if not."""
    path = _check_str(field, value, hint="pass the tinker:// path returned by a save call")
    if not path.startswith("tinker://") or len(path) <= len("tinker://"):
        raise InvalidInputError(
            field,
            f"must be a tinker:// path, got {path!r}",
            "pass the path returned by save_state / save_weights_for_sampler, "
            "e.g. 'tinker://<run>/weights/<name>'",
        )
    return path


def _set(obj: object, name: str, value: object) -> None:
    # Normalise a field of a frozen instance during __attrs_post_init__.
    object.__setattr__(obj, name, value)


def _token_ids(field: str, value: object) -> FlatValues:
    """Return ``value`` as token ids (ints in [0, 2**31)) in a new int32 store.

    Lists, tuples and ranges are checked in one pass by packing them into an int32
    ``array.array`` (no numpy); numpy arrays and torch tensors by array operations, into a
    read-only int32 numpy array. Raises InvalidInputError naming ``field`` for floats, bools,
    strings, negative or too large ids, and arrays of more than one dimension.
    """
    if isinstance(value, (list, tuple, range)):
        try:
            ids = _packed(_INT32_CODE, value)
        except (struct.error, TypeError, OverflowError, DeprecationWarning):  # numpy<2 -W error
            raise _bad_token(field, value) from None
        # Packing accepts bools (they are ints; numpy < 2 packs its own too) and anything with
        # __index__; a bool can only hide among the 0s and 1s, so the types are looked at only
        # when there are some.
        np: Any = sys.modules.get("numpy") if len(ids) >= _NUMPY_FROM else None
        if np is not None:
            view = np.frombuffer(ids, dtype=np.int32)  # numpy's loops, on the same memory
            bools = (bool, np.bool_)
            if int(view.min()) < 0 or any(
                isinstance(value[i], bools) for i in np.flatnonzero(view <= 1)
            ):
                raise _bad_token(field, value)
        elif ids:
            lowest = min(ids)
            if lowest < 0 or (
                lowest <= 1
                and (
                    countOf(map(type, value), bool)
                    or countOf(map(type, value), _numpy_type("bool_"))
                )
            ):
                raise _bad_token(field, value)
        return ids
    if isinstance(value, (str, bytes)) or value is None:
        raise InvalidInputError(
            field, f"must be a sequence of token ids, got {type(value).__name__}"
        )
    import numpy as np

    arr = _as_ndarray(field, value)
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(
            field, f"token ids must be integers, got dtype {arr.dtype}", "pass ints"
        )
    if arr.ndim != 1:
        raise InvalidInputError(field, f"must be 1-D, got shape {list(arr.shape)}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= _TOKEN_LIMIT):
        raise _bad_token(field, arr[(arr < 0) | (arr >= _TOKEN_LIMIT)].tolist())
    result = arr.astype(np.int32)
    result.flags.writeable = False
    return result


def _bad_token(field: str, values: Sequence[Any]) -> InvalidInputError:
    """Return the error naming the first value of ``values`` that is not a valid token id."""
    for position, token in enumerate(values):
        if not _is_integer(token):
            text = repr(token)
            text = text if len(text) <= 40 else text[:37] + "..."
            return InvalidInputError(
                field, f"token ids must be integers, got {text} at position {position}", "pass ints"
            )
        if not 0 <= token < _TOKEN_LIMIT:
            return InvalidInputError(
                field,
                f"token ids must be in [0, 2**31), got {int(token)}",
                "token ids are non-negative vocabulary indices",
            )
    return InvalidInputError(field, "token ids must be integers in [0, 2**31)", "pass ints")


def _is_torch_tensor(value: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _torch_to_numpy(value: Any) -> npt.NDArray[Any]:
    tensor = value.detach().cpu()
    if tensor.is_sparse or getattr(tensor, "layout", None) not in (None, _torch_strided()):
        tensor = tensor.to_dense()
    if tensor.dtype.is_floating_point:
        # bfloat16/float16 have no exact numpy counterpart the wire can carry: widen first.
        tensor = tensor.to(dtype=sys.modules["torch"].float32)
    arr: npt.NDArray[Any] = tensor.numpy()
    return arr


def _torch_strided() -> Any:
    return sys.modules["torch"].strided


def _as_ndarray(field: str, value: object) -> npt.NDArray[Any]:
    """Return ``value`` (array, torch tensor, list, tuple, number) as a numpy array."""
    if _is_numpy_array(value):
        return value  # type: ignore[return-value]
    if _is_torch_tensor(value):
        return _torch_to_numpy(value)
    if isinstance(value, (list, tuple, range, array, int, float, _numpy_type("generic"))):
        import numpy as np

        try:
            return np.asarray(value)
        except (ValueError, TypeError) as exc:
            raise InvalidInputError(
                field,
                f"is ragged or not numeric ({exc})",
                "pass a rectangular list / array of numbers",
            ) from None
    raise InvalidInputError(
        field,
        f"must be a numpy array, a torch tensor or a list of numbers, got {type(value).__name__}",
        _container_hint(value),
    )


def _container_hint(value: object) -> str:
    """How to get the numbers out of a tokenizer's result, when ``value`` is one."""
    if isinstance(getattr(value, "ids", None), list):
        # tokenizers.Encoding, what a raw tokenizers.Tokenizer's encode() returns
        return "a tokenizers Encoding holds its token ids in .ids: pass encoding.ids"
    if isinstance(value, Mapping) and "input_ids" in value:
        # transformers' BatchEncoding (apply_chat_template's default result in transformers 5)
        return "pass its ['input_ids'], or call apply_chat_template(..., return_dict=False)"
    return ""


def _coerce_array(field: str, value: object, dtype: str | None) -> npt.NDArray[Any]:
    """Return ``value`` as a new C-contiguous np.float32 / np.int64 array (original shape).

    ``dtype`` None infers it from the values: float kinds -> float32, int/bool kinds -> int64.
    """
    import numpy as np

    arr = _as_ndarray(field, value)
    kind = arr.dtype.kind
    if kind == "O":
        raise InvalidInputError(
            field,
            "is ragged or holds non-numeric values (None, strings, objects)",
            "pass a rectangular array of numbers",
        )
    if kind not in "fiub":
        raise InvalidInputError(
            field,
            f"unsupported dtype {arr.dtype} (complex, string and date values cannot be sent)",
            "convert to float32 or int64",
        )
    if dtype is None:
        dtype = "float32" if kind == "f" else "int64"
    if dtype == "float32":
        return np.array(arr, dtype=np.float32, order="C", copy=True)
    if dtype != "int64":
        raise InvalidInputError(f"{field}.dtype", f"must be 'int64' or 'float32', got {dtype!r}")
    if kind == "f":
        if arr.size and not bool(np.all(np.isfinite(arr))):
            raise InvalidInputError(field, "int64 values must be finite, found NaN or Inf")
        if arr.size and not bool(np.all(arr == np.trunc(arr))):
            bad = arr[arr != np.trunc(arr)].flat[0]
            raise InvalidInputError(
                field,
                f"int64 values must be integral, got {float(bad)!r}",
                "round the values or send them as float32",
            )
        if arr.size and (float(arr.max()) >= 2.0**63 or float(arr.min()) < -(2.0**63)):
            raise InvalidInputError(field, "values overflow int64")
    elif kind == "u" and arr.dtype.itemsize == 8 and arr.size and int(arr.max()) > _INT64_MAX:
        raise InvalidInputError(
            field,
            f"uint64 value {int(arr.max())} overflows int64",
            "values must be < 2**63",
        )
    return np.array(arr, dtype=np.int64, order="C", copy=True)


# Python scalars a list may hold to be read without numpy.
_PLAIN_NUMBERS = frozenset({int, float, bool})
_ROWS = frozenset({list, tuple})

# Lists this long are read with numpy's C loops when the program has loaded numpy anyway;
# shorter ones, and every list while numpy is not loaded, item by item with the stdlib.
_NUMPY_FROM = 64

# float32 infinities as stored (native byte order), to spot an overflowing cast in one search.
_F32_INFINITIES = (struct.pack("=f", math.inf), struct.pack("=f", -math.inf))


def _coerce_values(field: str, value: object, dtype: str | None) -> tuple[FlatValues, list[int]]:
    """Return ``value`` as new flat values of ``dtype`` (float32 / int64) and its shape.

    A (nested, rectangular) list of Python numbers becomes a stdlib array without importing
    numpy; anything else (numpy arrays, torch tensors, lists holding other values) goes through
    :func:`_coerce_array`. The same checks and messages either way.
    """
    if (
        isinstance(value, (list, tuple, array))
        and dtype is not None
        and (len(value) < _NUMPY_FROM or "numpy" not in sys.modules)
    ):
        plain = _plain_values(field, value, dtype)
        if plain is not None:
            return plain
    arr = _coerce_array(field, value, dtype)
    shape = list(arr.shape)
    flat = arr.reshape(-1)
    flat.flags.writeable = False
    return flat, shape


def _plain_values(
    field: str, value: list[Any] | tuple[Any, ...] | array[Any], dtype: str
) -> tuple[FlatValues, list[int]] | None:
    """The stdlib path of :func:`_coerce_values`; None when ``value`` holds non-Python numbers."""
    flat, shape, kinds = _flatten(field, value)
    if not kinds <= _PLAIN_NUMBERS:
        return None  # None, strings, numpy scalars...: numpy's reading (and its errors)
    if dtype == "float32":
        try:
            values = _packed(_FLOAT32_CODE, flat)
        except (struct.error, OverflowError):
            # struct refuses what overflows float32; the array cast keeps it as inf, as numpy.
            try:
                values = array(_FLOAT32_CODE, flat)
            except OverflowError:
                raise InvalidInputError(
                    field, "holds an integer too large for float32", "pass finite numbers"
                ) from None
        stored = values.tobytes()
        # The byte search may also hit across two values: a hit is confirmed value by value.
        if any(inf in stored for inf in _F32_INFINITIES) and any(
            math.isinf(cast) and not math.isinf(given)
            for cast, given in zip(values, flat, strict=True)
        ):
            # As numpy warns on the same cast; the value is kept as inf, as numpy keeps it.
            warnings.warn("overflow encountered in cast", RuntimeWarning, stacklevel=4)
        return values, shape
    if dtype != "int64":
        raise InvalidInputError(f"{field}.dtype", f"must be 'int64' or 'float32', got {dtype!r}")
    if float in kinds:
        floats = [item for item in flat if type(item) is float]
        if not all(map(math.isfinite, floats)):
            raise InvalidInputError(field, "int64 values must be finite, found NaN or Inf")
        bad = next((item for item in floats if not item.is_integer()), None)
        if bad is not None:
            raise InvalidInputError(
                field,
                f"int64 values must be integral, got {bad!r}",
                "round the values or send them as float32",
            )
        flat = [int(item) for item in flat]
    try:
        return _packed(_INT64_CODE, flat), shape
    except (struct.error, OverflowError):
        raise InvalidInputError(
            field, "values overflow int64", "values must be in [-2**63, 2**63)"
        ) from None


def _packed(code: str, items: Sequence[Any]) -> array[Any]:
    """Return ``items`` in a new stdlib array of ``code`` (struct packs a list twice as fast)."""
    store = array(code)
    store.frombytes(struct.pack(f"={len(items)}{code}", *items))
    return store


def _flatten(
    field: str, value: list[Any] | tuple[Any, ...] | array[Any]
) -> tuple[Sequence[Any], list[int], set[type]]:
    """Return the items of a (nested) list in row-major order, its shape and the item types.

    A flat list is returned as it is (not copied). Raises InvalidInputError naming ``field``
    when the rows are ragged.
    """
    kinds = set(map(type, value))
    if not kinds & _ROWS:
        return value, [len(value)], kinds
    if not kinds <= _ROWS:
        raise _ragged(field)
    rows = [_flatten(field, item) for item in value]
    inner = rows[0][1]
    if any(row[1] != inner for row in rows):
        raise _ragged(field)
    flat: list[Any] = []
    kinds = set()
    for items, _, item_kinds in rows:
        flat.extend(items)
        kinds |= item_kinds
    return flat, [len(value), *inner], kinds


def _ragged(field: str) -> InvalidInputError:
    return InvalidInputError(
        field,
        "is ragged or not numeric (rows of different lengths or depths)",
        "pass a rectangular list / array of numbers",
    )


def _flat_numpy(values: FlatValues) -> npt.NDArray[Any]:
    """Return flat values as a read-only numpy array (a stdlib array is viewed, not copied)."""
    if isinstance(values, array):
        import numpy as np

        code = values.typecode
        dtype = np.int32 if code == _INT32_CODE else np.int64 if code == _INT64_CODE else np.float32
        view: npt.NDArray[Any] = np.frombuffer(values, dtype=dtype)
        view.flags.writeable = False
        return view
    return values


def _dtype_name(dtype: np.dtype[Any]) -> TensorDtype:
    return "float32" if dtype.kind == "f" else "int64"


def _binary(field: str, value: object, what: str) -> bytes:
    """Bytes given as a bytes-like value or as base64 text (the wire form); ``what`` names them."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise InvalidInputError(
                field,
                "a str must be standard base64 (RFC 4648, with padding)",
                f"pass the raw {what} bytes, or base64.b64encode(data).decode()",
            ) from None
    raise InvalidInputError(field, f"must be bytes or base64 text, got {type(value).__name__}")


def _image_bytes(field: str, value: object) -> bytes:
    data = _binary(field, value, "image")
    if not data:
        raise InvalidInputError(field, "must not be empty", "pass the encoded image bytes")
    return data


def _check_image_format(field: str, value: object) -> str:
    if value not in ("png", "jpeg"):
        raise InvalidInputError(field, f"must be 'png' or 'jpeg', got {value!r}")
    return str(value)


def _check_image_counts(owner: Any, name: str) -> None:
    for attr in ("expected_tokens", "height", "width", "tokens"):
        _set(owner, attr, _check_opt_int(f"{name}.{attr}", getattr(owner, attr), minimum=1))


def _check_save_name(field: str, value: object) -> None:
    if value is None:
        return
    name = _check_str(field, value, hint="a checkpoint name such as 'step-100'")
    if "/" in name or name.startswith("tinker://"):
        raise InvalidInputError(
            field,
            f"must be a bare checkpoint name, got {name!r}",
            "the service builds the tinker:// path; pass e.g. 'step-100'",
        )


def _check_event_common(event: Any) -> None:
    _check_str("event_id", event.event_id)
    _check_int("event_session_index", event.event_session_index, minimum=0)
    if event.severity not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise InvalidInputError("severity", f"unknown severity {event.severity!r}")
    if not isinstance(event.timestamp, datetime):
        raise InvalidInputError("timestamp", "must be a datetime")
