"""``UnloadModelRequest`` (official module ``tinker.types.unload_model_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_str


@attrs.frozen(kw_only=True)
class UnloadModelRequest:
    """POST /api/v1/unload_model."""

    model_id: str
    type: Literal["unload_model"] = attrs.field(default="unload_model", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
