"""Wire models of the Tinker API, with the official SDK's public names.

``from tinker_lite import types`` reads like ``from tinker import types``: requests, results, model
inputs, tensors and REST records are frozen, slotted attrs classes. Every constructor validates
its arguments and raises :class:`~tinker_lite.InvalidInputError` naming the field and how to fix
it, so nothing malformed can be sent. Serialization lives in ``tinker_lite._wire``, not here.

This module imports only the standard library, attrs, numpy and ``tinker_lite._errors``. torch is
never imported unless the caller already has it (``TensorData.from_torch`` / ``to_torch``).
"""

from __future__ import annotations

import base64
import binascii
import enum
import math
import os
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
import numpy.typing as npt

from tinker_lite._errors import InvalidInputError, RequestErrorCategory

__all__ = [
    "KNOWN_LOSS_FNS",
    "LOSS_FN_INPUT_DTYPES",
    "AdamParams",
    "AuthTokenResponse",
    "Checkpoint",
    "CheckpointArchiveUrlResponse",
    "CheckpointType",
    "CheckpointsListResponse",
    "ClientConfigRequest",
    "ClientConfigResponse",
    "CreateModelRequest",
    "CreateModelResponse",
    "CreateSamplingSessionRequest",
    "CreateSamplingSessionResponse",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "Cursor",
    "Datum",
    "DynamicConfigResponse",
    "EncodedTextChunk",
    "ForwardBackwardInput",
    "ForwardBackwardOutput",
    "ForwardBackwardRequest",
    "ForwardRequest",
    "FutureMetadataResponse",
    "FutureRetrieveRequest",
    "GenericEvent",
    "GetInfoRequest",
    "GetInfoResponse",
    "GetSamplerResponse",
    "GetServerCapabilitiesResponse",
    "GetSessionResponse",
    "HealthResponse",
    "ImageAssetPointerChunk",
    "ImageChunk",
    "JoinSamplingSessionRequest",
    "ListSessionsResponse",
    "LoadWeightsRequest",
    "LoadWeightsResponse",
    "LoraConfig",
    "LossFnType",
    "ModelData",
    "ModelInput",
    "ModelInputChunk",
    "OptimStepRequest",
    "OptimStepResponse",
    "ParsedCheckpointTinkerPath",
    "QueueState",
    "RequestErrorCategory",
    "RequestFailedResponse",
    "SampleRequest",
    "SampleResponse",
    "SampledSequence",
    "SamplingParams",
    "SaveWeightsForSamplerRequest",
    "SaveWeightsForSamplerResponse",
    "SaveWeightsForSamplerResponseInternal",
    "SaveWeightsRequest",
    "SaveWeightsResponse",
    "SessionEndEvent",
    "SessionFinishReason",
    "SessionFinishRequest",
    "SessionHeartbeatRequest",
    "SessionHeartbeatResponse",
    "SessionStartEvent",
    "SetCheckpointTTLRequest",
    "StopReason",
    "SupportedModel",
    "TelemetryEvent",
    "TelemetryResponse",
    "TelemetrySendRequest",
    "TensorData",
    "TrainingRun",
    "TrainingRunsResponse",
    "TryAgainResponse",
    "UnhandledExceptionEvent",
    "UnloadModelRequest",
    "UnloadModelResponse",
    "UntypedAPIFuture",
    "WeightsInfoRequest",
    "WeightsInfoResponse",
    "check_loss_fn",
    "check_tinker_path",
]

# The environment variable that lets a loss function unknown to this release through.
ALLOW_UNKNOWN_LOSS_ENV = "TINKER_LITE_ALLOW_UNKNOWN_LOSS"

_INT64_MAX = int(np.iinfo(np.int64).max)
_TOKEN_LIMIT = 2**31  # WIRE.md §13.7: tokens travel as int32 in protobuf bodies
_TOKEN_DTYPE = np.dtype(np.int32)

TensorDtype = Literal["int64", "float32"]
ImageFormat = Literal["png", "jpeg"]
CheckpointType = Literal["training", "sampler"]
Severity = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


# ---------------------------------------------------------------------------------------------
# Enums
# ---------------------------------------------------------------------------------------------


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


class StopReason(_LenientStrEnum):
    """Why a sampled sequence ended (``seq.stop_reason == "length"`` works)."""

    LENGTH = "length"
    STOP = "stop"


class QueueState(_LenientStrEnum):
    """The service's queue state for a waiting request (WIRE.md §12)."""

    ACTIVE = "active"
    PAUSED_RATE_LIMIT = "paused_rate_limit"
    PAUSED_CAPACITY = "paused_capacity"
    UNKNOWN = "unknown"


class LossFnType(str, enum.Enum):
    """Loss functions the service implements (WIRE.md §3.4, §13.3)."""

    CROSS_ENTROPY = "cross_entropy"
    IMPORTANCE_SAMPLING = "importance_sampling"
    PPO = "ppo"
    CISPO = "cispo"
    DRO = "dro"

    def __str__(self) -> str:
        return self.value


KNOWN_LOSS_FNS: tuple[str, ...] = tuple(member.value for member in LossFnType)


def check_loss_fn(name: object) -> str:
    """Return ``name`` as a loss function name, or raise InvalidInputError listing the known ones.

    A loss function added to the service after this release is let through when the environment
    variable ``TINKER_LITE_ALLOW_UNKNOWN_LOSS=1`` is set.
    """
    if isinstance(name, LossFnType):
        return name.value
    if not isinstance(name, str) or not name:
        raise InvalidInputError(
            "loss_fn",
            f"must be a non-empty string, got {name!r}",
            f"use one of {', '.join(KNOWN_LOSS_FNS)}",
        )
    if name in KNOWN_LOSS_FNS or os.environ.get(ALLOW_UNKNOWN_LOSS_ENV) == "1":
        return name
    raise InvalidInputError(
        "loss_fn",
        f"unknown loss function {name!r}",
        f"use one of {', '.join(KNOWN_LOSS_FNS)}; to send a loss function newer than this "
        f"release, set {ALLOW_UNKNOWN_LOSS_ENV}=1",
    )


# ---------------------------------------------------------------------------------------------
# Small validators (each raises InvalidInputError naming the field)
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Tokens and arrays
# ---------------------------------------------------------------------------------------------


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


# WIRE.md §2.5: dtype of a Python list per loss_fn_inputs key.
LOSS_FN_INPUT_DTYPES: Mapping[str, TensorDtype] = {
    "target_tokens": "int64",
    "weights": "float32",
    "advantages": "float32",
    "logprobs": "float32",
    "clip_low_threshold": "float32",
    "clip_high_threshold": "float32",
}
# Keys aligned with model_input: one value per input position.
_PER_TOKEN_KEYS = frozenset({"target_tokens", "weights", "advantages", "logprobs"})


def _tensor_data_eq(a: TensorData, b: object) -> bool:
    if not isinstance(b, TensorData):
        return NotImplemented  # type: ignore[no-any-return]
    # A missing shape means a flat tensor, so shape None equals [size].
    shape_a = a.shape if a.shape is not None else [a.data.size]
    shape_b = b.shape if b.shape is not None else [b.data.size]
    return a.dtype == b.dtype and shape_a == shape_b and bool(np.array_equal(a.data, b.data))


