"""``RequestID`` (official module ``tinker.types.request_id``)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["RequestID"]

RequestID: TypeAlias = str
