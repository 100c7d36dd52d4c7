"""``EventType`` (official module ``tinker.types.event_type``)."""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = ["EventType"]

EventType: TypeAlias = Literal[
    "SESSION_START", "SESSION_END", "UNHANDLED_EXCEPTION", "GENERIC_EVENT"
]
