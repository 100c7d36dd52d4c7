"""``CreateSessionRequest`` (official module ``tinker.types.create_session_request``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_mapping, _check_opt_str, _check_str, _set


@attrs.frozen(kw_only=True)
class CreateSessionRequest:
    """POST /api/v1/create_session."""

    tags: list[str] = attrs.field(factory=list)
    user_metadata: dict[str, Any] | None = None
    sdk_version: str
    project_id: str | None = None
    display_name: str | None = None
    type: Literal["create_session"] = attrs.field(default="create_session", init=False)

    def __attrs_post_init__(self) -> None:
        raw_tags: Any = self.tags
        if isinstance(raw_tags, str) or not isinstance(raw_tags, Iterable):
            raise InvalidInputError("tags", f"must be a list of strings, got {raw_tags!r}")
        tags = list(raw_tags)
        for tag in tags:
            _check_str("tags", tag)
        _set(self, "tags", tags)
        if self.user_metadata is not None:
            _set(self, "user_metadata", _check_mapping("user_metadata", self.user_metadata))
        _check_str("sdk_version", self.sdk_version)
        _check_opt_str("project_id", self.project_id)
        _check_opt_str("display_name", self.display_name)
