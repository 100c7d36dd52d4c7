"""``SetCheckpointTTLRequest`` (tinker_lite only)."""

from __future__ import annotations

from typing import ClassVar

import attrs

from ._common import _check_opt_int


@attrs.frozen(kw_only=True)
class SetCheckpointTTLRequest:
    """PUT .../checkpoints/{id}/ttl (``ttl_seconds`` None = keep forever; sent as null)."""

    _wire_nullable: ClassVar[frozenset[str]] = frozenset({"ttl_seconds"})

    ttl_seconds: int | None = None

    def __attrs_post_init__(self) -> None:
        _check_opt_int("ttl_seconds", self.ttl_seconds, minimum=1)
