"""``SaveWeightsForSamplerRequest``.

Official module ``tinker.types.save_weights_for_sampler_request``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_opt_int, _check_opt_str, _check_save_name, _check_str


@attrs.frozen(kw_only=True)
class SaveWeightsForSamplerRequest:
    """POST /api/v1/save_weights_for_sampler: named (``path``) or ephemeral (a session seq id)."""

    model_id: str
    path: str | None = None
    sampling_session_seq_id: int | None = None
    kind: str | None = "snapshot"
    seq_id: int | None = None
    ttl_seconds: int | None = None
    user_metadata: dict[str, str] | None = None
    type: Literal["save_weights_for_sampler"] = attrs.field(
        default="save_weights_for_sampler", init=False
    )

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_save_name("path", self.path)
        _check_opt_int("sampling_session_seq_id", self.sampling_session_seq_id, minimum=0)
        _check_opt_str("kind", self.kind)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)
        if self.path is None and self.sampling_session_seq_id is None:
            raise InvalidInputError(
                "path/sampling_session_seq_id",
                "neither is set",
                "name the checkpoint (path='...') or save ephemerally (sampling_session_seq_id)",
            )
