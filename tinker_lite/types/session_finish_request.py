"""``SessionFinishReason`` and ``SessionFinishRequest`` (tinker_lite only)."""

from __future__ import annotations

from typing import ClassVar, Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_opt_str, _set


@attrs.frozen
class SessionFinishReason:
    """How a session ended: ``success``, ``errored`` or ``interrupted``."""

    type: Literal["success", "errored", "interrupted"]

    def __attrs_post_init__(self) -> None:
        if self.type not in ("success", "errored", "interrupted"):
            raise InvalidInputError(
                "reason", f"must be 'success', 'errored' or 'interrupted', got {self.type!r}"
            )


@attrs.frozen(kw_only=True)
class SessionFinishRequest:
    """POST /api/v1/sessions/{session_id}/finish (``detail`` is sent, as null when unset)."""

    # docs/protocol.rst §3.1 exception taken from golden-0.38: this hand-built body always has
    # `detail`.
    _wire_nullable: ClassVar[frozenset[str]] = frozenset({"detail"})

    reason: SessionFinishReason
    detail: str | None = None

    def __attrs_post_init__(self) -> None:
        if isinstance(self.reason, str):
            _set(self, "reason", SessionFinishReason(self.reason))  # type: ignore[arg-type]
        if not isinstance(self.reason, SessionFinishReason):
            raise InvalidInputError("reason", "must be a SessionFinishReason")
        _check_opt_str("detail", self.detail)
