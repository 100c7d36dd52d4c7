"""``WeightsInfoRequest`` (tinker_lite only)."""

from __future__ import annotations

import attrs

from ._common import check_tinker_path


@attrs.frozen(kw_only=True)
class WeightsInfoRequest:
    """POST /api/v1/weights_info."""

    tinker_path: str

    def __attrs_post_init__(self) -> None:
        check_tinker_path("tinker_path", self.tinker_path)
