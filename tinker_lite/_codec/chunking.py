"""Split forward/forward_backward batches into requests (docs/protocol.rst §7.4) and merge the
per-request results (§7.5).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from tinker_lite import types
from tinker_lite._errors import WireFormatError

__all__ = ["DEFAULT_LIMITS", "ChunkLimits", "combine_outputs", "datum_sizes", "plan_chunks"]

# docs/protocol.rst §7.4 (0.4.1): MAX_CHUNK_LEN and MAX_CHUNK_NUMBER_COUNT.
MAX_CHUNK_LEN = 128
MAX_CHUNK_NUMBER_COUNT = 500_000

_REDUCTIONS = frozenset({"mean", "sum", "min", "max", "slack", "unique", "hash_unordered"})


@attrs.frozen
class ChunkLimits:
    """How many datums, and how large a payload, one forward/forward_backward request may carry.

    The size limit is ``max_bytes`` (estimated protobuf bytes) when it is set, else
    ``max_numbers`` (None for none); docs/protocol.rst §7.4 defines both.
    """

    max_datums: int = MAX_CHUNK_LEN
    max_numbers: int | None = MAX_CHUNK_NUMBER_COUNT
    max_bytes: int | None = None

    def size_of(self, datum: types.Datum) -> int:
        """The datum's size in this limit's unit (numbers or estimated bytes)."""
        return datum_sizes(datum)[0 if self.max_bytes is None else 1]

    @property
    def max_size(self) -> int | None:
        """The size limit in this limit's unit (None for none)."""
        return self.max_bytes if self.max_bytes is not None else self.max_numbers

    @property
    def unit(self) -> str:
        """Name of the size unit, for messages."""
        return "estimated bytes" if self.max_bytes is not None else "numbers"


DEFAULT_LIMITS = ChunkLimits()


def datum_sizes(datum: types.Datum) -> tuple[int, int]:
    """A datum's number count and estimated protobuf bytes (docs/protocol.rst §7.4)."""
    numbers = 0
    estimate = 0
    for chunk in datum.model_input.chunks:
        positions = chunk.length
        numbers += positions
        if isinstance(chunk, types.EncodedTextChunk):
            estimate += 4 * positions
        elif isinstance(chunk, types.ImageChunk):
            estimate += len(chunk.data)
        elif isinstance(chunk, types.ImageAssetPointerChunk):
            estimate += len(chunk.location)
        else:  # audio: its TensorContainer bytes
            estimate += len(chunk.dmel)
    for tensor in datum.loss_fn_inputs.values():
        size = tensor.size
        numbers += size
        estimate += size * tensor._values.itemsize  # sent dense, also when sparse
    return numbers, estimate


def plan_chunks(sizes: Sequence[int], limits: ChunkLimits) -> list[range]:
    """Split datum indices (``sizes`` in ``limits``' unit) into chunks per docs/protocol.rst §7.4.

    A datum over the size limit is a chunk of its own (validate refuses it first).
    """
    chunks: list[range] = []
    start = 0
    current = 0
    max_size = limits.max_size
    for index, size in enumerate(sizes):
        count = index - start
        if count > 0 and (
            count >= limits.max_datums or (max_size is not None and current + size > max_size)
        ):
            chunks.append(range(start, index))
            start = index
            current = 0
        current += size
    if len(sizes) > start:
        chunks.append(range(start, len(sizes)))
    return chunks


def combine_outputs(outputs: Sequence[types.ForwardBackwardOutput]) -> types.ForwardBackwardOutput:
    """Merge per-chunk results into one, as the official SDK does (docs/protocol.rst §7.5 gives
    every reduction); a key that is not ``name:reduction`` raises :class:`WireFormatError`.
    """
    if not outputs:
        return types.ForwardBackwardOutput(loss_fn_output_type="", loss_fn_outputs=[], metrics={})
    weights = [float(len(out.loss_fn_outputs)) for out in outputs]
    metrics: dict[str, float] = {}
    for key in outputs[0].metrics:
        parts = key.split(":")
        if len(parts) != 2:
            raise WireFormatError(
                f"metric {key!r} returned by the server is not of the form 'name:reduction' "
                f"(expected exactly one ':'; reductions: {', '.join(sorted(_REDUCTIONS))})"
            )
        reduction = parts[1]
        if reduction not in _REDUCTIONS or any(key not in out.metrics for out in outputs):
            continue
        values = [float(out.metrics[key]) for out in outputs]
        if reduction == "unique":
            metrics[key] = values[0]
            for index, value in enumerate(values[1:], start=1):
                metrics[f"{key}_{index}"] = value
        else:
            metrics[key] = _reduce(reduction, values, weights)
    return types.ForwardBackwardOutput(
        loss_fn_output_type=outputs[0].loss_fn_output_type,
        loss_fn_outputs=[item for out in outputs for item in out.loss_fn_outputs],
        metrics=metrics,
    )


def _weighted_mean(values: list[float], weights: list[float]) -> float:
    import numpy as np

    # No weights (no outputs at all): a plain mean, where the official SDK raises
    # ZeroDivisionError (docs/protocol.rst §7.5).
    return float(np.average(values, weights=weights if sum(weights) else None))


def _reduce(reduction: str, values: list[float], weights: list[float]) -> float:
    if reduction == "mean":
        return _weighted_mean(values, weights)
    if reduction == "sum":
        return float(sum(values))
    if reduction == "min":
        return float(min(values))
    if reduction == "max":
        return float(max(values))
    if reduction == "slack":
        return float(max(values) - _weighted_mean(values, weights))
    # hash_unordered (docs/protocol.rst §7.5)
    return float(hash(tuple(sorted(int(v) for v in values))))
