"""``SaveWeightsRequest`` (official module ``tinker.types.save_weights_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from ._common import _check_bool, _check_opt_int, _check_save_name, _check_str


@attrs.frozen(kw_only=True)
class SaveWeightsRequest:
    """POST /api/v1/save_weights (``path`` is a checkpoint name)."""

    model_id: str
    path: str | None = None
    seq_id: int | None = None
    ttl_seconds: int | None = None
    overwrite: bool | None = False
    user_metadata: dict[str, str] | None = None
    type: Literal["save_weights"] = attrs.field(default="save_weights", init=False)

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_save_name("path", self.path)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)
        if self.overwrite is not None:
            _check_bool("overwrite", self.overwrite)
