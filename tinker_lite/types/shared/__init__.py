"""Models shared by several endpoints (official package ``tinker.types.shared``)."""

from __future__ import annotations

from .untyped_api_future import UntypedAPIFuture as UntypedAPIFuture

__all__ = ["UntypedAPIFuture"]
