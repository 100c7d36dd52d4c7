"""``StopReason`` (official module ``tinker.types.stop_reason``)."""

from __future__ import annotations

from ._common import _LenientStrEnum


class StopReason(_LenientStrEnum):
    """Why a sampled sequence ended (``seq.stop_reason == "length"`` works)."""

    LENGTH = "length"
    STOP = "stop"
