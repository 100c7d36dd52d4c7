"""``CopyWeightsRequest`` (official module ``tinker.types.copy_weights_request``)."""

from __future__ import annotations

import attrs

from ._common import _check_opt_int, _check_opt_str, check_tinker_path

__all__ = ["CopyWeightsRequest"]


@attrs.frozen(kw_only=True)
class CopyWeightsRequest:
    """Copy a checkpoint (``source_path``), possibly into another project."""

    session_id: str | None = None
    model_seq_id: int | None = None
    destination_project_id: str | None = None
    source_path: str
    ttl_seconds: int | None = None
    weights_access_token: str | None = attrs.field(default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        _check_opt_str("session_id", self.session_id)
        _check_opt_int("model_seq_id", self.model_seq_id, minimum=0)
        _check_opt_str("destination_project_id", self.destination_project_id)
        check_tinker_path("source_path", self.source_path)
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)
        _check_opt_str("weights_access_token", self.weights_access_token)