@attrs.frozen(eq=False)
class TensorData:
    """A tensor as the wire carries it: flat ``data``, ``dtype`` and optional ``shape``.

    ``data`` accepts a numpy array, a torch tensor or a (nested) list; it is stored as a flat,
    C-contiguous, read-only ``np.float32`` / ``np.int64`` array. Values are cast to ``dtype``
    (float64/float16 -> float32, smaller ints and bool -> int64); non-integral values for
    ``int64``, complex, string and object values are rejected.
    """

    data: npt.NDArray[Any]
    dtype: TensorDtype
    shape: list[int] | None = None

    def __attrs_post_init__(self) -> None:
        dtype: Any = self.dtype
        if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and dtype is not str):
            dtype = _dtype_name(np.dtype(dtype))
        if dtype not in ("int64", "float32"):
            raise InvalidInputError(
                "TensorData.dtype", f"must be 'int64' or 'float32', got {dtype!r}"
            )
        arr = _coerce_array("TensorData.data", self.data, dtype)
        shape: Any = self.shape
        if shape is not None:
            if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
                raise InvalidInputError(
                    "TensorData.shape", f"must be a list of ints, got {shape!r}"
                )
            shape = [_check_int("TensorData.shape", d, minimum=0) for d in shape]
            if math.prod(shape) != arr.size:
                raise InvalidInputError(
                    "TensorData.shape",
                    f"shape {shape} holds {math.prod(shape)} values but data has {arr.size}",
                    "make the shape match the number of values",
                )
        elif arr.ndim > 1:
            shape = list(arr.shape)
        flat = arr.reshape(-1)
        flat.flags.writeable = False
        _set(self, "dtype", dtype)
        _set(self, "data", flat)
        _set(self, "shape", shape)

    __eq__ = _tensor_data_eq
    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def _trusted(
        cls, data: npt.NDArray[Any], dtype: TensorDtype, shape: list[int] | None
    ) -> TensorData:
        # For arrays a decoder or converter has already checked: flat, C-contiguous, read-only,
        # of `dtype`, holding math.prod(shape) values. Skips checking and copying them again.
        tensor = object.__new__(cls)
        object.__setattr__(tensor, "data", data)
        object.__setattr__(tensor, "dtype", dtype)
        object.__setattr__(tensor, "shape", shape)
        return tensor

    @classmethod
    def _own(cls, arr: npt.NDArray[Any]) -> TensorData:
        # `arr` is a new array from _coerce_array, which nothing else holds: kept, not copied.
        flat = arr.reshape(-1)
        flat.flags.writeable = False
        return cls._trusted(flat, _dtype_name(arr.dtype), list(arr.shape))

    @classmethod
    def from_numpy(cls, array: npt.NDArray[Any]) -> TensorData:
        """Build from a numpy array: dtype from its kind (float -> float32, int/bool -> int64)."""
        return cls._own(_coerce_array("array", array, None))

    @classmethod
    def from_torch(cls, tensor: Any) -> TensorData:
        """Build from a torch tensor (any float -> float32, any int/bool -> int64)."""
        if not _is_torch_tensor(tensor):
            raise InvalidInputError(
                "tensor", f"must be a torch.Tensor, got {type(tensor).__name__}"
            )
        return cls.from_numpy(_torch_to_numpy(tensor))

    @classmethod
    def from_list(cls, values: Sequence[Any], dtype: TensorDtype) -> TensorData:
        """Build from a (nested, rectangular) list cast to ``dtype``, keeping its shape."""
        return cls._own(_coerce_array("values", values, dtype))

    def to_numpy(self) -> npt.NDArray[Any]:
        """Return a writable copy of the values, reshaped to ``shape`` when it is set."""
        arr: npt.NDArray[Any] = self.data.copy()
        return arr.reshape(self.shape) if self.shape is not None else arr

    def to_torch(self) -> Any:
        """Return the values as a torch tensor (needs torch installed)."""
        try:
            import torch
        except ImportError as exc:
            raise InvalidInputError(
                "to_torch", "torch is not installed", "pip install torch, or use to_numpy()"
            ) from exc
        return torch.from_numpy(self.to_numpy())

    def tolist(self) -> list[Any]:
        """Return the flat values as a Python list."""
        result: list[Any] = self.data.tolist()
        return result

    @property
    def size(self) -> int:
        """Number of values."""
        return int(self.data.size)


def _dtype_name(dtype: np.dtype[Any]) -> TensorDtype:
    return "float32" if dtype.kind == "f" else "int64"


# A sparse tensor is expanded to dense; refuse shapes no real request has (hostile input).
_MAX_DENSE_ELEMENTS = 1 << 28


def _csr_to_dense(
    values: npt.NDArray[Any],
    crow: npt.NDArray[np.int64],
    cols: npt.NDArray[np.int64],
    shape: Sequence[int],
) -> npt.NDArray[Any]:
    """Return a 2-D sparse CSR tensor as a flat, row-major dense array of ``values.dtype``.

    WIRE.md §13.3/§13.7: ``values`` holds the nnz values, ``crow`` the row pointers, ``cols``
    the column indices. Raises ValueError saying what is wrong: a shape that is not 2-D, is
    negative or too large, or indices that do not fit it.
    """
    if len(shape) != 2:
        raise ValueError("a sparse CSR tensor needs a 2-D shape")
    rows, width = shape
    if rows < 0 or width < 0:
        raise ValueError(f"sparse tensor shape {list(shape)} has a negative dimension")
    if rows * width > _MAX_DENSE_ELEMENTS:
        raise ValueError(f"sparse tensor shape {list(shape)} is too large")
    nnz = values.size
    inconsistent = ValueError("inconsistent sparse CSR indices")
    if crow.ndim != 1 or cols.ndim != 1 or crow.size != rows + 1 or cols.size != nnz:
        raise inconsistent
    counts = np.diff(crow)
    if (
        int(crow[0]) != 0
        or int(crow[-1]) != nnz
        or bool(np.any(counts < 0))
        or (nnz and (int(cols.min()) < 0 or int(cols.max()) >= width))
    ):
        raise inconsistent
    dense = np.zeros(rows * width, dtype=values.dtype)
    dense[np.repeat(np.arange(rows, dtype=np.int64), counts) * width + cols] = values.reshape(-1)
    return dense


# ---------------------------------------------------------------------------------------------
# Model input
# ---------------------------------------------------------------------------------------------


