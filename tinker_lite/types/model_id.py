"""``ModelID`` (official module ``tinker.types.model_id``)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["ModelID"]

ModelID: TypeAlias = str
