"""The built-in losses of the tiny model (docs/service.rst §1): inputs, config and per-token
values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from tinker_lite.local.model.errors import UserInputError

__all__ = [
    "DEFAULT_DRO_BETA",
    "LOSS_CONFIG_DEFAULTS",
    "LOSS_CONFIG_TEXT",
    "LOSS_FUNCTIONS",
    "LOSS_INPUTS",
    "REFUSED_LOSSES",
    "RL_INPUTS",
    "check_number",
    "resolve_loss_config",
    "token_losses",
    "token_losses_unchecked",
]

Array = npt.NDArray[Any]


DEFAULT_DRO_BETA: Final = 0.05

# docs/service.rst §1: the documented inputs per loss (required, optional) and loss_fn_config keys.
RL_INPUTS: Final = ("target_tokens", "logprobs", "advantages")
LOSS_INPUTS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "cross_entropy": (("target_tokens",), ("weights",)),
    "importance_sampling": (RL_INPUTS, ()),
    "ppo": (RL_INPUTS, ()),
    "cispo": (RL_INPUTS, ()),
    "dro": (RL_INPUTS, ()),
    "gspo": (RL_INPUTS, ()),
}
LOSS_CONFIG_DEFAULTS: Final[dict[str, dict[str, float]]] = {
    "cross_entropy": {},
    "importance_sampling": {},
    # docs/service.rst §1.4: absolute ratio bounds, default 0.8 / 1.2.
    "ppo": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2},
    # docs/service.rst §1.5: one-sided default 0.0 / 4.0.
    "cispo": {"clip_low_threshold": 0.0, "clip_high_threshold": 4.0},
    # docs/service.rst §1.6: the default beta is undocumented; 0.05 is the documented example.
    "dro": {"beta": DEFAULT_DRO_BETA},
    # docs/service.rst §1.7: ppo's absolute ratio bounds, applied to the sequence-level ratio.
    "gspo": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2},
}
# String-valued loss_fn_config keys (docs/protocol.rst §3.4: loss_fn_config_v2 "text") and the
# values the model implements; they select behaviour but change no number.
LOSS_CONFIG_TEXT: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    # docs/service.rst §1.6: q, the sampler's logprobs, is dro's reference policy
    "dro": {"reference": ("sampler",)},
}
LOSS_FUNCTIONS: Final = tuple(LOSS_INPUTS)
# Loss functions of 0.38's LossFnType the local server does not run, and why
# (docs/service.rst §1.7).
REFUSED_LOSSES: Final[dict[str, str]] = {
    "stable_reinforce": (
        "the local server does not implement loss function 'stable_reinforce': the service's math "
        "for it is not published (it trains on sequences recorded by a sampler created with "
        "record_stability_info=True); use 'importance_sampling' or 'ppo' locally"
    ),
    "custom": (
        "the local server does not implement loss function 'custom': it runs a loss uploaded with "
        "ServiceClient.create_custom_loss, which the local server does not take; "
        "TrainingClient.forward_backward_custom runs such a loss on the client instead"
    ),
}


def check_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise UserInputError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise UserInputError(f"NonFiniteInTensor: {name} must be finite, got {number}")
    return number


def resolve_loss_config(loss_fn: str, config: Mapping[str, float | str] | None) -> dict[str, float]:
    defaults = LOSS_CONFIG_DEFAULTS[loss_fn]
    texts = LOSS_CONFIG_TEXT.get(loss_fn, {})
    resolved = dict(defaults)
    for key, value in (config or {}).items():
        if key in texts:
            if value not in texts[key]:
                raise UserInputError(
                    f"loss_fn_config[{key!r}] must be one of {list(texts[key])} for loss "
                    f"{loss_fn}, got {value!r}"
                )
            continue
        if key not in defaults:
            expected = sorted([*defaults, *texts]) or "no keys"
            raise UserInputError(
                f"unexpected loss_fn_config key {key!r} for loss {loss_fn}; expected {expected}"
            )
        resolved[key] = check_number(f"loss_fn_config[{key!r}]", value)
    if "clip_low_threshold" in resolved:
        low, high = resolved["clip_low_threshold"], resolved["clip_high_threshold"]
        if low > high:
            raise UserInputError(
                f"loss_fn_config clip_low_threshold ({low}) must not exceed "
                f"clip_high_threshold ({high})"
            )
    return resolved


# ---------------------------------------------------------------------------------------------
# Losses (docs/service.rst §1): per-token loss and its derivative with respect to the target
# logprobs.


def token_losses(
    loss_fn: str, lp: Array, floats: Mapping[str, Array], config: Mapping[str, float]
) -> tuple[Array, Array]:
    """Return (elementwise loss (M,), dloss/dlp shaped like lp (M, K)); float64 throughout.

    An extreme importance ratio (sampler logprobs far below the model's) overflows to inf and
    the loss becomes non-finite, as it would in torch; no warning is raised for it.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return token_losses_unchecked(loss_fn, lp, floats, config)


def token_losses_unchecked(
    loss_fn: str, lp: Array, floats: Mapping[str, Array], config: Mapping[str, float]
) -> tuple[Array, Array]:
    if loss_fn == "cross_entropy":
        weights = floats["weights"]
        return -(lp * weights).sum(axis=1), -weights
    logp = lp[:, 0]
    sampler_lp, adv = floats["logprobs"], floats["advantages"]
    if loss_fn == "dro":
        # docs/service.rst §1.6: loss = -(lp·A - ½β(lp-q)²)
        beta = config["beta"]
        diff = logp - sampler_lp
        loss = -(logp * adv - 0.5 * beta * diff * diff)
        grad = -(adv - beta * diff)
        return loss, grad[:, None]
    if loss_fn == "gspo":
        return _gspo(logp, sampler_lp, adv, config)
    ratio = np.exp(logp - sampler_lp)
    if loss_fn == "importance_sampling":
        # docs/service.rst §1.3: loss = -r·A
        return -ratio * adv, (-adv * ratio)[:, None]
    low, high = config["clip_low_threshold"], config["clip_high_threshold"]
    clipped = np.clip(ratio, low, high)
    if loss_fn == "ppo":
        # docs/service.rst §1.4: loss = -min(r·A, clamp(r)·A); no gradient through the clipped
        # branch.
        unclipped_obj, clipped_obj = ratio * adv, clipped * adv
        loss = -np.minimum(unclipped_obj, clipped_obj)
        grad = np.where(unclipped_obj <= clipped_obj, -adv * ratio, 0.0)
        return loss, grad[:, None]
    # docs/service.rst §1.5 cispo: loss = -stopgrad(clamp(r))·lp·A
    return -clipped * logp * adv, (-clipped * adv)[:, None]


def _gspo(
    logp: Array, sampler_lp: Array, adv: Array, config: Mapping[str, float]
) -> tuple[Array, Array]:
    """docs/service.rst §1.7 gspo: ppo's clipped objective on one datum's sequence-level ratio.

    Over the datum's trained tokens T (those with a non-zero advantage; prompt positions carry
    0, as for importance_sampling): ``s = exp(mean_T(lp - q))``, ``A = mean_T(advantages)``,
    ``loss = -min(s·A, clamp(s, low, high)·A)``, spread evenly over T in the elementwise loss.
    No gradient flows through the clipped branch; otherwise ``dloss/dlp[t] = -A·s/|T|`` on T.
    """
    trained = adv != 0.0
    count = int(trained.sum())
    loss = np.zeros_like(logp)
    grad = np.zeros_like(logp)
    if count == 0:
        return loss, grad[:, None]
    ratio = float(np.exp((logp - sampler_lp)[trained].mean()))
    advantage = float(adv[trained].mean())
    clipped = min(max(ratio, config["clip_low_threshold"]), config["clip_high_threshold"])
    unclipped_obj, clipped_obj = ratio * advantage, clipped * advantage
    loss[trained] = -min(unclipped_obj, clipped_obj) / count
    if unclipped_obj <= clipped_obj:
        grad[trained] = -advantage * ratio / count
    return loss, grad[:, None]
