"""Checks of TrainingClient's optimizer and checkpoint arguments, before anything is sent: each
bad value raises an :class:`~tinker_lite.InvalidInputError` naming the field and the fix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tinker_lite import types
from tinker_lite._errors import InvalidInputError

__all__ = [
    "check_access_token",
    "check_flag",
    "check_name",
    "check_optim_params",
    "check_recipients",
    "check_user_metadata",
]

MAX_AGE_RECIPIENTS = 10
"""At most this many age public keys encrypt a checkpoint's files."""
_OPTIM_PARAMS = (types.AdamParams, types.DimuonParams)


def check_name(field: str, name: object) -> None:
    if not isinstance(name, str) or not name or "/" in name:
        raise InvalidInputError(
            field,
            f"must be a non-empty checkpoint name without '/', got {name!r}",
            "e.g. 'step-100'; the service builds the tinker:// path",
        )


def check_flag(field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidInputError(field, f"must be True or False, got {value!r}")


def check_user_metadata(value: object) -> dict[str, str] | None:
    """A copy of ``user_metadata`` (str -> str), or an error naming the field."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            "user_metadata",
            f"must be a dict of str to str, got {type(value).__name__}",
            "e.g. {'step': '100'}",
        )
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InvalidInputError(
                f"user_metadata[{key!r}]",
                f"keys and values must be str, got {type(item).__name__}",
                "convert numbers with str()",
            )
    return dict(value)


def check_recipients(value: object) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInputError(
            "age_encryption_recipients",
            f"must be a list of public keys, got {type(value).__name__}",
            "e.g. ['age1...']",
        )
    recipients = list(value)
    if not recipients or len(recipients) > MAX_AGE_RECIPIENTS:
        raise InvalidInputError(
            "age_encryption_recipients",
            f"must hold 1 to {MAX_AGE_RECIPIENTS} keys, got {len(recipients)}",
            "pass None for unencrypted files",
        )
    for index, key in enumerate(recipients):
        if not isinstance(key, str) or not key:
            raise InvalidInputError(
                f"age_encryption_recipients[{index}]", f"must be a public key, got {key!r}"
            )
    return recipients


def check_optim_params(optim_params: object, adam_params: object) -> types.OptimParams:
    """The parameters of ``optim_step``: ``optim_params`` or the legacy ``adam_params``."""
    if optim_params is not None and adam_params is not None:
        raise InvalidInputError(
            "optim_params",
            "both optim_params and adam_params are given",
            "pass one: optim_step(types.AdamParams(...)) (adam_params= is the legacy name)",
        )
    field = "adam_params" if adam_params is not None else "optim_params"
    params = adam_params if adam_params is not None else optim_params
    allowed = (types.AdamParams,) if field == "adam_params" else _OPTIM_PARAMS
    if not isinstance(params, allowed):
        raise InvalidInputError(
            field,
            f"must be an {' or '.join(c.__name__ for c in allowed)}, got {type(params).__name__}",
            "e.g. types.AdamParams(learning_rate=1e-4)",
        )
    return params


def check_access_token(weights_access_token: object) -> None:
    if weights_access_token is not None and not isinstance(weights_access_token, str):
        raise InvalidInputError(
            "weights_access_token",
            f"must be a str or None, got {type(weights_access_token).__name__}",
            "to load the optimizer state too, call load_state_with_optimizer(path)"
            if isinstance(weights_access_token, bool)
            else "pass the access token of the account that owns the checkpoint",
        )
