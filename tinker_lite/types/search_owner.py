"""Owners a session search can filter on (official module ``tinker.types.search_owner``)."""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["AccessibleSearchOwner", "OwnSearchOwner", "SearchOwner", "UserSearchOwner"]


@attrs.frozen(kw_only=True)
class OwnSearchOwner:
    """Sessions of the caller."""

    type: Literal["own"] = "own"


@attrs.frozen(kw_only=True)
class AccessibleSearchOwner:
    """Every session the caller may read."""

    type: Literal["accessible"] = "accessible"


@attrs.frozen(kw_only=True)
class UserSearchOwner:
    """Sessions of the named users."""

    type: Literal["user"] = "user"
    owner_urns: list[str]


SearchOwner = OwnSearchOwner | AccessibleSearchOwner | UserSearchOwner
