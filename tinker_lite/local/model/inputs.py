"""A training batch for the tiny model, checked against its loss's inputs and grouped by length.

Every problem is a :class:`~tinker_lite.local.refusals.UserInputError` naming the datum and the
key, raised before the model is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from tinker_lite.local.model.errors import UserInputError
from tinker_lite.local.model.losses import LOSS_INPUTS

__all__ = ["DatumArrays", "Prepared", "as_int_tokens", "length_groups", "prepare_batch"]

Array = npt.NDArray[Any]

# Training runs in groups of similar-length datums (within a factor 2), padded to the group's
# longest one. Small groups keep every activation in cache; a longer datum is a group of its own.
_GROUP_MAX_TOKENS: Final = 256


@dataclass(frozen=True, eq=False)
class DatumArrays:
    """One training datum as arrays: the model input tokens and its ``loss_fn_inputs``.

    ``tokens`` is int64 of shape (N,); ``inputs`` maps each loss input name to an array whose first
    dimension is N (``target_tokens`` int64 (N,) or (N, K); float32 for the others).
    """

    tokens: Array
    inputs: dict[str, Array]


def as_int_tokens(values: Any, what: str, vocab_size: int, where: str) -> Array:
    """``values`` as int64 token ids in [0, vocab_size); a user error naming ``what`` otherwise."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and arr.size and not np.all(np.isfinite(arr)):
            raise UserInputError(f"NonFiniteInTensor: {what} contains NaN or Inf{where}")
        if arr.dtype.kind not in "fb" and arr.size:
            raise UserInputError(
                f"{what} must hold integer token ids, got dtype {arr.dtype}{where}"
            )
        if arr.size and not np.array_equal(arr, np.round(arr)):
            raise UserInputError(f"{what} must hold integer token ids{where}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise UserInputError(
                f"{what} contains token id {bad}, outside the vocabulary [0, {vocab_size}){where}"
            )
    return arr


@dataclass(frozen=True, eq=False)
class Prepared:
    """A validated datum: tokens (N,), targets (N, K), float inputs (N, K) or (N,)."""

    tokens: Array
    targets: Array
    two_dim: bool
    floats: dict[str, Array]


def prepare_batch(
    batch: Sequence[DatumArrays], loss_fn: str, *, vocab_size: int, context_length: int
) -> list[Prepared]:
    """Check a batch against ``loss_fn``'s inputs; user errors name the datum and the key."""
    required, optional = LOSS_INPUTS[loss_fn]
    allowed = (*required, *optional)
    prepared: list[Prepared] = []
    for index, datum in enumerate(batch):
        where = f" (datum {index})"
        tokens = np.asarray(datum.tokens)
        if tokens.ndim != 1:
            raise UserInputError(f"model_input tokens must be 1-D, got shape {tokens.shape}")
        n = tokens.shape[0]
        if n == 0:
            raise UserInputError(f"model_input is empty; a datum needs at least one token{where}")
        if n > context_length:
            raise UserInputError(
                f"PromptTooLong: model_input length {n} exceeds the model's context length "
                f"{context_length}{where}"
            )
        tokens = as_int_tokens(tokens, "model_input", vocab_size, where)
        for key in datum.inputs:
            if key not in allowed:
                raise UserInputError(
                    "Could not convert loss function inputs to array record: unexpected key "
                    f"{key!r} for loss {loss_fn}; expected {sorted(allowed)}{where}"
                )
        for key in required:
            if key not in datum.inputs:
                raise UserInputError(
                    "Could not convert loss function inputs to array record: missing key "
                    f"{key!r} for loss {loss_fn}; expected {sorted(allowed)}{where}"
                )
        arrays = {key: np.asarray(value) for key, value in datum.inputs.items()}
        for key, arr in arrays.items():
            if arr.ndim == 0 or arr.shape[0] != n:
                length = 0 if arr.ndim == 0 else arr.shape[0]
                raise UserInputError(
                    f"loss_fn_inputs[{key}] has length {length}, expected {n} = "
                    f"model_input.length{where}"
                )
        raw_targets = arrays["target_tokens"]
        two_dim = raw_targets.ndim == 2
        if raw_targets.ndim not in (1, 2) or (two_dim and loss_fn != "cross_entropy"):
            dims = "(N,) or (N, K)" if loss_fn == "cross_entropy" else "(N,)"
            raise UserInputError(
                f"loss_fn_inputs[target_tokens] must have shape {dims} for loss {loss_fn}, "
                f"got {raw_targets.shape}{where}"
            )
        if two_dim and raw_targets.shape[1] == 0:
            raise UserInputError(f"loss_fn_inputs[target_tokens] has K = 0 columns{where}")
        targets = as_int_tokens(
            raw_targets, "loss_fn_inputs[target_tokens]", vocab_size, where
        ).reshape(n, -1)
        floats: dict[str, Array] = {}
        for key, arr in arrays.items():
            if key == "target_tokens":
                continue
            if arr.dtype.kind not in "iufb":
                raise UserInputError(f"loss_fn_inputs[{key}] must be numeric{where}")
            values = arr.astype(np.float64)
            if not np.all(np.isfinite(values)):
                raise UserInputError(
                    f"NonFiniteInTensor: loss_fn_inputs[{key}] contains NaN or Inf{where}"
                )
            if key == "weights":
                if values.shape != raw_targets.shape:
                    raise UserInputError(
                        f"loss_fn_inputs[weights] has shape {values.shape}, expected "
                        f"{raw_targets.shape} (the shape of target_tokens){where}"
                    )
                values = values.reshape(n, -1)
            elif values.ndim != 1:
                raise UserInputError(
                    f"loss_fn_inputs[{key}] must have shape (N,), got {values.shape}{where}"
                )
            floats[key] = values
        if loss_fn == "cross_entropy" and "weights" not in floats:
            # docs/service.rst §1.2: whether weights are optional is undocumented; missing =
            # all ones.
            floats["weights"] = np.ones(targets.shape, dtype=np.float64)
        prepared.append(Prepared(tokens, targets, two_dim, floats))
    return prepared


def length_groups(prepared: Sequence[Prepared]) -> list[list[int]]:
    """Partition datum indices into groups of similar length, longest first."""
    order = sorted(range(len(prepared)), key=lambda i: -prepared[i].tokens.shape[0])
    groups: list[list[int]] = []
    current: list[int] = []
    group_len = 0
    for index in order:
        n = prepared[index].tokens.shape[0]
        fits = (len(current) + 1) * group_len <= _GROUP_MAX_TOKENS and 2 * n >= group_len
        if current and fits:
            current.append(index)
        else:
            if current:
                groups.append(current)
            current, group_len = [index], n
    if current:
        groups.append(current)
    return groups
