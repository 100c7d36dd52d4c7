"""``CreateCustomLossResponse`` (official module ``tinker.types.create_custom_loss_response``)."""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["CreateCustomLossResponse"]


@attrs.frozen(kw_only=True)
class CreateCustomLossResponse:
    """The registered custom loss's id."""

    loss_id: str
    type: Literal["create_custom_loss"] = "create_custom_loss"
