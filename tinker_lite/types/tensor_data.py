"""``TensorData`` (official module ``tinker.types.tensor_data``)."""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from itertools import islice
from operator import gt
from typing import TYPE_CHECKING, Any

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import (
    _NUMPY_FROM,
    FlatValues,
    _check_int,
    _coerce_array,
    _coerce_values,
    _dtype_name,
    _flat_numpy,
    _is_numpy_array,
    _is_torch_tensor,
    _numpy_type,
    _packed,
    _torch_to_numpy,
)
from .tensor_dtype import TensorDtype

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["TensorData"]

# A sparse tensor is expanded to dense; refuse shapes no real request has (hostile input).
_MAX_DENSE_ELEMENTS = 1 << 28


def _tensor_data_eq(a: TensorData, b: object) -> bool:
    if not isinstance(b, TensorData):
        return NotImplemented  # type: ignore[no-any-return]
    # A missing shape means a flat tensor, so shape None equals [size]; sparse equals dense.
    if a.dtype != b.dtype or a._dims() != b._dims():
        return False
    if a.is_sparse or b.is_sparse or _is_numpy_array(a._values) or _is_numpy_array(b._values):
        import numpy as np

        return bool(np.array_equal(a._dense_flat(), b._dense_flat()))
    return bool(a._values == b._values)


