"""``ExternalWeightsUrlsResponse``.

Official module ``tinker.types.external_weights_urls_response``.
"""

from __future__ import annotations

from datetime import datetime

import attrs

__all__ = ["ExternalWeightsUrlsResponse"]


@attrs.frozen(kw_only=True)
class ExternalWeightsUrlsResponse:
    """Signed URLs of exported weight files (file name -> URL), and when they expire."""

    urls: dict[str, str] = attrs.field(repr=False)
    expires: datetime
