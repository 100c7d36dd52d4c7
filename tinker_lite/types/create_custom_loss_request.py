"""``CreateCustomLossRequest`` (official module ``tinker.types.create_custom_loss_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_int, _check_str
from .custom_loss_graph import CustomLossGraph
from .custom_loss_input import CustomLossInput

__all__ = ["CreateCustomLossRequest"]


@attrs.frozen(kw_only=True)
class CreateCustomLossRequest:
    """Register a server-side custom loss (its inputs and graph) for a session."""

    session_id: str
    custom_loss_seq_id: int
    name: str
    inputs: list[CustomLossInput]
    graph: CustomLossGraph
    type: Literal["create_custom_loss"] = attrs.field(default="create_custom_loss", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("session_id", self.session_id)
        _check_int("custom_loss_seq_id", self.custom_loss_seq_id, minimum=0)
        _check_str("name", self.name)
