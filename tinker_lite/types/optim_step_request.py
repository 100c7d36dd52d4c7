"""``OptimStepRequest`` (official module ``tinker.types.optim_step_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_opt_int, _check_str
from .optimizer import AdamParams


@attrs.frozen(kw_only=True)
class OptimStepRequest:
    """POST /api/v1/optim_step."""

    model_id: str
    seq_id: int | None = None
    type: Literal["optim_step"] = attrs.field(default="optim_step", init=False)
    adam_params: AdamParams

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        if not isinstance(self.adam_params, AdamParams):
            raise InvalidInputError("adam_params", "must be an AdamParams")

    @property
    def optim_params(self) -> AdamParams:
        """The optimizer settings (0.38's name; sent as ``adam_params``)."""
        return self.adam_params
