"""``ForwardBackwardRequest`` (official module ``tinker.types.forward_backward_request``)."""

from __future__ import annotations

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_opt_int, _check_str
from .forward_backward_input import ForwardBackwardInput


@attrs.frozen(kw_only=True)
class ForwardBackwardRequest:
    """POST /api/v1/forward_backward (JSON)."""

    forward_backward_input: ForwardBackwardInput
    model_id: str
    seq_id: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.forward_backward_input, ForwardBackwardInput):
            raise InvalidInputError("forward_backward_input", "must be a ForwardBackwardInput")
        _check_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
