"""Checks of the arguments of RestClient's calls: each bad value raises an
:class:`~tinker_lite.InvalidInputError` naming the field, before anything is sent."""

from __future__ import annotations

from tinker_lite._errors import InvalidInputError

__all__ = ["check_checkpoint_id", "check_id", "check_optional_id", "check_page", "check_scope"]


def check_id(field: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(field, f"must be a non-empty string, got {value!r}")
    return value


def check_optional_id(field: str, value: object) -> str | None:
    return None if value is None else check_id(field, value)


def check_checkpoint_id(value: object) -> str:
    checkpoint_id = check_id("checkpoint_id", value)
    kind, _, name = checkpoint_id.partition("/")
    if kind not in ("weights", "sampler_weights", "external_weights") or not name or "/" in name:
        raise InvalidInputError(
            "checkpoint_id",
            "must look like 'weights/<name>', 'sampler_weights/<name>' or "
            f"'external_weights/<name>', got {checkpoint_id!r}",
            "use Checkpoint.checkpoint_id from list_checkpoints, or the *_from_tinker_path method",
        )
    return checkpoint_id


def check_page(limit: object, offset: object) -> tuple[int, int]:
    for field, value, minimum in (("limit", limit, 1), ("offset", offset, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidInputError(field, f"must be an int >= {minimum}, got {value!r}")
    return int(limit), int(offset)  # type: ignore[call-overload]


def check_scope(access_scope: object) -> str | None:
    """``access_scope`` as a query parameter, ``None`` not sent (docs/protocol.rst §4.5)."""
    if access_scope is not None and (
        not isinstance(access_scope, str) or access_scope not in ("owned", "accessible")
    ):
        raise InvalidInputError(
            "access_scope", f"must be 'owned' or 'accessible', got {access_scope!r}"
        )
    return access_scope
