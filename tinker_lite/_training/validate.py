"""The checks ``TrainingClient.forward`` / ``forward_backward`` run before sending; called directly,
whether a batch would be accepted and how it would be split, without a server."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from tinker_lite import types
from tinker_lite._codec.chunking import (
    DEFAULT_LIMITS,
    ChunkLimits,
    datum_sizes,
    plan_chunks,
)
from tinker_lite._errors import InvalidInputError

__all__ = ["LOSS_FN_INPUTS", "ValidationReport", "validate"]

# Required and optional loss_fn_inputs keys per built-in loss (docs/service.rst §1.2-§1.6;
# docs/protocol.rst §3.3).
_RL_REQUIRED = frozenset({"target_tokens", "logprobs", "advantages"})
_CLIP_KEYS = frozenset({"clip_low_threshold", "clip_high_threshold"})
LOSS_FN_INPUTS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    "cross_entropy": (frozenset({"target_tokens"}), frozenset({"weights"})),
    "importance_sampling": (_RL_REQUIRED, frozenset()),
    "ppo": (_RL_REQUIRED, _CLIP_KEYS),
    "cispo": (_RL_REQUIRED, _CLIP_KEYS),
    "dro": (_RL_REQUIRED, frozenset()),
}
# Keys aligned with target_tokens (one value, or one row, per input position; types'
# _PER_TOKEN_KEYS), checked in a fixed order so the same batch always reports the same key.
_ALIGNED_KEYS = ("advantages", "logprobs", "weights")


@attrs.frozen
class ValidationReport:
    """What a batch would become on the wire.

    ``n_chunks`` requests would be sent (one ``seq_id`` each); ``chunks`` are their datum index
    ranges; ``n_numbers`` counts tokens plus loss-input values (docs/protocol.rst §7.4) and
    ``estimated_bytes`` the estimated protobuf payload (docs/protocol.rst §7.4).
    """

    loss_fn: str
    n_datums: int
    n_chunks: int
    n_numbers: int
    estimated_bytes: int
    chunks: tuple[range, ...] = attrs.field(repr=False)
    limits: ChunkLimits = attrs.field(repr=False)


def validate(
    data: Sequence[types.Datum],
    loss_fn: str | types.LossFnType = "cross_entropy",
    loss_fn_config: Mapping[str, float | str] | None = None,
    *,
    limits: ChunkLimits | None = None,
    vocab_size: int | None = None,
) -> ValidationReport:
    """Check a forward/forward_backward batch as the training client does; return its report.

    Raises :class:`~tinker_lite.InvalidInputError` naming the datum and field for: an unknown
    loss function, a missing required input for the loss (cross_entropy: ``target_tokens``,
    optional ``weights``; importance_sampling / ppo / cispo / dro: ``target_tokens``,
    ``logprobs``, ``advantages``), an input the loss does not take, per-token inputs of
    different shapes, NaN/Inf values, token ids outside the vocabulary (when ``vocab_size`` is
    known), and a single datum larger than one request may carry (``limits``: the server's
    chunk limits, by default 128 datums / 500,000 numbers).
    """
    loss_name = types.check_loss_fn(loss_fn)
    limits = limits or DEFAULT_LIMITS
    if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Sequence):
        raise InvalidInputError(
            "data", f"must be a list of Datum, got {type(data).__name__}", "pass [Datum(...), ...]"
        )
    data = list(data)
    if data:
        # Datum types, loss_fn_config values: the request model's own checks.
        types.ForwardBackwardInput(
            data=data,
            loss_fn=loss_name,
            loss_fn_config=dict(loss_fn_config) if loss_fn_config is not None else None,
        )
    expected = LOSS_FN_INPUTS.get(loss_name)
    sizes: list[int] = []
    n_numbers = 0
    n_bytes = 0
    max_size = limits.max_size
    for index, datum in enumerate(data):
        _check_chunks(index, datum)
        if expected is not None:
            _check_keys(index, datum, loss_name, *expected)
        _check_values(index, datum, vocab_size)
        numbers, estimate = datum_sizes(datum)
        size = estimate if limits.max_bytes is not None else numbers
        if max_size is not None and size > max_size:
            raise InvalidInputError(
                f"data[{index}]",
                f"holds {size} {limits.unit}, more than the {max_size} one request may carry",
                "split the sequence into shorter datums",
            )
        sizes.append(size)
        n_numbers += numbers
        n_bytes += estimate
    chunks = tuple(plan_chunks(sizes, limits))
    return ValidationReport(
        loss_fn=loss_name,
        n_datums=len(data),
        n_chunks=len(chunks),
        n_numbers=n_numbers,
        estimated_bytes=n_bytes,
        chunks=chunks,
        limits=limits,
    )


def _check_chunks(index: int, datum: types.Datum) -> None:
    # docs/service.rst §2: the service fails a datum with an empty token chunk.
    for position, chunk in enumerate(datum.model_input.chunks):
        if isinstance(chunk, types.EncodedTextChunk) and not chunk.length:
            raise InvalidInputError(
                f"data[{index}].model_input.chunks[{position}].tokens",
                "is empty, which the service refuses in a training datum",
                "leave the empty chunk out of the datum",
            )


def _check_keys(
    index: int,
    datum: types.Datum,
    loss_name: str,
    required: frozenset[str],
    optional: frozenset[str],
) -> None:
    names = datum.loss_fn_inputs.keys()
    missing = sorted(required - names)
    if missing:
        raise InvalidInputError(
            f"data[{index}].loss_fn_inputs",
            f"{loss_name} needs {', '.join(repr(k) for k in missing)}",
            f"{loss_name} takes {_describe_keys(required, optional)}",
        )
    extra = sorted(names - required - optional)
    if extra:
        raise InvalidInputError(
            f"data[{index}].loss_fn_inputs",
            f"{loss_name} does not take {', '.join(repr(k) for k in extra)}",
            f"the service rejects unknown inputs; {loss_name} takes "
            f"{_describe_keys(required, optional)} (fold a mask into weights or advantages)",
        )


def _describe_keys(required: frozenset[str], optional: frozenset[str]) -> str:
    text = ", ".join(sorted(required))
    if optional:
        text += " (optional: " + ", ".join(sorted(optional)) + ")"
    return text


def _check_values(index: int, datum: types.Datum, vocab_size: int | None) -> None:
    # Reads stored values through TensorData's own helpers (no numpy for list-built tensors),
    # which cache what they find, so a batch sent again is not scanned again.
    target_shape: list[int] | None = None
    for key, tensor in datum.loss_fn_inputs.items():
        expected_dtype = types.LOSS_FN_INPUT_DTYPES.get(key)
        if expected_dtype is not None and tensor.dtype != expected_dtype:
            raise InvalidInputError(
                _input_field(index, key), f"must be {expected_dtype}, got {tensor.dtype}"
            )
        # A sparse tensor's other values are 0: its stored values tell whether all are finite.
        bad = tensor._first_non_finite()
        if bad is not None:
            position = _dense_position(tensor, bad)
            raise InvalidInputError(
                _input_field(index, key),
                f"holds a non-finite value ({tensor._values[bad]!r}) at position {position}",
                "replace NaN/Inf before sending, e.g. with np.nan_to_num",
            )
        if key == "target_tokens":
            target_shape = tensor.shape if tensor.shape is not None else [tensor.size]
            if vocab_size is not None:
                _check_vocab(_input_field(index, key), tensor._stored_max(), vocab_size)
    if target_shape is not None:
        for key in _ALIGNED_KEYS:
            other = datum.loss_fn_inputs.get(key)
            if other is None:
                continue
            shape = other.shape if other.shape is not None else [other.size]
            if shape != target_shape and other.size != math.prod(target_shape):
                raise InvalidInputError(
                    _input_field(index, key),
                    f"has shape {shape} but target_tokens has shape {target_shape}",
                    "give every per-token input one value per target token",
                )
    if vocab_size is not None:
        for chunk_index, chunk in enumerate(datum.model_input.chunks):
            if isinstance(chunk, types.EncodedTextChunk):
                field = f"data[{index}].model_input.chunks[{chunk_index}].tokens"
                _check_vocab(field, chunk._max_id(), vocab_size)


def _input_field(index: int, key: str) -> str:
    return f"data[{index}].loss_fn_inputs[{key!r}]"


def _dense_position(tensor: types.TensorData, stored: int) -> int:
    """The flat dense position of the ``stored``-th stored value (itself for a dense tensor)."""
    crow, cols = tensor.sparse_crow_indices, tensor.sparse_col_indices
    if crow is None or cols is None or tensor.shape is None:
        return stored
    row = next(r for r in range(len(crow) - 1) if crow[r] <= stored < crow[r + 1])
    return row * tensor.shape[1] + cols[stored]


def _check_vocab(field: str, highest: Any, vocab_size: int) -> None:
    """Refuse a largest id (None: no ids) outside a vocabulary of ``vocab_size``."""
    if highest is not None and int(highest) >= vocab_size:
        raise InvalidInputError(
            field,
            f"token id {int(highest)} is outside the model's vocabulary (size {vocab_size})",
            "use ids from the model's tokenizer",
        )