@attrs.frozen(init=False, slots=False)
class EncodedTextChunk:
    """A run of token ids.

    ``tokens`` is a ``list[int]``; a list, tuple, numpy array or torch tensor of ids is accepted.
    The ids are kept as an int32 array, and the list is made from it when first read.
    """

    tokens: list[int]
    type: Literal["encoded_text"] = attrs.field(default="encoded_text", init=False)

    def __init__(self, tokens: Sequence[int] | npt.NDArray[Any]) -> None:
        ids = _token_ids("EncodedTextChunk.tokens", tokens)
        if not ids.size:
            raise InvalidInputError(
                "EncodedTextChunk.tokens",
                "must not be empty",
                "leave the chunk out, or use ModelInput.empty()",
            )
        _set(self, "type", "encoded_text")
        _set(self, "_ids", ids)

    @classmethod
    def _trusted(cls, ids: npt.NDArray[np.int32]) -> EncodedTextChunk:
        # For a non-empty array from _token_ids: skips checking it again.
        chunk = object.__new__(cls)
        _set(chunk, "type", "encoded_text")
        _set(chunk, "_ids", ids)
        return chunk

    def _current_ids(self) -> npt.NDArray[np.int32] | None:
        """Return the token ids as a read-only int32 array, or None if ``tokens`` was changed.

        None once the ``tokens`` list was changed in place (or replaced): the caller then reads
        ``tokens`` itself.
        """
        state = self.__dict__
        ids: npt.NDArray[np.int32] | None = state.get("_ids")
        tokens = state.get("tokens")
        if tokens is None or ids is None:
            return ids
        return ids if tokens == state.get("_ids_list") else None

    @property
    def length(self) -> int:
        """Number of model positions the chunk takes."""
        ids = self._current_ids()
        return int(ids.size) if ids is not None else len(self.tokens)


def _read_chunk_tokens(chunk: EncodedTextChunk) -> list[int]:
    state = chunk.__dict__
    tokens: list[int] | None = state.get("tokens")
    if tokens is None:
        made = state["_ids"].tolist()
        # `_ids_list` is what _current_ids compares `tokens` with to see an in-place change;
        # setdefault keeps one list when two threads read `tokens` at once.
        state.setdefault("_ids_list", list(made))
        tokens = state.setdefault("tokens", made)
    return tokens


def _write_chunk_tokens(chunk: EncodedTextChunk, tokens: list[int]) -> None:
    # Reached through object.__setattr__ only: the frozen class refuses `chunk.tokens = ...`.
    chunk.__dict__["tokens"] = tokens


# attrs takes field attributes off the class; `tokens` is served by this property instead.
EncodedTextChunk.tokens = property(  # type: ignore[assignment]
    _read_chunk_tokens, _write_chunk_tokens, doc="The token ids, as a list."
)


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


def _image_bytes_converter(value: bytes | str) -> bytes:
    return _image_bytes("ImageChunk.data", value)


@attrs.frozen
class ImageChunk:
    """An image given inline (bytes, or base64 text which is decoded).

    ``expected_tokens`` is the number of model positions the image takes; the 0.4.1 fields
    ``height``, ``width`` and ``tokens`` are accepted too. Each is sent only when set (the
    current service rejects ``height``/``width``/``tokens``; prefer ``expected_tokens``).
    """

    data: bytes = attrs.field(converter=_image_bytes_converter, repr=False)
    format: ImageFormat
    expected_tokens: int | None = None
    height: int | None = None
    width: int | None = None
    tokens: int | None = None
    type: Literal["image"] = attrs.field(default="image", init=False)

    def __attrs_post_init__(self) -> None:
        _set(self, "format", _check_image_format("ImageChunk.format", self.format))
        _check_image_counts(self, "ImageChunk")

    @property
    def length(self) -> int:
        """Model positions the image takes (expected_tokens, else tokens, else 0 = unknown)."""
        return self.expected_tokens or self.tokens or 0


@attrs.frozen
class ImageAssetPointerChunk:
    """An image stored elsewhere, referenced by ``location`` (path or URL)."""

    location: str
    format: ImageFormat
    expected_tokens: int | None = None
    height: int | None = None
    width: int | None = None
    tokens: int | None = None
    type: Literal["image_asset_pointer"] = attrs.field(default="image_asset_pointer", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("ImageAssetPointerChunk.location", self.location)
        _set(self, "format", _check_image_format("ImageAssetPointerChunk.format", self.format))
        _check_image_counts(self, "ImageAssetPointerChunk")

    @property
    def length(self) -> int:
        """Model positions the image takes (expected_tokens, else tokens, else 0 = unknown)."""
        return self.expected_tokens or self.tokens or 0


ModelInputChunk = EncodedTextChunk | ImageChunk | ImageAssetPointerChunk
_CHUNK_TYPES = (EncodedTextChunk, ImageChunk, ImageAssetPointerChunk)


def _convert_chunks(value: Iterable[ModelInputChunk]) -> list[ModelInputChunk]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError(
            "ModelInput.chunks", f"must be a list of chunks, got {type(value).__name__}"
        )
    chunks = list(value)
    for index, chunk in enumerate(chunks):
        if not isinstance(chunk, _CHUNK_TYPES):
            raise InvalidInputError(
                f"ModelInput.chunks[{index}]",
                f"must be EncodedTextChunk, ImageChunk or ImageAssetPointerChunk, "
                f"got {type(chunk).__name__}",
                "build token inputs with ModelInput.from_ints(tokens)",
            )
    return chunks


@attrs.frozen
class ModelInput:
    """The input of a model: a list of text and image chunks."""

    chunks: list[ModelInputChunk] = attrs.field(converter=_convert_chunks)

    @classmethod
    def from_ints(cls, tokens: Sequence[int] | npt.NDArray[Any]) -> ModelInput:
        """Build a text-only input from token ids (an empty list gives an empty input)."""
        ids = _token_ids("tokens", tokens)
        if not ids.size:
            return cls(chunks=[])
        return cls(chunks=[EncodedTextChunk._trusted(ids)])

    @classmethod
    def empty(cls) -> ModelInput:
        """Return an input with no chunks."""
        return cls(chunks=[])

    def to_ints(self) -> list[int]:
        """Return all token ids; raises InvalidInputError if the input holds an image."""
        out: list[int] = []
        for index, chunk in enumerate(self.chunks):
            if not isinstance(chunk, EncodedTextChunk):
                raise InvalidInputError(
                    f"chunks[{index}]",
                    f"to_ints() needs text chunks only, found {chunk.type!r}",
                    "read tokens chunk by chunk instead",
                )
            ids = chunk._current_ids()
            out.extend(chunk.tokens if ids is None else ids.tolist())
        return out

    @property
    def length(self) -> int:
        """Number of model positions (text tokens plus image token counts)."""
        return sum(chunk.length for chunk in self.chunks)

    def append(self, chunk: ModelInputChunk) -> ModelInput:
        """Return a new input with ``chunk`` added at the end."""
        return ModelInput(chunks=[*self.chunks, chunk])

    def append_int(self, token: int) -> ModelInput:
        """Return a new input with one token added (to the last text chunk when there is one)."""
        token = _check_int("token", token, minimum=0)
        if self.chunks and isinstance(self.chunks[-1], EncodedTextChunk):
            last = self.chunks[-1]
            return ModelInput(
                chunks=[*self.chunks[:-1], EncodedTextChunk(tokens=[*last.tokens, token])]
            )
        return self.append(EncodedTextChunk(tokens=[token]))


# ---------------------------------------------------------------------------------------------
# Datum
# ---------------------------------------------------------------------------------------------


def _loss_fn_input(key: str, value: object) -> TensorData:
    field = f"loss_fn_inputs[{key!r}]"
    dtype = LOSS_FN_INPUT_DTYPES.get(key)
    try:
        if isinstance(value, TensorData):
            if dtype is None or value.dtype == dtype:
                return value
            # value.data is flat and holds math.prod(value.shape) values: only the cast is new.
            arr = _coerce_array(field, value.data, dtype)
            arr.flags.writeable = False
            return TensorData._trusted(arr, dtype, value.shape)
        if isinstance(value, np.ndarray) or _is_torch_tensor(value):
            arr = _coerce_array(field, value, dtype)
        elif isinstance(value, (list, tuple)):
            if dtype is None:
                raise InvalidInputError(
                    field,
                    "a plain list needs a known key to pick its dtype",
                    f"known keys: {', '.join(LOSS_FN_INPUT_DTYPES)}; for other keys pass a "
                    "numpy array or TensorData",
                )
            arr = _coerce_array(field, value, dtype)
        else:
            raise InvalidInputError(
                field,
                f"must be a TensorData, numpy array, torch tensor or list, "
                f"got {type(value).__name__}",
            )
    except InvalidInputError as exc:
        if exc.field.startswith(field):
            raise
        raise InvalidInputError(field, exc.problem, exc.hint) from None
    return TensorData._own(arr)


def _convert_loss_fn_inputs(value: Mapping[str, Any]) -> dict[str, TensorData]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            "loss_fn_inputs", f"must be a dict of key -> tensor, got {type(value).__name__}"
        )
    out: dict[str, TensorData] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(
                "loss_fn_inputs", f"keys must be non-empty strings, got {key!r}"
            )
        out[key] = _loss_fn_input(key, item)
    return out


