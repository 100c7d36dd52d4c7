"""``Datum`` (official module ``tinker.types.datum``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import attrs

from tinker_lite._errors import InvalidInputError

from .encoded_text_chunk import EncodedTextChunk
from .loss_fn_inputs import _PER_TOKEN_KEYS, _convert_loss_fn_inputs
from .model_input import ModelInput, check_dmel_headers
from .provenance_spans import PromptProvenanceSpan, ProvenanceSpans, SampledProvenanceSpan
from .tensor_data import TensorData


def _model_input_spans(value: Iterable[Any] | None) -> ProvenanceSpans | None:
    return _convert_spans("model_input_spans", value)


def _loss_fn_input_spans(value: Iterable[Any] | None) -> ProvenanceSpans | None:
    return _convert_spans("loss_fn_input_spans", value)


@attrs.frozen
class Datum:
    """One training example: the model input and the loss function's per-token inputs.

    Each ``loss_fn_inputs`` value may be a TensorData, a numpy array, a torch tensor or a plain
    list; lists take their dtype from the key (docs/protocol.rst §3.3). Per-token inputs
    (target_tokens, weights, advantages, logprobs) must have shape ``(N,)`` or ``(N, K)`` with
    ``N = model_input.length``, and ``target_tokens`` must be non-negative integers.
    """

    # The wire writes loss_fn_inputs first (docs/protocol.rst §3.1); _wire orders the keys itself.
    model_input: ModelInput
    loss_fn_inputs: dict[str, TensorData] = attrs.field(
        factory=dict, converter=_convert_loss_fn_inputs
    )
    # Provenance of the positions (0.38), attached with with_provenance(); see ProvenanceSpans.
    model_input_spans: ProvenanceSpans | None = attrs.field(
        default=None, converter=_model_input_spans
    )
    loss_fn_input_spans: ProvenanceSpans | None = attrs.field(
        default=None, converter=_loss_fn_input_spans
    )

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
        check_positions(self, "")
        if (self.model_input_spans is None) != (self.loss_fn_input_spans is None):
            raise InvalidInputError(
                "model_input_spans/loss_fn_input_spans",
                "provenance comes as a pair: only one is set",
                "attach both with datum.with_provenance(model_input=..., loss_fn_inputs=...)",
            )

    def with_provenance(
        self, model_input: ProvenanceSpans, loss_fn_inputs: ProvenanceSpans
    ) -> Datum:
        """Return a copy carrying provenance: runs tiling the input tokens and the loss rows.

        ``model_input`` spans must cover ``model_input.length`` positions and ``loss_fn_inputs``
        spans the rows of a 1-D ``target_tokens``; a miscount fails here, not on the service.
        """
        _check_tiling("model_input", model_input, self.model_input.length)
        targets = self.loss_fn_inputs.get("target_tokens")
        if targets is not None and len(targets._dims()) == 1:
            _check_tiling("loss_fn_inputs", loss_fn_inputs, targets._dims()[0])
        return attrs.evolve(self, model_input_spans=model_input, loss_fn_input_spans=loss_fn_inputs)


def _convert_spans(field: str, value: Iterable[Any] | None) -> ProvenanceSpans | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidInputError(field, f"must be a list of spans, got {type(value).__name__}")
    spans = list(value)
    for index, span in enumerate(spans):
        if not isinstance(span, (PromptProvenanceSpan, SampledProvenanceSpan)):
            raise InvalidInputError(
                f"{field}[{index}]",
                f"must be a PromptProvenanceSpan or SampledProvenanceSpan, got "
                f"{type(span).__name__}",
            )
    return spans


def _check_tiling(field: str, spans: ProvenanceSpans, expected: int) -> None:
    spans = _convert_spans(field, spans) or []
    total = sum(span.length for span in spans)
    if total != expected:
        raise InvalidInputError(
            field,
            f"spans cover {total} positions but the field has {expected}",
            "the runs must tile it exactly: their lengths add up to its length",
        )


def check_positions(datum: Datum, prefix: str, *, sending: bool = False) -> None:
    """Raise InvalidInputError unless every per-token input lines up with the model input.

    docs/service.rst §1.1: a per-token input has shape ``(N,)`` or ``(N, K)`` with
    ``N = model_input.length``; a ``[1, N]`` batch dimension is refused by the service, so it
    is refused here, before sending. ``prefix`` names the datum (``"data[3]."``) in a batch.
    ``sending`` refuses an audio chunk whose TensorContainer header is malformed (a datum is
    built with one, as in 0.38).
    """
    # The input length, unless an image of unknown token count (or a malformed audio header)
    # makes it unknown.
    length = 0
    check_length = True
    for chunk in datum.model_input.chunks:
        try:
            positions = chunk.length
        except InvalidInputError:  # DmelChunk.length: the header is malformed
            if sending:
                check_dmel_headers(datum.model_input, f"{prefix}model_input")
            positions = 0
        if not positions and not isinstance(chunk, EncodedTextChunk):
            check_length = False
        length += positions
    for key, tensor in datum.loss_fn_inputs.items():
        if key not in _PER_TOKEN_KEYS:
            continue
        if not isinstance(tensor, TensorData):
            raise InvalidInputError(
                f"{prefix}loss_fn_inputs[{key!r}]",
                f"must be a TensorData, got {type(tensor).__name__}",
                "build the Datum again with the new inputs instead of changing its dict",
            )
        shape = tensor._dims()
        if len(shape) not in (1, 2):
            raise InvalidInputError(
                f"{prefix}loss_fn_inputs[{key!r}]",
                f"must be 1-D or 2-D, got shape {shape}",
                f"use shape ({length},) or ({length}, k): one value or row per input position",
            )
        if check_length and len(shape) == 2 and shape[0] == 1 and length > 1:
            raise InvalidInputError(
                f"{prefix}loss_fn_inputs[{key!r}]",
                f"has shape {shape}: a leading batch dimension of 1, which the service refuses",
                f"drop it, e.g. array.reshape(-1) or array[0], to get shape ({length},)",
            )
        # Rows line up with the input; a layout whose element count equals the input length is
        # let through too (golden-0.38 forward_backward_numpy_2d: the official SDK sends it).
        if check_length and shape[0] != length and math.prod(shape) != length:
            raise InvalidInputError(
                f"{prefix}loss_fn_inputs[{key!r}]",
                f"has {shape[0]} positions (shape {shape}) but model_input.length is {length}",
                "give one value (or one row of k values) per model input position",
            )
        lowest = tensor._stored_min() if key == "target_tokens" else None
        if lowest is not None and lowest < 0:
            raise InvalidInputError(
                f"{prefix}loss_fn_inputs[{key!r}]",
                "token ids must be non-negative",
                "use vocabulary indices",
            )