def _check_shape(value: object) -> list[int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidInputError("TensorData.shape", f"must be a list of ints, got {value!r}")
    return [_check_int("TensorData.shape", d, minimum=0) for d in value]


def _index_list(field: str, value: object) -> list[int]:
    """Return CSR indices as a list of ints; InvalidInputError naming ``field`` if they are not."""
    if _is_numpy_array(value) or _is_torch_tensor(value):
        import numpy as np

        arr = np.asarray(_torch_to_numpy(value) if _is_torch_tensor(value) else value)
        if arr.size and arr.dtype.kind not in "iu":
            raise InvalidInputError(
                field, f"must hold integers, got dtype {arr.dtype}", "pass ints"
            )
        if arr.ndim != 1:
            raise InvalidInputError(field, f"must be 1-D, got shape {list(arr.shape)}")
        indices: list[int] = arr.astype(np.int64).tolist()
        return indices
    if not isinstance(value, (list, tuple, range)):
        raise InvalidInputError(field, f"must be a list of ints, got {type(value).__name__}")
    try:
        return _packed("q", value).tolist()
    except (struct.error, TypeError, OverflowError):
        if any(isinstance(item, (list, tuple)) for item in value):
            raise InvalidInputError(field, "must be 1-D, got a nested list") from None
        raise InvalidInputError(field, "must hold integers", "pass ints") from None


def _check_csr(
    nnz: int,
    crow: Sequence[int] | npt.NDArray[Any],
    cols: Sequence[int] | npt.NDArray[Any],
    shape: Sequence[int],
) -> None:
    """Raise InvalidInputError naming the field when CSR indices do not describe ``shape``."""
    rows, width = shape
    if rows * width > _MAX_DENSE_ELEMENTS:
        raise InvalidInputError(
            "TensorData.shape", f"sparse shape {list(shape)} is too large to densify"
        )
    if len(crow) != rows + 1:
        raise InvalidInputError(
            "TensorData.sparse_crow_indices",
            f"has {len(crow)} sparse CSR row pointers, a {rows}-row tensor needs {rows + 1}",
            "give one row pointer per row plus the end (length = shape[0] + 1)",
        )
    if int(crow[0]) != 0 or int(crow[-1]) != nnz:
        raise InvalidInputError(
            "TensorData.sparse_crow_indices",
            f"sparse CSR row pointers must start at 0 and end at the number of values ({nnz}), "
            "got "
            f"{int(crow[0])}..{int(crow[-1])}",
            "row pointers index into data: crow[0] = 0, crow[-1] = len(data)",
        )
    np: Any = sys.modules.get("numpy") if len(cols) >= _NUMPY_FROM else None
    bounds: tuple[int, int] | None = None  # the smallest and largest column index
    if np is not None:  # numpy's loops when the program has loaded it anyway
        crow_array, cols_array = np.asarray(crow), np.asarray(cols)
        decreasing = bool(np.any(np.diff(crow_array) < 0))
        bounds = int(cols_array.min()), int(cols_array.max())
    else:
        decreasing = any(map(gt, crow, islice(crow, 1, None)))
        bounds = (int(min(cols)), int(max(cols))) if len(cols) else None
    if decreasing:
        raise InvalidInputError(
            "TensorData.sparse_crow_indices",
            "sparse CSR row pointers must be non-decreasing",
            "row i holds data[crow[i]:crow[i + 1]]",
        )
    if len(cols) != nnz:
        raise InvalidInputError(
            "TensorData.sparse_col_indices",
            f"has {len(cols)} sparse CSR column indices but data has {nnz} values",
            "give one column index per stored value",
        )
    if nnz and bounds is not None:
        low, high = bounds
        if low < 0 or high >= width:
            bad = low if low < 0 else high
            raise InvalidInputError(
                "TensorData.sparse_col_indices",
                f"sparse CSR column index {bad} is out of range for {width} columns",
                f"column indices must be in [0, {width})",
            )


def _csr_to_dense(
    values: npt.NDArray[Any],
    crow: npt.NDArray[np.int64],
    cols: npt.NDArray[np.int64],
    shape: Sequence[int],
    pad_value: float = 0,
) -> npt.NDArray[Any]:
    """Return a 2-D sparse CSR tensor as a flat, row-major dense array of ``values.dtype``.

    docs/protocol.rst §3.3/§3.4: ``values`` holds the nnz values, ``crow`` the row pointers,
    ``cols`` the column indices; every other entry is ``pad_value``. Raises ValueError saying
    what is wrong (InvalidInputError, a ValueError, naming the field).
    """
    import numpy as np

    if len(shape) != 2:
        raise ValueError("a sparse CSR tensor needs a 2-D shape")
    rows, width = shape
    if rows < 0 or width < 0:
        raise ValueError(f"sparse tensor shape {list(shape)} has a negative dimension")
    if crow.ndim != 1 or cols.ndim != 1 or not crow.size:
        raise ValueError("inconsistent sparse CSR indices")
    _check_csr(values.size, crow, cols, shape)
    dense = np.full(rows * width, pad_value, dtype=values.dtype)
    row_of = np.repeat(np.arange(rows, dtype=np.int64), np.diff(crow))
    dense[row_of * width + cols] = values.reshape(-1)
    return dense


def _nest(flat: list[Any], shape: Sequence[int]) -> list[Any]:
    """Return a flat row-major list as lists nested to ``shape``."""
    if len(shape) <= 1:
        return flat
    step = math.prod(shape[1:])
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


class _ValueFacts:
    """Slots for facts read from a tensor's stored values, kept once computed.

    The stored values are a private copy that nothing changes after construction (numpy input
    is copied and made read-only; ``_numpy`` only swaps a stdlib array for a view of the same
    memory), so what they hold is computed once: a training loop that sends the same Datums
    every epoch does not scan them again. The slots are not attrs fields: no equality, repr,
    pickling or wire format sees them.
    """

    __slots__ = ("_memo_max", "_memo_min", "_memo_non_finite", "_memo_wire")


_UNKNOWN: Any = object()


@attrs.frozen(eq=False, init=False, repr=False)
class TensorData(_ValueFacts):
    """A tensor as the wire carries it: flat values, ``dtype`` and optional ``shape``.

    ``data`` accepts a numpy array, a torch tensor or a (nested) list; the values are cast to
    ``dtype`` (float64/float16 -> float32, smaller ints and bool -> int64), non-integral values
    for ``int64``, complex, string and object values are rejected. As in the official SDK,
    ``tensor.data`` reads back a flat Python list and ``tolist()`` a list nested to ``shape``;
    ``to_numpy()`` is the fast path. With ``sparse_crow_indices`` / ``sparse_col_indices`` the
    tensor is 2-D sparse CSR: ``data`` holds only the stored values, ``shape`` is required, and
    ``to_numpy()`` / ``tolist()`` densify. Values built from lists are kept without numpy;
    numpy is imported when an array is asked for.
    """

    # FlatValues (a stdlib array, or a flat numpy array); typed Any so resolving the class's
    # annotations (cattrs does) needs no numpy.
    _values: Any = attrs.field(alias="data")
    dtype: TensorDtype
    shape: list[int] | None = None
    sparse_crow_indices: list[int] | None = None
    sparse_col_indices: list[int] | None = None

    def __init__(
        self,
        data: Any = None,
        dtype: TensorDtype | None = None,
        shape: Sequence[int] | None = None,
        sparse_crow_indices: Sequence[int] | None = None,
        sparse_col_indices: Sequence[int] | None = None,
    ) -> None:
        kind: Any = dtype
        if kind is None:
            raise InvalidInputError(
                "TensorData.dtype", "is required", "pass dtype='float32' or dtype='int64'"
            )
        if kind is float:
            kind = "float32"
        elif kind is int or kind is bool:
            kind = "int64"
        elif isinstance(kind, _numpy_type("dtype")) or (isinstance(kind, type) and kind is not str):
            import numpy as np

            kind = _dtype_name(np.dtype(kind))
        if kind not in ("int64", "float32"):
            raise InvalidInputError(
                "TensorData.dtype", f"must be 'int64' or 'float32', got {kind!r}"
            )
        values, given_shape = _coerce_values("TensorData.data", [] if data is None else data, kind)
        size = len(values)
        dims = _check_shape(shape) if shape is not None else None
        if (sparse_crow_indices is None) != (sparse_col_indices is None):
            missing = "sparse_col_indices" if sparse_col_indices is None else "sparse_crow_indices"
            raise InvalidInputError(
                f"TensorData.{missing}",
                "is missing: a sparse CSR tensor needs both index lists",
                "set sparse_crow_indices and sparse_col_indices together, or neither",
            )
        crow_list: list[int] | None = None
        col_list: list[int] | None = None
        if sparse_crow_indices is not None:
            if dims is None or len(dims) != 2:
                raise InvalidInputError(
                    "TensorData.shape",
                    f"a sparse CSR tensor needs a 2-D shape, got {dims}",
                    "pass shape=[rows, columns] of the dense tensor",
                )
            crow_list = _index_list("TensorData.sparse_crow_indices", sparse_crow_indices)
            col_list = _index_list("TensorData.sparse_col_indices", sparse_col_indices)
            if len(given_shape) != 1:
                raise InvalidInputError(
                    "TensorData.data",
                    f"a sparse tensor's data must be the 1-D stored values, got shape "
                    f"{given_shape}",
                    "pass the nnz values in row order",
                )
            _check_csr(size, crow_list, col_list, dims)
        elif dims is not None:
            if math.prod(dims) != size:
                raise InvalidInputError(
                    "TensorData.shape",
                    f"shape {dims} holds {math.prod(dims)} values but data has {size}",
                    "make the shape match the number of values",
                )
        elif len(given_shape) > 1:
            dims = given_shape
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "dtype", kind)
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "sparse_crow_indices", crow_list)
        object.__setattr__(self, "sparse_col_indices", col_list)

    __eq__ = _tensor_data_eq
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        values = self._values
        if len(values) > 8:
            text = ", ".join(map(repr, [*values[:3].tolist(), ..., *values[-3:].tolist()]))
            shown = "[" + text.replace("Ellipsis", "...") + "]"
        else:
            shown = repr(values.tolist())
        sparse = (
            f", sparse_crow_indices={self.sparse_crow_indices!r}, "
            f"sparse_col_indices={self.sparse_col_indices!r}"
            if self.sparse_crow_indices is not None
            else ""
        )
        return f"TensorData(data={shown}, dtype={self.dtype!r}, shape={self.shape!r}{sparse})"

    @classmethod
    def _trusted(cls, data: FlatValues, dtype: TensorDtype, shape: list[int] | None) -> TensorData:
        # For values a decoder or converter has already checked: flat (a stdlib array of
        # `dtype`, or a C-contiguous read-only numpy array of it), holding math.prod(shape)
        # values. Skips checking and copying them again.
        tensor = object.__new__(cls)
        _set_values(tensor, data)
        _set_dtype(tensor, dtype)
        _set_shape(tensor, shape)
        _set_crow(tensor, None)
        _set_col(tensor, None)
        return tensor

    @classmethod
    def _own(cls, arr: npt.NDArray[Any]) -> TensorData:
        # `arr` is a new array from _coerce_array, which nothing else holds: kept, not copied.
        flat = arr.reshape(-1)
        flat.flags.writeable = False
        return cls._trusted(flat, _dtype_name(arr.dtype), list(arr.shape))

    @property
    def _numpy(self) -> npt.NDArray[Any]:
        """The stored values as a flat read-only numpy array (imports numpy; no copy)."""
        stored: FlatValues = self._values
        if isinstance(stored, array):
            view = _flat_numpy(stored)
            # Kept, so later calls (and the encoders) reuse the one view.
            object.__setattr__(self, "_values", view)
            return view
        return stored

    @property
    def data(self) -> list[Any]:
        """The values as a flat Python list (the stored values only, for a sparse tensor)."""
        values: list[Any] = self._values.tolist()
        return values

    @property
    def is_sparse(self) -> bool:
        """Whether the tensor is sparse CSR."""
        return self.sparse_crow_indices is not None

    def _dims(self) -> list[int]:
        return self.shape if self.shape is not None else [len(self._values)]

    def _stored_min(self) -> Any:
        """The smallest stored value (None when there are none), without importing numpy."""
        lowest = getattr(self, "_memo_min", _UNKNOWN)
        if lowest is _UNKNOWN:
            values = self._values
            if not len(values):
                lowest = None
            else:
                lowest = values.min() if _is_numpy_array(values) else min(values)
            object.__setattr__(self, "_memo_min", lowest)
        return lowest

    def _stored_max(self) -> Any:
        """The largest stored value (None when there are none), without importing numpy."""
        highest = getattr(self, "_memo_max", _UNKNOWN)
        if highest is _UNKNOWN:
            values = self._values
            if not len(values):
                highest = None
            else:
                highest = values.max() if _is_numpy_array(values) else max(values)
            object.__setattr__(self, "_memo_max", highest)
        return highest

    def _first_non_finite(self) -> int | None:
        """The position of the first NaN/Inf stored value, None when all are finite."""
        position: int | None = getattr(self, "_memo_non_finite", _UNKNOWN)
        if position is _UNKNOWN:
            position = self._scan_non_finite()
            object.__setattr__(self, "_memo_non_finite", position)
        return position

    def _scan_non_finite(self) -> int | None:
        values = self._values
        if self.dtype != "float32" or not len(values):
            return None
        if isinstance(values, array):
            if all(map(math.isfinite, values)):
                return None
            return next(i for i, value in enumerate(values) if not math.isfinite(value))
        import numpy as np

        finite = np.isfinite(values)
        if bool(finite.all()):
            return None
        return int(np.flatnonzero(~finite)[0])

    def _dense_flat(self, pad_value: float = 0) -> npt.NDArray[Any]:
        """The dense values as a flat read-only numpy array (no copy for a dense tensor)."""
        if self.sparse_crow_indices is None or self.sparse_col_indices is None:
            return self._numpy
        import numpy as np

        assert self.shape is not None  # checked by __init__
        dense = _csr_to_dense(
            self._numpy,
            np.asarray(self.sparse_crow_indices, dtype=np.int64),
            np.asarray(self.sparse_col_indices, dtype=np.int64),
            self.shape,
            pad_value,
        )
        dense.flags.writeable = False
        return dense

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
    def from_torch_sparse(cls, tensor: Any, pad_value: int = 0) -> TensorData:
        """Build a sparse CSR tensor from a dense 2-D torch tensor, leaving out ``pad_value``.

        Falls back to a dense tensor when the input is not 2-D or CSR would not be smaller.
        """
        if not _is_torch_tensor(tensor):
            raise InvalidInputError(
                "tensor", f"must be a torch.Tensor, got {type(tensor).__name__}"
            )
        return cls.from_numpy_sparse(_torch_to_numpy(tensor), pad_value)

    @classmethod
    def from_numpy_sparse(cls, array: npt.NDArray[Any], pad_value: int = 0) -> TensorData:
        """Build a sparse CSR tensor from a dense 2-D array, leaving out ``pad_value``.

        Falls back to a dense tensor when the input is not 2-D or CSR would not be smaller.
        """
        import numpy as np

        pad = _check_int("pad_value", pad_value)
        arr = _coerce_array("array", array, None)
        if arr.ndim != 2:
            return cls._own(arr)
        kept = arr != pad
        nnz = int(kept.sum())
        if arr.shape[0] + 1 + 2 * nnz >= arr.size:
            return cls._own(arr)
        crow = np.zeros(arr.shape[0] + 1, dtype=np.int64)
        np.cumsum(kept.sum(axis=1), out=crow[1:])
        return cls(
            data=arr[kept],
            dtype=_dtype_name(arr.dtype),
            shape=list(arr.shape),
            sparse_crow_indices=crow.tolist(),
            sparse_col_indices=np.nonzero(kept)[1].tolist(),
        )

    @classmethod
    def from_list(cls, values: Sequence[Any], dtype: TensorDtype) -> TensorData:
        """Build from a (nested, rectangular) list cast to ``dtype``, keeping its shape."""
        flat, shape = _coerce_values("values", values, dtype)
        return cls._trusted(flat, dtype, shape)

    def to_numpy(self, pad_value: int = 0) -> npt.NDArray[Any]:
        """Return a writable array of the values shaped to ``shape`` (sparse: densified)."""
        dense = self._dense_flat(pad_value)
        arr: npt.NDArray[Any] = dense.copy()
        return arr.reshape(self.shape) if self.shape is not None else arr

    def to_torch(self, pad_value: int = 0) -> Any:
        """Return the values as a torch tensor shaped to ``shape`` (needs torch installed)."""
        try:
            import torch
        except ImportError as exc:
            raise InvalidInputError(
                "to_torch", "torch is not installed", "pip install torch, or use to_numpy()"
            ) from exc
        return torch.from_numpy(self.to_numpy(pad_value))

    def tolist(self, pad_value: int = 0) -> list[Any]:
        """Return the values as a Python list nested to ``shape`` (sparse: densified)."""
        if self.is_sparse or _is_numpy_array(self._values):
            dense = self._dense_flat(pad_value)
            nested: list[Any] = (dense.reshape(self.shape) if self.shape else dense).tolist()
            return nested
        return _nest(self._values.tolist(), self.shape or ())

    @property
    def size(self) -> int:
        """Number of values of the dense tensor."""
        return math.prod(self._dims())


# The slots' own setters: a decoder makes a tensor per datum, and these cost half of
# object.__setattr__ on a frozen class.
_set_values, _set_dtype, _set_shape, _set_crow, _set_col = (
    TensorData.__dict__[name].__set__
    for name in ("_values", "dtype", "shape", "sparse_crow_indices", "sparse_col_indices")
)