@attrs.frozen
class Datum:
    """One training example: the model input and the loss function's per-token inputs.

    Each ``loss_fn_inputs`` value may be a TensorData, a numpy array, a torch tensor or a plain
    list; lists take their dtype from the key (WIRE.md §2.5). Per-token inputs (target_tokens,
    weights, advantages, logprobs) must be 1-D or 2-D with ``model_input.length`` rows, and
    ``target_tokens`` must be non-negative integers.
    """

    # The wire writes loss_fn_inputs first (WIRE.md §2.2); _wire orders the keys itself.
    model_input: ModelInput
    loss_fn_inputs: dict[str, TensorData] = attrs.field(converter=_convert_loss_fn_inputs)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.model_input, ModelInput):
            raise InvalidInputError(
                "model_input",
                f"must be a ModelInput, got {type(self.model_input).__name__}",
                "use ModelInput.from_ints(tokens)",
            )
        if not self.model_input.chunks:
            raise InvalidInputError(
                "model_input", "is empty", "a datum needs at least one input token"
            )
        # The input length, unless an image of unknown token count makes it unknown.
        length = 0
        check_length = True
        for chunk in self.model_input.chunks:
            positions = chunk.length
            if not positions and not isinstance(chunk, EncodedTextChunk):
                check_length = False
            length += positions
        for key, tensor in self.loss_fn_inputs.items():
            if key not in _PER_TOKEN_KEYS:
                continue
            size = tensor.data.size
            shape = tensor.shape if tensor.shape is not None else [size]
            if len(shape) not in (1, 2):
                raise InvalidInputError(
                    f"loss_fn_inputs[{key!r}]",
                    f"must be 1-D or 2-D, got shape {shape}",
                    "one row per input position",
                )
            # A [rows, cols] tensor lines up by its rows; a flattened layout whose element count
            # equals the input length is accepted too (the official SDK sends such tensors).
            if check_length and shape[0] != length and size != length:
                raise InvalidInputError(
                    f"loss_fn_inputs[{key!r}]",
                    f"has {shape[0]} positions but model_input.length is {length}",
                    "give one value per model input position (next-token alignment)",
                )
            if key == "target_tokens" and size and int(tensor.data.min()) < 0:
                raise InvalidInputError(
                    f"loss_fn_inputs[{key!r}]",
                    "token ids must be non-negative",
                    "use vocabulary indices",
                )


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class LoraConfig:
    """LoRA settings of a training run."""

    rank: int = 32
    seed: int | None = None
    train_unembed: bool = True
    train_mlp: bool = True
    train_attn: bool = True

    def __attrs_post_init__(self) -> None:
        _set(self, "rank", _check_int("rank", self.rank, minimum=1, hint="use e.g. rank=32"))
        _set(self, "seed", _check_opt_int("seed", self.seed))
        for name in ("train_unembed", "train_mlp", "train_attn"):
            _set(self, name, _check_bool(name, getattr(self, name)))
        if not (self.train_unembed or self.train_mlp or self.train_attn):
            raise InvalidInputError(
                "train_unembed/train_mlp/train_attn",
                "all are False, so nothing would be trained",
                "set at least one of them to True",
            )


@attrs.frozen
class AdamParams:
    """Adam(W) optimizer settings for one optim_step.

    ``weight_decay`` (decoupled, AdamW) and ``grad_clip_norm`` (0 = off) are sent only when set.
    """

    learning_rate: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-12
    weight_decay: float | None = None
    grad_clip_norm: float | None = None

    def __attrs_post_init__(self) -> None:
        lr = _check_float("learning_rate", self.learning_rate)
        if lr < 0:
            raise InvalidInputError("learning_rate", f"must be >= 0, got {lr}")
        _set(self, "learning_rate", lr)
        for name in ("beta1", "beta2"):
            beta = _check_float(name, getattr(self, name))
            if not 0.0 <= beta < 1.0:
                raise InvalidInputError(name, f"must be in [0, 1), got {beta}", "e.g. 0.9")
            _set(self, name, beta)
        eps = _check_float("eps", self.eps)
        if eps <= 0:
            raise InvalidInputError("eps", f"must be > 0, got {eps}", "e.g. 1e-12")
        _set(self, "eps", eps)
        for name in ("weight_decay", "grad_clip_norm"):
            value = getattr(self, name)
            if value is not None:
                number = _check_float(name, value)
                if number < 0:
                    raise InvalidInputError(name, f"must be >= 0, got {number}", "0 turns it off")
                _set(self, name, number)


def _convert_stop(value: object) -> str | list[str] | list[int] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError(
            "stop", f"must be a string, a list of strings or a list of token ids, got {value!r}"
        )
    items = list(value)
    if all(isinstance(item, str) for item in items):
        return items
    if all(isinstance(item, (int, np.integer)) and not isinstance(item, bool) for item in items):
        tokens = [int(item) for item in items]
        if any(t < 0 for t in tokens):
            raise InvalidInputError("stop", "stop token ids must be non-negative")
        return tokens
    raise InvalidInputError(
        "stop",
        f"mixes strings and token ids (or holds other values): {items!r}",
        "use either a list of strings or a list of token ids",
    )


@attrs.frozen
class SamplingParams:
    """How to sample: length limit, stop sequences, temperature, top-k and top-p."""

    max_tokens: int | None = None
    seed: int | None = None
    stop: str | list[str] | list[int] | None = attrs.field(default=None, converter=_convert_stop)
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0

    def __attrs_post_init__(self) -> None:
        _set(self, "max_tokens", _check_opt_int("max_tokens", self.max_tokens, minimum=1))
        _set(self, "seed", _check_opt_int("seed", self.seed))
        temperature = _check_float("temperature", self.temperature)
        if temperature < 0:
            raise InvalidInputError(
                "temperature", f"must be >= 0, got {temperature}", "0 means greedy decoding"
            )
        _set(self, "temperature", temperature)
        top_k = _check_int("top_k", self.top_k, minimum=-1)
        if top_k == 0:
            raise InvalidInputError("top_k", "must be -1 (no limit) or >= 1, got 0")
        _set(self, "top_k", top_k)
        top_p = _check_float("top_p", self.top_p)
        if not 0.0 < top_p <= 1.0:
            raise InvalidInputError(
                "top_p", f"must be in (0, 1], got {top_p}", "1.0 disables nucleus sampling"
            )
        _set(self, "top_p", top_p)


