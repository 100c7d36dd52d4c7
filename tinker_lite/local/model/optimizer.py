"""The optimizers of the tiny model's LoRA parameters: AdamW (docs/service.rst §4) and Dimuon.

:class:`AdamW` (torch.optim.AdamW semantics) and :class:`Dimuon` (0.38's second family: Muon-style
orthogonalised momentum) each hold the state and step count of one model's parameters; an update
is a pure function of (parameters, gradients, hyperparameters) that returns new arrays, so a
concurrent reader of the old parameters keeps a consistent snapshot. :data:`OPTIMIZERS` maps an
``optimizer_config.type`` to its class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from tinker_lite.local.model.errors import UserInputError
from tinker_lite.local.model.losses import check_number

__all__ = ["OPTIMIZERS", "AdamW", "Dimuon", "orthogonalise", "state_family"]

Array = npt.NDArray[Any]

# The quintic Newton-Schulz coefficients of Muon (Jordan et al., 2024): they push every singular
# value of a normalised matrix towards 1 within a few iterations.
_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5


def read_step(state: Mapping[str, Array]) -> int:
    """The ``step`` of a saved state; a user error when it is missing or not an int >= 0."""
    if "step" not in state:
        raise UserInputError("optimizer state is missing 'step'")
    step_arr = np.asarray(state["step"])
    if step_arr.size != 1 or step_arr.dtype.kind not in "iuf":
        raise UserInputError("optimizer state 'step' must be a single integer")
    step = int(step_arr.reshape(()))
    if step < 0:
        raise UserInputError("optimizer state 'step' must be >= 0")
    return step


def _clip_global_norm(
    grads: Mapping[str, Array], clip: float
) -> tuple[dict[str, Array], dict[str, float] | None]:
    """The gradients in float64, clipped to global L2 norm ``clip`` when ``clip > 0``.

    The metrics are ``{"unclipped_grad_l2:mean": norm}`` when clipping is on, else None.
    """
    wide = {key: value.astype(np.float64) for key, value in grads.items()}
    if clip <= 0:
        return wide, None
    norm = math.sqrt(sum(float(np.square(g).sum()) for g in wide.values()))
    if norm > clip:
        # docs/service.rst §4: clip the global L2 norm to grad_clip_norm
        factor = clip / norm
        wide = {key: g * factor for key, g in wide.items()}
    return wide, {"unclipped_grad_l2:mean": norm}


def orthogonalise(matrix: Array, steps: int = NS_STEPS) -> Array:
    """The nearest semi-orthogonal matrix to ``matrix``, approximately (Newton-Schulz).

    The matrix is normalised by its Frobenius norm, then ``steps`` quintic iterations bring its
    singular values close to 1 while keeping its singular vectors. Works in float64.
    """
    a, b, c = _NS_COEFFICIENTS
    x: Array = np.asarray(matrix, dtype=np.float64)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def state_family(state: Mapping[str, Any]) -> str:
    """The optimizer family a saved state belongs to, told by its keys."""
    if any(key.endswith(".momentum_buffer") for key in state):
        return "dimuon"
    return "adamw"


class AdamW:
    """The Adam moments and step count of one set of parameters, and the AdamW update."""

    family = "adamw"

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self._dtype = dtype
        self._exp_avg: dict[str, Array] = {}
        self._exp_avg_sq: dict[str, Array] = {}
        self._step = 0

    def state(self, params: Mapping[str, Array]) -> dict[str, Array]:
        """The Adam state: ``<param>.exp_avg``, ``<param>.exp_avg_sq`` (float32) and ``step``."""
        state: dict[str, Array] = {"step": np.array(self._step, dtype=np.int64)}
        for key, value in params.items():
            zeros = np.zeros_like(value, dtype=np.float32)
            state[f"{key}.exp_avg"] = self._exp_avg.get(key, zeros).astype(np.float32)
            state[f"{key}.exp_avg_sq"] = self._exp_avg_sq.get(key, zeros).astype(np.float32)
        return state

    @staticmethod
    def expected_moments(params: Mapping[str, Array]) -> dict[str, Array]:
        """The moment keys a saved state must hold, each with the array it must match."""
        expected: dict[str, Array] = {}
        for key, value in params.items():
            expected[f"{key}.exp_avg"] = value
            expected[f"{key}.exp_avg_sq"] = value
        return expected

    def load(self, step: int, moments: Mapping[str, Array], params: Mapping[str, Array]) -> None:
        """Restore a checked state (see :func:`read_step` and :meth:`expected_moments`)."""
        self._step = step
        self._exp_avg = {key: moments[f"{key}.exp_avg"] for key in params}
        self._exp_avg_sq = {key: moments[f"{key}.exp_avg_sq"] for key in params}

    def reset(self) -> None:
        """Forget the moments and the step count."""
        self._exp_avg, self._exp_avg_sq, self._step = {}, {}, 0

    def step(
        self,
        params: Mapping[str, Array],
        grads: Mapping[str, Array],
        *,
        learning_rate: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float = 0.0,
        grad_clip_norm: float = 0.0,
    ) -> tuple[dict[str, Array], dict[str, float] | None]:
        """Apply one AdamW step; return the new parameters and the step's metrics.

        The metrics are ``{"unclipped_grad_l2:mean": norm}`` when ``grad_clip_norm > 0``, else
        None. Bad hyperparameters are user errors, raised before any state changes.
        """
        lr = check_number("learning_rate", learning_rate)
        b1, b2 = check_number("beta1", beta1), check_number("beta2", beta2)
        eps_value = check_number("eps", eps)
        wd = check_number("weight_decay", weight_decay)
        clip = check_number("grad_clip_norm", grad_clip_norm)
        if lr < 0 or eps_value < 0 or wd < 0 or clip < 0:
            raise UserInputError(
                "learning_rate, eps, weight_decay and grad_clip_norm must be non-negative"
            )
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise UserInputError("beta1 and beta2 must be in [0, 1)")
        wide, metrics = _clip_global_norm(grads, clip)
        self._step += 1
        step = self._step
        bias1 = 1.0 - b1**step
        bias2_sqrt = math.sqrt(1.0 - b2**step)
        new_params: dict[str, Array] = {}
        for key, param in params.items():
            grad = wide[key]
            m = self._exp_avg.get(key)
            v = self._exp_avg_sq.get(key)
            m = (1.0 - b1) * grad if m is None else b1 * m + (1.0 - b1) * grad
            v = (1.0 - b2) * grad * grad if v is None else b2 * v + (1.0 - b2) * grad * grad
            self._exp_avg[key] = m.astype(self._dtype)
            self._exp_avg_sq[key] = v.astype(self._dtype)
            updated = param.astype(np.float64) * (1.0 - lr * wd)
            updated -= (lr / bias1) * m / (np.sqrt(v) / bias2_sqrt + eps_value)
            new_params[key] = updated.astype(self._dtype)
        return new_params, metrics


class Dimuon:
    """The momentum buffers and step count of one set of parameters, and the Dimuon update.

    Per step: ``m = beta1 * m + g`` (after global-norm clipping when ``grad_clip_norm > 0``);
    a 2-D parameter moves by its orthogonalised momentum scaled by ``sqrt(max(1, rows/cols))``,
    any other by the momentum itself; ``w -= learning_rate * update``.
    """

    family = "dimuon"

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self._dtype = dtype
        self._momentum: dict[str, Array] = {}
        self._step = 0

    def state(self, params: Mapping[str, Array]) -> dict[str, Array]:
        """The Dimuon state: ``<param>.momentum_buffer`` (float32) and ``step``."""
        state: dict[str, Array] = {"step": np.array(self._step, dtype=np.int64)}
        for key, value in params.items():
            zeros = np.zeros_like(value, dtype=np.float32)
            state[f"{key}.momentum_buffer"] = self._momentum.get(key, zeros).astype(np.float32)
        return state

    @staticmethod
    def expected_moments(params: Mapping[str, Array]) -> dict[str, Array]:
        """The buffer keys a saved state must hold, each with the array it must match."""
        return {f"{key}.momentum_buffer": value for key, value in params.items()}

    def load(self, step: int, moments: Mapping[str, Array], params: Mapping[str, Array]) -> None:
        """Restore a checked state (see :func:`read_step` and :meth:`expected_moments`)."""
        self._step = step
        self._momentum = {key: moments[f"{key}.momentum_buffer"] for key in params}

    def reset(self) -> None:
        """Forget the momentum and the step count."""
        self._momentum, self._step = {}, 0

    def step(
        self,
        params: Mapping[str, Array],
        grads: Mapping[str, Array],
        *,
        learning_rate: float,
        beta1: float,
        grad_clip_norm: float = 0.0,
    ) -> tuple[dict[str, Array], dict[str, float] | None]:
        """Apply one Dimuon step; return the new parameters and the step's metrics.

        The metrics are ``{"unclipped_grad_l2:mean": norm}`` when ``grad_clip_norm > 0``, else
        None (a non-positive value turns clipping off, as in 0.38's ``DimuonParams``). Bad
        hyperparameters are user errors, raised before any state changes.
        """
        lr = check_number("learning_rate", learning_rate)
        b1 = check_number("beta1", beta1)
        clip = check_number("grad_clip_norm", grad_clip_norm)
        if lr < 0:
            raise UserInputError("learning_rate must be non-negative")
        if not 0.0 <= b1 < 1.0:
            raise UserInputError("beta1 must be in [0, 1)")
        wide, metrics = _clip_global_norm(grads, clip)
        self._step += 1
        new_params: dict[str, Array] = {}
        for key, param in params.items():
            previous = self._momentum.get(key)
            m = wide[key] if previous is None else b1 * previous + wide[key]
            self._momentum[key] = m.astype(self._dtype)
            if m.ndim == 2:
                rows, cols = m.shape
                update = orthogonalise(m) * math.sqrt(max(1.0, rows / cols))
            else:
                update = m
            new_params[key] = (param.astype(np.float64) - lr * update).astype(self._dtype)
        return new_params, metrics


# optimizer_config.type -> the optimizer class
OPTIMIZERS: dict[str, type[AdamW] | type[Dimuon]] = {"adamw": AdamW, "dimuon": Dimuon}
