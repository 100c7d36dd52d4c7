"""A server-side custom loss as a graph (official module ``tinker.types.custom_loss_graph``)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = ["CustomLossGraph", "CustomLossNode"]


@attrs.frozen(kw_only=True)
class CustomLossNode:
    """One node of the graph (``op`` as in a torch.fx graph)."""

    op: Literal["placeholder", "get_attr", "call_function", "call_method", "call_module", "output"]
    name: str
    target: str
    args: list[Any] = attrs.field(factory=list)
    kwargs: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CustomLossGraph:
    """The nodes of a custom loss, in order (``format`` 1)."""

    format: Literal[1] = 1
    nodes: list[CustomLossNode]