# ---------------------------------------------------------------------------------------------
# Requests (field order = wire key order of the current official SDK)
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreateSessionRequest:
    """POST /api/v1/create_session."""

    tags: list[str] = attrs.field(factory=list)
    user_metadata: dict[str, Any] | None = None
    sdk_version: str
    project_id: str | None = None
    display_name: str | None = None
    type: Literal["create_session"] = attrs.field(default="create_session", init=False)

    def __attrs_post_init__(self) -> None:
        raw_tags: Any = self.tags
        if isinstance(raw_tags, str) or not isinstance(raw_tags, Iterable):
            raise InvalidInputError("tags", f"must be a list of strings, got {raw_tags!r}")
        tags = list(raw_tags)
        for tag in tags:
            _check_str("tags", tag)
        _set(self, "tags", tags)
        if self.user_metadata is not None:
            _set(self, "user_metadata", _check_mapping("user_metadata", self.user_metadata))
        _check_str("sdk_version", self.sdk_version)
        _check_opt_str("project_id", self.project_id)
        _check_opt_str("display_name", self.display_name)


@attrs.frozen(kw_only=True)
class SessionHeartbeatRequest:
    """POST /api/v1/session_heartbeat."""

    session_id: str
    type: Literal["session_heartbeat"] = attrs.field(default="session_heartbeat", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("session_id", self.session_id)


@attrs.frozen(kw_only=True)
class CreateSamplingSessionRequest:
    """POST /api/v1/create_sampling_session (one of base_model / model_path)."""

    session_id: str
    sampling_session_seq_id: int
    base_model: str | None = None
    model_path: str | None = None
    type: Literal["create_sampling_session"] = attrs.field(
        default="create_sampling_session", init=False
    )

    def __attrs_post_init__(self) -> None:
        _check_str("session_id", self.session_id)
        _check_int("sampling_session_seq_id", self.sampling_session_seq_id, minimum=0)
        _check_opt_str("base_model", self.base_model)
        if self.model_path is not None:
            check_tinker_path("model_path", self.model_path)
        if self.base_model is None and self.model_path is None:
            raise InvalidInputError(
                "base_model/model_path",
                "neither is set",
                "pass base_model='...' or model_path='tinker://...'",
            )


@attrs.frozen(kw_only=True)
class JoinSamplingSessionRequest:
    """POST /api/v1/join_sampling_session (a copied SamplingClient joins an existing session)."""

    sampling_session_id: str
    type: Literal["join_sampling_session"] = attrs.field(
        default="join_sampling_session", init=False
    )

    def __attrs_post_init__(self) -> None:
        _check_str("sampling_session_id", self.sampling_session_id)


@attrs.frozen(kw_only=True)
class CreateModelRequest:
    """POST /api/v1/create_model."""

    session_id: str
    model_seq_id: int
    base_model: str
    user_metadata: dict[str, Any] | None = None
    lora_config: LoraConfig | None = None
    optimizer_config: dict[str, Any] | None = None
    type: Literal["create_model"] = attrs.field(default="create_model", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("session_id", self.session_id)
        _check_int("model_seq_id", self.model_seq_id, minimum=0)
        _check_str("base_model", self.base_model, hint="e.g. 'Qwen/Qwen3-8B'")
        if self.user_metadata is not None:
            _set(self, "user_metadata", _check_mapping("user_metadata", self.user_metadata))
        if self.lora_config is not None and not isinstance(self.lora_config, LoraConfig):
            raise InvalidInputError("lora_config", "must be a LoraConfig")
        if self.optimizer_config is not None:
            _set(
                self,
                "optimizer_config",
                _check_mapping("optimizer_config", self.optimizer_config),
            )


@attrs.frozen(kw_only=True)
class GetInfoRequest:
    """POST /api/v1/get_info."""

    model_id: str
    type: Literal["get_info"] = attrs.field(default="get_info", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)


@attrs.frozen(kw_only=True)
class UnloadModelRequest:
    """POST /api/v1/unload_model."""

    model_id: str
    type: Literal["unload_model"] = attrs.field(default="unload_model", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)


def _convert_data(value: Iterable[Datum]) -> list[Datum]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError("data", f"must be a list of Datum, got {type(value).__name__}")
    data = list(value)
    for index, datum in enumerate(data):
        if not isinstance(datum, Datum):
            raise InvalidInputError(
                f"data[{index}]",
                f"must be a Datum, got {type(datum).__name__}",
                "build it with Datum(model_input=..., loss_fn_inputs=...)",
            )
    return data


def _check_loss_fn_config(value: object) -> dict[str, float | str] | None:
    if value is None:
        return None
    config = _check_mapping("loss_fn_config", value)
    for key, item in config.items():
        if isinstance(item, str):
            continue
        config[key] = _check_float(
            f"loss_fn_config[{key!r}]", item, "values are numbers (or strings)"
        )
    return config


@attrs.frozen(kw_only=True)
class ForwardBackwardInput:
    """The data, loss function and loss options of a forward / forward_backward call."""

    data: list[Datum] = attrs.field(converter=_convert_data)
    loss_fn: str
    loss_fn_config: dict[str, float | str] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.data:
            raise InvalidInputError("data", "is empty", "pass at least one Datum")
        _set(self, "loss_fn", check_loss_fn(self.loss_fn))
        _set(self, "loss_fn_config", _check_loss_fn_config(self.loss_fn_config))


@attrs.frozen(kw_only=True)
class ForwardRequest:
    """POST /api/v1/forward (JSON)."""

    forward_input: ForwardBackwardInput
    model_id: str
    seq_id: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.forward_input, ForwardBackwardInput):
            raise InvalidInputError("forward_input", "must be a ForwardBackwardInput")
        _check_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)


@attrs.frozen(kw_only=True)
class ForwardBackwardRequest:
    """POST /api/v1/forward_backward (JSON)."""

    forward_backward_input: ForwardBackwardInput
    model_id: str
    seq_id: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.forward_backward_input, ForwardBackwardInput):
            raise InvalidInputError("forward_backward_input", "must be a ForwardBackwardInput")
        _check_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)


@attrs.frozen(kw_only=True)
class OptimStepRequest:
    """POST /api/v1/optim_step."""

    model_id: str
    seq_id: int | None = None
    type: Literal["optim_step"] = attrs.field(default="optim_step", init=False)
    adam_params: AdamParams

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        if not isinstance(self.adam_params, AdamParams):
            raise InvalidInputError("adam_params", "must be an AdamParams")


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


@attrs.frozen(kw_only=True)
class SaveWeightsRequest:
    """POST /api/v1/save_weights (``path`` is a checkpoint name)."""

    model_id: str
    path: str | None = None
    seq_id: int | None = None
    ttl_seconds: int | None = None
    overwrite: bool | None = None
    type: Literal["save_weights"] = attrs.field(default="save_weights", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_save_name("path", self.path)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)
        if self.overwrite is not None:
            _check_bool("overwrite", self.overwrite)


