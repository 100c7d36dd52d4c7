"""``CustomLossInput`` (official module ``tinker.types.custom_loss_input``)."""

from __future__ import annotations

from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_str

__all__ = ["CustomLossInput", "CustomLossInputRank"]

CustomLossInputRank = Literal[0, 1, 2]


@attrs.frozen(kw_only=True)
class CustomLossInput:
    """A named input of a server-side custom loss and its tensor rank (0, 1 or 2)."""

    name: str
    rank: CustomLossInputRank

    def __attrs_post_init__(self) -> None:
        _check_str("name", self.name)
        if self.rank not in (0, 1, 2) or isinstance(self.rank, bool):
            raise InvalidInputError("rank", f"must be 0, 1 or 2, got {self.rank!r}")
