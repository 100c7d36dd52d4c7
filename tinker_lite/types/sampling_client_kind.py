"""``SamplingClientKind`` (official module ``tinker.types.sampling_client_kind``)."""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = ["SamplingClientKind"]

# "snapshot": fixed saved weights; "inflight": weights shared with the training model.
SamplingClientKind: TypeAlias = Literal["snapshot", "inflight"]