@attrs.frozen(kw_only=True)
class LoadWeightsRequest:
    """POST /api/v1/load_weights: into ``model_id``, or into a new model (session_id, model_seq_id).

    ``optimizer`` is always sent (the current service requires it, WIRE.md §P.1).
    """

    model_id: str | None = None
    seq_id: int | None = None
    session_id: str | None = None
    model_seq_id: int | None = None
    base_model: str | None = None
    user_metadata: dict[str, Any] | None = None
    path: str
    optimizer: bool
    weights_access_token: str | None = attrs.field(default=None, repr=False)
    type: Literal["load_weights"] = attrs.field(default="load_weights", init=False)

    def __attrs_post_init__(self) -> None:
        _check_opt_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _check_opt_str("session_id", self.session_id)
        _check_opt_int("model_seq_id", self.model_seq_id, minimum=0)
        _check_opt_str("base_model", self.base_model)
        if self.user_metadata is not None:
            _set(self, "user_metadata", _check_mapping("user_metadata", self.user_metadata))
        check_tinker_path("path", self.path)
        _set(self, "optimizer", _check_bool("optimizer", self.optimizer))
        _check_opt_str("weights_access_token", self.weights_access_token)
        if self.model_id is None and (self.session_id is None or self.model_seq_id is None):
            raise InvalidInputError(
                "model_id",
                "is not set, and session_id/model_seq_id are not both set",
                "load into an existing model (model_id) or create one (session_id + model_seq_id)",
            )


@attrs.frozen(kw_only=True)
class SaveWeightsForSamplerRequest:
    """POST /api/v1/save_weights_for_sampler: named (``path``) or ephemeral (a session seq id)."""

    model_id: str
    path: str | None = None
    sampling_session_seq_id: int | None = None
    kind: str | None = None
    seq_id: int | None = None
    ttl_seconds: int | None = None
    type: Literal["save_weights_for_sampler"] = attrs.field(
        default="save_weights_for_sampler", init=False
    )

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_save_name("path", self.path)
        _check_opt_int("sampling_session_seq_id", self.sampling_session_seq_id, minimum=0)
        _check_opt_str("kind", self.kind)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)
        if self.path is None and self.sampling_session_seq_id is None:
            raise InvalidInputError(
                "path/sampling_session_seq_id",
                "neither is set",
                "name the checkpoint (path='...') or save ephemerally (sampling_session_seq_id)",
            )


@attrs.frozen(kw_only=True)
class SampleRequest:
    """POST /api/v1/asample."""

    num_samples: int = 1
    prompt: ModelInput
    sampling_params: SamplingParams
    base_model: str | None = None
    model_path: str | None = None
    sampling_session_id: str | None = None
    seq_id: int | None = None
    prompt_logprobs: bool = False
    topk_prompt_logprobs: int = 0
    topk_sample_logprobs: int | None = None
    target_prompt_logprobs: TensorData | None = None
    prompt_alt_tokens_k: int | None = None
    prompt_logprobs_last_n: int | None = None
    record_stability_info: bool | None = None
    type: Literal["sample"] = attrs.field(default="sample", init=False)

    def __attrs_post_init__(self) -> None:
        _check_int("num_samples", self.num_samples, minimum=1)
        if not isinstance(self.prompt, ModelInput):
            raise InvalidInputError(
                "prompt", "must be a ModelInput", "use ModelInput.from_ints(tokens)"
            )
        if not self.prompt.chunks:
            raise InvalidInputError("prompt", "is empty", "give at least one prompt token")
        if not isinstance(self.sampling_params, SamplingParams):
            raise InvalidInputError("sampling_params", "must be a SamplingParams")
        _check_opt_str("base_model", self.base_model)
        if self.model_path is not None:
            check_tinker_path("model_path", self.model_path)
        _check_opt_str("sampling_session_id", self.sampling_session_id)
        if self.sampling_session_id is None and self.base_model is None and self.model_path is None:
            raise InvalidInputError(
                "sampling_session_id",
                "is not set (nor base_model / model_path)",
                "sample through a SamplingClient",
            )
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _set(self, "prompt_logprobs", _check_bool("prompt_logprobs", self.prompt_logprobs))
        _check_int("topk_prompt_logprobs", self.topk_prompt_logprobs, minimum=0)
        _check_opt_int("topk_sample_logprobs", self.topk_sample_logprobs, minimum=0)
        _check_opt_int("prompt_alt_tokens_k", self.prompt_alt_tokens_k, minimum=0)
        _check_opt_int("prompt_logprobs_last_n", self.prompt_logprobs_last_n, minimum=1)
        if self.record_stability_info is not None:
            _check_bool("record_stability_info", self.record_stability_info)
        if self.target_prompt_logprobs is not None and not isinstance(
            self.target_prompt_logprobs, TensorData
        ):
            raise InvalidInputError("target_prompt_logprobs", "must be a TensorData")


@attrs.frozen(kw_only=True)
class FutureRetrieveRequest:
    """POST /api/v1/retrieve_future."""

    request_id: str
    allow_metadata_only: bool | None = None

    def __attrs_post_init__(self) -> None:
        _check_str("request_id", self.request_id)
        if self.allow_metadata_only is not None:
            _check_bool("allow_metadata_only", self.allow_metadata_only)


@attrs.frozen(kw_only=True)
class ClientConfigRequest:
    """POST /api/v1/client/config (also the body of /api/v1/client/dynamic_config)."""

    sdk_version: str

    def __attrs_post_init__(self) -> None:
        _check_str("sdk_version", self.sdk_version)


@attrs.frozen
class SessionFinishReason:
    """How a session ended: ``success``, ``errored`` or ``interrupted``."""

    type: Literal["success", "errored", "interrupted"]

    def __attrs_post_init__(self) -> None:
        if self.type not in ("success", "errored", "interrupted"):
            raise InvalidInputError(
                "reason", f"must be 'success', 'errored' or 'interrupted', got {self.type!r}"
            )


@attrs.frozen(kw_only=True)
class SessionFinishRequest:
    """POST /api/v1/sessions/{session_id}/finish (``detail`` is sent, as null when unset)."""

    # WIRE.md §P.1 exception taken from golden-0.38: this hand-built body always has `detail`.
    _wire_nullable: ClassVar[frozenset[str]] = frozenset({"detail"})

    reason: SessionFinishReason
    detail: str | None = None

    def __attrs_post_init__(self) -> None:
        if isinstance(self.reason, str):
            _set(self, "reason", SessionFinishReason(self.reason))  # type: ignore[arg-type]
        if not isinstance(self.reason, SessionFinishReason):
            raise InvalidInputError("reason", "must be a SessionFinishReason")
        _check_opt_str("detail", self.detail)


@attrs.frozen(kw_only=True)
class SetCheckpointTTLRequest:
    """PUT .../checkpoints/{id}/ttl (``ttl_seconds`` None = keep forever; sent as null)."""

    _wire_nullable: ClassVar[frozenset[str]] = frozenset({"ttl_seconds"})

    ttl_seconds: int | None = None

    def __attrs_post_init__(self) -> None:
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)


