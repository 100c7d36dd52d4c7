"""``CreateSamplingSessionRequest``.

Official module ``tinker.types.create_sampling_session_request``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_int, _check_opt_str, _check_str, check_tinker_path


@attrs.frozen(kw_only=True)
class CreateSamplingSessionRequest:
    """POST /api/v1/create_sampling_session (one of base_model / model_path)."""

    session_id: str
    sampling_session_seq_id: int
    base_model: str | None = None
    model_path: str | None = None
    type: Literal["create_sampling_session"] = attrs.field(
        default="create_sampling_session", init=False
    )

    def __attrs_post_init__(self) -> None:
        _check_str("session_id", self.session_id)
        _check_int("sampling_session_seq_id", self.sampling_session_seq_id, minimum=0)
        _check_opt_str("base_model", self.base_model)
        if self.model_path is not None:
            check_tinker_path("model_path", self.model_path)
        if self.base_model is None and self.model_path is None:
            raise InvalidInputError(
                "base_model/model_path",
                "neither is set",
                "pass base_model='...' or model_path='tinker://...'",
            )
