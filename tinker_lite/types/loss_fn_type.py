"""``ALLOW_UNKNOWN_LOSS_ENV``, ``LossFnType``, ``KNOWN_LOSS_FNS`` and ``check_loss_fn``.

Official module ``tinker.types.loss_fn_type``.
"""

from __future__ import annotations

import enum
import os

from tinker_lite._errors import InvalidInputError

# The environment variable that lets a loss function unknown to this release through.
ALLOW_UNKNOWN_LOSS_ENV = "TINKER_LITE_ALLOW_UNKNOWN_LOSS"


class LossFnType(str, enum.Enum):
    """Loss functions the service implements (docs/protocol.rst §4.3)."""

    CROSS_ENTROPY = "cross_entropy"
    IMPORTANCE_SAMPLING = "importance_sampling"
    PPO = "ppo"
    CISPO = "cispo"
    DRO = "dro"
    GSPO = "gspo"
    STABLE_REINFORCE = "stable_reinforce"
    CUSTOM = "custom"

    def __str__(self) -> str:
        return self.value


KNOWN_LOSS_FNS: tuple[str, ...] = tuple(member.value for member in LossFnType)


def check_loss_fn(name: object) -> str:
    """Return ``name`` as a loss function name, or raise InvalidInputError listing the known ones.

    A loss function added to the service after this release is let through when the environment
    variable ``TINKER_LITE_ALLOW_UNKNOWN_LOSS=1`` is set.
    """
    if isinstance(name, LossFnType):
        return name.value
    if not isinstance(name, str) or not name:
        raise InvalidInputError(
            "loss_fn",
            f"must be a non-empty string, got {name!r}",
            f"use one of {', '.join(KNOWN_LOSS_FNS)}",
        )
    if name in KNOWN_LOSS_FNS or os.environ.get(ALLOW_UNKNOWN_LOSS_ENV) == "1":
        return name
    raise InvalidInputError(
        "loss_fn",
        f"unknown loss function {name!r}",
        f"use one of {', '.join(KNOWN_LOSS_FNS)}; to send a loss function newer than this "
        f"release, set {ALLOW_UNKNOWN_LOSS_ENV}=1",
    )