@attrs.frozen(kw_only=True)
class WeightsInfoRequest:
    """POST /api/v1/weights_info."""

    tinker_path: str

    def __attrs_post_init__(self) -> None:
        check_tinker_path("tinker_path", self.tinker_path)


# ---------------------------------------------------------------------------------------------
# Telemetry (WIRE.md §11.3)
# ---------------------------------------------------------------------------------------------


def _check_event_common(event: Any) -> None:
    _check_str("event_id", event.event_id)
    _check_int("event_session_index", event.event_session_index, minimum=0)
    if event.severity not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise InvalidInputError("severity", f"unknown severity {event.severity!r}")
    if not isinstance(event.timestamp, datetime):
        raise InvalidInputError("timestamp", "must be a datetime")


@attrs.frozen(kw_only=True)
class SessionStartEvent:
    """Telemetry: the session started."""

    event: Literal["SESSION_START"] = attrs.field(default="SESSION_START", init=False)
    event_id: str
    event_session_index: int
    severity: Severity = "INFO"
    timestamp: datetime

    def __attrs_post_init__(self) -> None:
        _check_event_common(self)


@attrs.frozen(kw_only=True)
class SessionEndEvent:
    """Telemetry: the session ended; ``duration`` is ``str(timedelta)``."""

    duration: str
    event: Literal["SESSION_END"] = attrs.field(default="SESSION_END", init=False)
    event_id: str
    event_session_index: int
    severity: Severity = "INFO"
    timestamp: datetime

    def __attrs_post_init__(self) -> None:
        _check_str("duration", self.duration)
        _check_event_common(self)


@attrs.frozen(kw_only=True)
class UnhandledExceptionEvent:
    """Telemetry: an exception escaped a public call."""

    error_message: str
    error_type: str
    event: Literal["UNHANDLED_EXCEPTION"] = attrs.field(default="UNHANDLED_EXCEPTION", init=False)
    event_id: str
    event_session_index: int
    severity: Severity = "ERROR"
    timestamp: datetime
    traceback: str | None = None

    def __attrs_post_init__(self) -> None:
        _check_str("error_message", self.error_message, allow_empty=True)
        _check_str("error_type", self.error_type)
        _check_event_common(self)


@attrs.frozen(kw_only=True)
class GenericEvent:
    """Telemetry: a named event with free-form data."""

    event: Literal["GENERIC_EVENT"] = attrs.field(default="GENERIC_EVENT", init=False)
    event_id: str
    event_name: str
    event_session_index: int
    severity: Severity = "INFO"
    timestamp: datetime
    event_data: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        _check_str("event_name", self.event_name)
        _set(self, "event_data", _check_mapping("event_data", self.event_data))
        _check_event_common(self)


TelemetryEvent = SessionStartEvent | SessionEndEvent | UnhandledExceptionEvent | GenericEvent
_EVENT_TYPES = (SessionStartEvent, SessionEndEvent, UnhandledExceptionEvent, GenericEvent)


@attrs.frozen(kw_only=True)
class TelemetrySendRequest:
    """POST /api/v1/telemetry: a batch of events (``process_uuid`` is always sent, §P.1)."""

    events: list[TelemetryEvent]
    platform: str
    sdk_version: str
    session_id: str
    process_uuid: str

    def __attrs_post_init__(self) -> None:
        raw: Any = self.events
        if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
            raise InvalidInputError(
                "events", f"must be a list of telemetry events, got {type(raw).__name__}"
            )
        events = list(raw)
        for index, event in enumerate(events):
            if not isinstance(event, _EVENT_TYPES):
                raise InvalidInputError(f"events[{index}]", "must be a telemetry event")
        _set(self, "events", events)
        _check_str("platform", self.platform)
        _check_str("sdk_version", self.sdk_version)
        _check_str("session_id", self.session_id)
        _check_str("process_uuid", self.process_uuid)


# ---------------------------------------------------------------------------------------------
# Responses (decoded leniently: unknown keys are ignored)
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class UntypedAPIFuture:
    """The answer to a submit: the request id to poll with retrieve_future."""

    request_id: str
    model_id: str | None = None


@attrs.frozen(kw_only=True)
class TryAgainResponse:
    """retrieve_future: the result is not ready yet."""

    type: Literal["try_again"] = "try_again"
    request_id: str
    queue_state: str
    queue_state_reason: str | None = None


@attrs.frozen(kw_only=True)
class RequestFailedResponse:
    """retrieve_future: the request failed; ``category`` says whose fault it is."""

    error: str
    category: RequestErrorCategory = RequestErrorCategory.UNKNOWN

    def __attrs_post_init__(self) -> None:
        category: Any = self.category
        if not isinstance(category, RequestErrorCategory):
            _set(self, "category", RequestErrorCategory.parse(category))


@attrs.frozen(kw_only=True)
class FutureMetadataResponse:
    """retrieve_future: result ready, payload withheld (re-poll with allow_metadata_only=False)."""

    status: str
    response_payload_size: int | None = None


@attrs.frozen(kw_only=True)
class CreateSessionResponse:
    """The new session's id and optional messages to log."""

    session_id: str
    info_message: str | None = None
    warning_message: str | None = None
    error_message: str | None = None
    type: Literal["create_session"] = "create_session"


@attrs.frozen(kw_only=True)
class SessionHeartbeatResponse:
    """Heartbeat acknowledgement."""

    type: Literal["session_heartbeat"] = "session_heartbeat"


@attrs.frozen(kw_only=True)
class CreateSamplingSessionResponse:
    """The new sampling session's id."""

    sampling_session_id: str
    type: Literal["create_sampling_session"] = "create_sampling_session"


@attrs.frozen(kw_only=True)
class CreateModelResponse:
    """Result of create_model."""

    model_id: str
    type: Literal["create_model"] = "create_model"


@attrs.frozen(kw_only=True)
class ModelData:
    """Architecture and tokenizer of a model."""

    arch: str | None = None
    model_name: str | None = None
    tokenizer_id: str | None = None


@attrs.frozen(kw_only=True)
class GetInfoResponse:
    """Result of get_info."""

    model_id: str
    model_data: ModelData = attrs.field(factory=ModelData)
    is_lora: bool | None = None
    lora_rank: int | None = None
    model_name: str | None = None
    type: str | None = "get_info"


@attrs.frozen(kw_only=True)
class UnloadModelResponse:
    """Result of unload_model."""

    model_id: str
    type: str | None = "unload_model"


@attrs.frozen
class ForwardBackwardOutput:
    """Result of forward / forward_backward: per-datum outputs (e.g. ``logprobs``) and metrics."""

    loss_fn_output_type: str
    loss_fn_outputs: list[dict[str, TensorData]]
    metrics: dict[str, float]


@attrs.frozen
class OptimStepResponse:
    """Result of optim_step."""

    metrics: dict[str, float] | None = None


@attrs.frozen
class SaveWeightsResponse:
    """Result of save_weights: the checkpoint's tinker:// path."""

    path: str
    type: str | None = "save_weights"


@attrs.frozen
class LoadWeightsResponse:
    """Result of load_weights."""

    path: str | None = None
    model_id: str | None = None
    type: str | None = "load_weights"


