"""``OptimStepRequest`` (official module ``tinker.types.optim_step_request``)."""

from __future__ import annotations

from typing import Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_opt_int, _check_str
from .optimizer import AdamParams, DimuonParams, OptimParams


@attrs.frozen(kw_only=True, init=False)
class OptimStepRequest:
    """POST /api/v1/optim_step.

    Built as in 0.38 with ``optim_params`` (``adam_params`` and ``optimizer_params`` are accepted
    as its aliases); sent as 0.38 sends it: AdamW settings as ``adam_params``, the settings of
    another optimizer (Dimuon) as ``optimizer_params``.
    """

    model_id: str
    seq_id: int | None = None
    type: Literal["optim_step"] = attrs.field(default="optim_step", init=False)
    adam_params: AdamParams | None = None
    optimizer_params: DimuonParams | None = None

    def __init__(
        self,
        *,
        model_id: str,
        optim_params: OptimParams | None = None,
        seq_id: int | None = None,
        adam_params: OptimParams | None = None,
        optimizer_params: OptimParams | None = None,
    ) -> None:
        given = {
            name: value
            for name, value in (
                ("optim_params", optim_params),
                ("adam_params", adam_params),
                ("optimizer_params", optimizer_params),
            )
            if value is not None
        }
        if len(given) != 1:
            raise InvalidInputError(
                "optim_params",
                "is required" if not given else f"is given {len(given)} times ({', '.join(given)})",
                "pass one: OptimStepRequest(optim_params=types.AdamParams(...), model_id=...)",
            )
        ((name, params),) = given.items()
        if not isinstance(params, AdamParams | DimuonParams):
            raise InvalidInputError(
                name, f"must be an AdamParams or a DimuonParams, got {type(params).__name__}"
            )
        adam = params if isinstance(params, AdamParams) else None
        other = params if isinstance(params, DimuonParams) else None
        self.__attrs_init__(
            model_id=model_id, seq_id=seq_id, adam_params=adam, optimizer_params=other
        )

    def __attrs_post_init__(self) -> None:
        _check_str("model_id", self.model_id)
        _check_opt_int("seq_id", self.seq_id, minimum=0)

    @property
    def optim_params(self) -> OptimParams:
        """The optimizer settings of this step (0.38's field)."""
        params = self.adam_params if self.adam_params is not None else self.optimizer_params
        assert params is not None  # one of them is set by __init__
        return params
