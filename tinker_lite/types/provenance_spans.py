"""Provenance of datum positions (official module ``tinker.types.provenance_spans``)."""

from __future__ import annotations

import attrs

from ._common import _check_int, _check_str

__all__ = ["PromptProvenanceSpan", "ProvenanceSpans", "SampledProvenanceSpan"]


def _check_span(owner: str, span: PromptProvenanceSpan | SampledProvenanceSpan) -> None:
    _check_str(f"{owner}.sequence_id", span.sequence_id, hint="use SampledSequence.sequence_id")
    _check_int(f"{owner}.offset", span.offset, minimum=0)
    _check_int(f"{owner}.length", span.length, minimum=0)


@attrs.frozen(kw_only=True)
class PromptProvenanceSpan:
    """Positions ``[offset, offset + length)`` of the named sequence's request prompt."""

    sequence_id: str
    offset: int = 0
    length: int

    def __attrs_post_init__(self) -> None:
        _check_span("PromptProvenanceSpan", self)


@attrs.frozen(kw_only=True)
class SampledProvenanceSpan:
    """Positions ``[offset, offset + length)`` of the named sequence's sampled tokens."""

    sequence_id: str
    offset: int = 0
    length: int

    def __attrs_post_init__(self) -> None:
        _check_span("SampledProvenanceSpan", self)


ProvenanceSpans = list[PromptProvenanceSpan | SampledProvenanceSpan]
