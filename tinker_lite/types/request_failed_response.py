"""``RequestFailedResponse`` (official module ``tinker.types.request_failed_response``)."""

from __future__ import annotations

from typing import Any

import attrs

from tinker_lite._errors import RequestErrorCategory

from ._common import _set


@attrs.frozen(kw_only=True)
class RequestFailedResponse:
    """retrieve_future: the request failed; ``category`` says whose fault it is."""

    error: str
    category: RequestErrorCategory = RequestErrorCategory.UNKNOWN

    def __attrs_post_init__(self) -> None:
        category: Any = self.category
        if not isinstance(category, RequestErrorCategory):
            _set(self, "category", RequestErrorCategory.parse(category))
