"""Optimizer settings and configs (official module ``tinker.types.optimizer``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_float, _check_mapping, _set

__all__ = [
    "AdamOptimizerConfig",
    "AdamParams",
    "DimuonOptimizerConfig",
    "DimuonParams",
    "OptimParams",
    "OptimizerConfig",
    "optimizer_config_dict",
]


@attrs.frozen(kw_only=True)
class AdamOptimizerConfig:
    """The AdamW optimizer, chosen when a training run is created."""

    type: Literal["adamw"] = "adamw"


@attrs.frozen(kw_only=True)
class DimuonOptimizerConfig:
    """The Dimuon optimizer (version 1), chosen when a training run is created."""

    type: Literal["dimuon"] = "dimuon"
    version: Literal[1] = 1


OptimizerConfig = AdamOptimizerConfig | DimuonOptimizerConfig


def optimizer_config_dict(value: object) -> dict[str, Any] | None:
    """Return an optimizer config (model or dict) as the dict a request carries."""
    if value is None:
        return None
    if isinstance(value, AdamOptimizerConfig):
        return {"type": value.type}
    if isinstance(value, DimuonOptimizerConfig):
        return {"type": value.type, "version": value.version}
    if isinstance(value, Mapping):
        return _check_mapping("optimizer_config", value)
    raise InvalidInputError(
        "optimizer_config",
        f"must be an AdamOptimizerConfig, DimuonOptimizerConfig or dict, got "
        f"{type(value).__name__}",
    )


@attrs.frozen
class AdamParams:
    """Adam(W) optimizer settings for one optim_step.

    ``weight_decay`` (decoupled, AdamW) and ``grad_clip_norm`` (0 = off) default to 0.0 and are
    always sent, as 0.38 does (docs/protocol.rst §3.1); None is read as 0.0.
    """

    learning_rate: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-12
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0

    def __attrs_post_init__(self) -> None:
        lr = _check_float("learning_rate", self.learning_rate)
        if lr < 0:
            raise InvalidInputError("learning_rate", f"must be >= 0, got {lr}")
        _set(self, "learning_rate", lr)
        for name in ("beta1", "beta2"):
            beta = _check_float(name, getattr(self, name))
            if not 0.0 <= beta < 1.0:
                raise InvalidInputError(name, f"must be in [0, 1), got {beta}", "e.g. 0.9")
            _set(self, name, beta)
        eps = _check_float("eps", self.eps)
        if eps <= 0:
            raise InvalidInputError("eps", f"must be > 0, got {eps}", "e.g. 1e-12")
        _set(self, "eps", eps)
        for name in ("weight_decay", "grad_clip_norm"):
            value = getattr(self, name)
            number = 0.0 if value is None else _check_float(name, value)
            if number < 0:
                raise InvalidInputError(name, f"must be >= 0, got {number}", "0 turns it off")
            _set(self, name, number)


@attrs.frozen(kw_only=True)
class DimuonParams:
    """Dimuon optimizer settings for one optim_step (runs created with DimuonOptimizerConfig)."""

    type: Literal["dimuon"] = "dimuon"
    learning_rate: float
    grad_clip_norm: float = 0.0
    beta1: float = 0.9

    def __attrs_post_init__(self) -> None:
        for name in ("learning_rate", "grad_clip_norm"):
            number = _check_float(name, getattr(self, name))
            if number < 0:
                raise InvalidInputError(name, f"must be >= 0, got {number}")
            _set(self, name, number)
        beta = _check_float("beta1", self.beta1)
        if not 0.0 <= beta < 1.0:
            raise InvalidInputError("beta1", f"must be in [0, 1), got {beta}", "e.g. 0.9")
        _set(self, "beta1", beta)


OptimParams = AdamParams | DimuonParams
