"""``LoadWeightsRequest`` (official module ``tinker.types.load_weights_request``)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import (
    _check_bool,
    _check_mapping,
    _check_opt_int,
    _check_opt_str,
    _set,
    check_tinker_path,
)
from .optimizer import optimizer_config_dict


@attrs.frozen(kw_only=True)
class LoadWeightsRequest:
    """POST /api/v1/load_weights: into ``model_id``, or into a new model (session_id, model_seq_id).

    ``optimizer`` is always sent (the current service requires it, docs/protocol.rst §3.1).
    """

    model_id: str | None = None
    seq_id: int | None = None
    session_id: str | None = None
    model_seq_id: int | None = None
    base_model: str | None = None
    user_metadata: dict[str, Any] | None = None
    path: str
    optimizer: bool
    weights_access_token: str | None = attrs.field(default=None, repr=False)
    optimizer_config: dict[str, Any] | None = attrs.field(
        default=None, converter=optimizer_config_dict
    )
    type: Literal["load_weights"] = attrs.field(default="load_weights", init=False)

    def __attrs_post_init__(self) -> None:
        _check_opt_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)
        _check_opt_str("session_id", self.session_id)
        _check_opt_int("model_seq_id", self.model_seq_id, minimum=0)
        _check_opt_str("base_model", self.base_model)
        if self.user_metadata is not None:
            _set(self, "user_metadata", _check_mapping("user_metadata", self.user_metadata))
        check_tinker_path("path", self.path)
        _set(self, "optimizer", _check_bool("optimizer", self.optimizer))
        _check_opt_str("weights_access_token", self.weights_access_token)
        if self.model_id is None and (self.session_id is None or self.model_seq_id is None):
            raise InvalidInputError(
                "model_id",
                "is not set, and session_id/model_seq_id are not both set",
                "load into an existing model (model_id) or create one (session_id + model_seq_id)",
            )