@attrs.frozen
class SaveWeightsForSamplerResponseInternal:
    """Raw result of save_weights_for_sampler: a path (named) or a sampling session (ephemeral)."""

    path: str | None = None
    sampling_session_id: str | None = None
    type: str | None = "save_weights_for_sampler"


@attrs.frozen
class SaveWeightsForSamplerResponse:
    """Result of TrainingClient.save_weights_for_sampler: the sampler checkpoint's path."""

    path: str


@attrs.frozen
class SampledSequence:
    """One sampled continuation."""

    stop_reason: StopReason = attrs.field(converter=StopReason)
    tokens: list[int]
    logprobs: list[float] | None = None


@attrs.frozen
class SampleResponse:
    """Result of sample: the sequences and, when asked, prompt logprobs."""

    sequences: list[SampledSequence]
    prompt_logprobs: list[float | None] | None = None
    topk_prompt_logprobs: list[list[tuple[int, float]] | None] | None = None
    type: Literal["sample"] = "sample"


@attrs.frozen
class SupportedModel:
    """A base model the service can train or sample."""

    model_name: str | None = None
    max_context_length: int | None = None


@attrs.frozen
class GetServerCapabilitiesResponse:
    """The service's supported models."""

    supported_models: list[SupportedModel]


@attrs.frozen
class HealthResponse:
    """GET /api/v1/healthz."""

    status: str = "ok"


@attrs.frozen
class TelemetryResponse:
    """POST /api/v1/telemetry."""

    status: str = "accepted"


@attrs.frozen(kw_only=True)
class ClientConfigResponse:
    """Server feature flags from POST /api/v1/client/config (WIRE.md §13.2); unknown flags ignored.

    ``ClientConfigResponse()`` holds the defaults used when the service has no client config.
    ``sample_max_concurrent_requests`` defaults to tinker_lite's own cap (WIRE.md §P.8).
    """

    pjwt_auth_enabled: bool = False
    credential_default_source: str = "api_key"
    sample_dispatch_bytes_semaphore_size: int = 10 * 1024 * 1024
    inflight_response_bytes_semaphore_size: int = 50 * 1024 * 1024
    parallel_fwdbwd_chunks: bool = True
    proto_write_fwdbwd: bool = False
    proto_compress_fwdbwd: bool = False
    fwd_via_fwdbwd: bool = False
    billing_exception_max_pause_duration_sec: float = 3600.0
    sample_no_retries: bool = False
    sample_enable_stuck_detection: bool = False
    sample_max_concurrent_requests: int = 400
    use_pyqwest_transport: bool = False
    create_model_via_load_weights: bool = False
    sample_use_retrieve_futures: bool = False
    sample_join_sampling_session: bool = False
    fwdbwd_max_chunk_len: int = 1024
    fwdbwd_max_chunk_bytes_count: int = 5_000_000
    fwdbwd_dispatch_bytes_semaphore_size: int = 50_000_000


@attrs.frozen(kw_only=True)
class DynamicConfigResponse:
    """POST /api/v1/client/dynamic_config."""

    refresh_interval_sec: float = 300.0


@attrs.frozen(kw_only=True)
class AuthTokenResponse:
    """POST /api/v1/auth/token: a JWT sent in place of the API key."""

    jwt: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class Cursor:
    """Pagination of a REST listing."""

    offset: int
    limit: int
    total_count: int


@attrs.frozen(kw_only=True)
class Checkpoint:
    """A saved checkpoint (``checkpoint_type`` is ``"training"`` or ``"sampler"``)."""

    checkpoint_id: str
    checkpoint_type: str
    time: datetime
    tinker_path: str
    size_bytes: int | None = None
    public: bool = False
    expires_at: datetime | None = None


@attrs.frozen(kw_only=True)
class CheckpointsListResponse:
    """A page of checkpoints (``cursor`` only on the user-wide listing)."""

    checkpoints: list[Checkpoint]
    cursor: Cursor | None = None


@attrs.frozen(kw_only=True)
class TrainingRun:
    """A training run (a trained model) and its latest checkpoints."""

    training_run_id: str
    base_model: str
    model_owner: str
    is_lora: bool
    corrupted: bool = False
    lora_rank: int | None = None
    last_request_time: datetime
    last_checkpoint: Checkpoint | None = None
    last_sampler_checkpoint: Checkpoint | None = None
    user_metadata: dict[str, str] | None = None


@attrs.frozen(kw_only=True)
class TrainingRunsResponse:
    """A page of training runs."""

    training_runs: list[TrainingRun]
    cursor: Cursor


@attrs.frozen(kw_only=True)
class CheckpointArchiveUrlResponse:
    """A signed URL to download a checkpoint archive, and when it expires."""

    url: str
    expires: datetime


@attrs.frozen(kw_only=True)
class WeightsInfoResponse:
    """What a checkpoint holds: base model and LoRA settings."""

    base_model: str
    is_lora: bool
    lora_rank: int | None = None
    train_unembed: bool | None = None
    train_mlp: bool | None = None
    train_attn: bool | None = None


@attrs.frozen(kw_only=True)
class GetSamplerResponse:
    """A sampler's base model and, for trained weights, its model path."""

    sampler_id: str
    base_model: str
    model_path: str | None = None


@attrs.frozen(kw_only=True)
class ListSessionsResponse:
    """Session ids of the caller."""

    sessions: list[str]
    cursor: Cursor | None = None


@attrs.frozen(kw_only=True)
class GetSessionResponse:
    """Training runs and samplers of one session."""

    training_run_ids: list[str]
    sampler_ids: list[str]


_PATH_KINDS: Mapping[str, CheckpointType] = {"weights": "training", "sampler_weights": "sampler"}


@attrs.frozen(kw_only=True)
class ParsedCheckpointTinkerPath:
    """The parts of ``tinker://{training_run_id}/{weights|sampler_weights}/{name}``."""

    tinker_path: str
    training_run_id: str
    checkpoint_type: CheckpointType
    checkpoint_id: str

    @classmethod
    def from_tinker_path(cls, tinker_path: str) -> ParsedCheckpointTinkerPath:
        """Parse a checkpoint path (WIRE.md §3.12); InvalidInputError says what is wrong."""
        kinds_hint = (
            "paths look like tinker://<run>/weights/<name> (a training state, loadable with "
            "load_state / create_training_client_from_state) or "
            "tinker://<run>/sampler_weights/<name> (sampleable and downloadable)"
        )
        path = check_tinker_path("tinker_path", tinker_path)
        parts = path[len("tinker://") :].split("/")
        if len(parts) != 3 or not all(parts):
            empty = parts.count("")
            raise InvalidInputError(
                "tinker_path",
                f"{path!r} has {len(parts)} part(s) after tinker://"
                f"{f' ({empty} empty)' if empty else ''}, expected 3 non-empty",
                kinds_hint,
            )
        run_id, kind, name = parts
        if kind not in _PATH_KINDS:
            raise InvalidInputError(
                "tinker_path",
                f"unknown checkpoint kind {kind!r} in {path!r}",
                kinds_hint,
            )
        return cls(
            tinker_path=path,
            training_run_id=run_id,
            checkpoint_type=_PATH_KINDS[kind],
            checkpoint_id=f"{kind}/{name}",
        )
