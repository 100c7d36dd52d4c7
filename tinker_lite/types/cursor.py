"""``Cursor`` (official module ``tinker.types.cursor``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class Cursor:
    """Pagination of a REST listing."""

    offset: int
    limit: int
    total_count: int
