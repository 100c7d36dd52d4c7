"""Validators and array helpers shared by the models; each error names the field."""

from __future__ import annotations

import base64
import binascii
import enum
import math
import struct
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tinker_lite._errors import InvalidInputError

from .tensor_dtype import TensorDtype

_INT64_MAX = int(np.iinfo(np.int64).max)


_TOKEN_LIMIT = 2**31  # WIRE.md §13.7: tokens travel as int32 in protobuf bodies


_TOKEN_DTYPE = np.dtype(np.int32)


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
        # WIRE.md §3.6/§12: newer services may add values; keep them instead of failing to decode.
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
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidInputError(field, f"must be an integer, got {value!r}", hint)
    result = int(value)
    if minimum is not None and result < minimum:
        raise InvalidInputError(field, f"must be >= {minimum}, got {result}", hint)
    return result


def _check_opt_int(
    field: str, value: object, *, minimum: int | None = None, hint: str = ""
) -> int | None:
    return None if value is None else _check_int(field, value, minimum=minimum, hint=hint)


def _check_float(field: str, value: object, hint: str = "") -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise InvalidInputError(field, f"must be a number, got {value!r}", hint)
    if isinstance(value, (complex, np.complexfloating)):
        raise InvalidInputError(field, f"must be a real number, got {value!r}", hint)
    result = float(value)
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
    if not isinstance(value, (bool, np.bool_)):
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


def _token_ids(field: str, value: object) -> npt.NDArray[np.int32]:
    """Return ``value`` as token ids (ints in [0, 2**31)) in a new, read-only int32 array.

    Lists are checked in one pass by packing them as int32; numpy arrays and torch tensors by
    array operations. Raises InvalidInputError naming ``field`` for floats, bools, strings,
    negative or too large ids, and arrays of more than one dimension.
    """
    if isinstance(value, (list, tuple, range)):
        try:
            packed = struct.pack(f"={len(value)}i", *value)
        except (struct.error, TypeError, OverflowError):
            raise _bad_token(field, value) from None
        ids: npt.NDArray[np.int32] = np.frombuffer(packed, dtype=_TOKEN_DTYPE)
        # Packing accepts bools (they are ints) and anything with __index__; a bool can only
        # hide among the 0s and 1s, so only those positions are looked at.
        lowest = int(ids.min()) if ids.size else 2
        if lowest < 0 or (
            lowest <= 1 and any(isinstance(value[i], bool) for i in np.flatnonzero(ids <= 1))
        ):
            raise _bad_token(field, value)
        return ids
    if isinstance(value, (str, bytes)) or value is None:
        raise InvalidInputError(
            field, f"must be a sequence of token ids, got {type(value).__name__}"
        )
    arr = _as_ndarray(field, value)
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(
            field, f"token ids must be integers, got dtype {arr.dtype}", "pass ints"
        )
    if arr.ndim != 1:
        raise InvalidInputError(field, f"must be 1-D, got shape {list(arr.shape)}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= _TOKEN_LIMIT):
        raise _bad_token(field, arr[(arr < 0) | (arr >= _TOKEN_LIMIT)].tolist())
    ids = arr.astype(_TOKEN_DTYPE)
    ids.flags.writeable = False
    return ids


def _bad_token(field: str, values: Sequence[Any]) -> InvalidInputError:
    """Return the error naming the first value of ``values`` that is not a valid token id."""
    for position, token in enumerate(values):
        if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
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
    if isinstance(value, np.ndarray):
        return value
    if _is_torch_tensor(value):
        return _torch_to_numpy(value)
    if isinstance(value, (list, tuple, range, np.generic, int, float)):
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
    )


def _coerce_array(field: str, value: object, dtype: str | None) -> npt.NDArray[Any]:
    """Return ``value`` as a new C-contiguous np.float32 / np.int64 array (original shape).

    ``dtype`` None infers it from the values: float kinds -> float32, int/bool kinds -> int64.
    """
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


def _dtype_name(dtype: np.dtype[Any]) -> TensorDtype:
    return "float32" if dtype.kind == "f" else "int64"


def _image_bytes(field: str, value: object) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    elif isinstance(value, str):
        try:
            data = base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise InvalidInputError(
                field,
                "a str must be standard base64 (RFC 4648, with padding)",
                "pass the raw image bytes, or base64.b64encode(data).decode()",
            ) from None
    else:
        raise InvalidInputError(field, f"must be bytes or base64 text, got {type(value).__name__}")
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
