"""``LossFnInputs`` and ``LOSS_FN_INPUT_DTYPES``.

Official module ``tinker.types.loss_fn_inputs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from tinker_lite._errors import InvalidInputError

from ._common import _coerce_array, _coerce_values, _is_numpy_array, _is_torch_tensor
from .tensor_data import TensorData
from .tensor_dtype import TensorDtype

# The inputs of a loss function, by name (0.38 type alias).
LossFnInputs: TypeAlias = dict[str, TensorData]

# docs/protocol.rst §3.3: dtype of a Python list per loss_fn_inputs key.
LOSS_FN_INPUT_DTYPES: Mapping[str, TensorDtype] = {
    "target_tokens": "int64",
    "weights": "float32",
    "advantages": "float32",
    "logprobs": "float32",
    "clip_low_threshold": "float32",
    "clip_high_threshold": "float32",
    "sequence_ratio_mask": "float32",
}


# Keys aligned with model_input: one value per input position.
_PER_TOKEN_KEYS = frozenset({"target_tokens", "weights", "advantages", "logprobs"})


def _loss_fn_input(key: str, value: object) -> TensorData:
    field = f"loss_fn_inputs[{key!r}]"
    dtype = LOSS_FN_INPUT_DTYPES.get(key)
    try:
        if isinstance(value, TensorData):
            if dtype is None or value.dtype == dtype:
                return value
            if value.is_sparse:
                return TensorData(
                    value._values,
                    dtype,
                    value.shape,
                    value.sparse_crow_indices,
                    value.sparse_col_indices,
                )
            # value._values is flat and holds math.prod(value.shape) values: only the cast is new.
            if _is_numpy_array(value._values):
                arr = _coerce_array(field, value._values, dtype)
                arr.flags.writeable = False
                return TensorData._trusted(arr, dtype, value.shape)
            cast, _ = _coerce_values(field, value._values.tolist(), dtype)
            return TensorData._trusted(cast, dtype, value.shape)
        if _is_numpy_array(value) or _is_torch_tensor(value):
            arr = _coerce_array(field, value, dtype)
        elif isinstance(value, (list, tuple)):
            if dtype is None:
                raise InvalidInputError(
                    field,
                    "a plain list needs a known key to pick its dtype",
                    f"known keys: {', '.join(LOSS_FN_INPUT_DTYPES)}; for other keys pass a "
                    "numpy array or TensorData",
                )
            flat, shape = _coerce_values(field, value, dtype)
            return TensorData._trusted(flat, dtype, shape)
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
