"""``GetInfoRequest`` (official module ``tinker.types.get_info_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_str


@attrs.frozen(kw_only=True)
class GetInfoRequest:
    """POST /api/v1/get_info."""

    model_id: str
    type: Literal["get_info"] = attrs.field(default="get_info", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
