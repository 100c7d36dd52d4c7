"""Checks of the arguments of TrainingClient's checkpoint calls: each bad value raises an
:class:`~tinker_lite.InvalidInputError` naming the field and the fix, before anything is sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tinker_lite._errors import InvalidInputError

__all__ = ["check_flag", "check_name", "check_recipients", "check_user_metadata"]

MAX_AGE_RECIPIENTS = 10
"""At most this many age public keys encrypt a checkpoint's files."""


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
