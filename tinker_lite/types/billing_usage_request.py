"""``GetBillingUsageRequest`` (official module ``tinker.types.billing_usage_request``)."""

from __future__ import annotations

from datetime import datetime

import attrs

__all__ = ["GetBillingUsageRequest"]


@attrs.frozen(kw_only=True)
class GetBillingUsageRequest:
    """The billing usage between ``starting_on`` (included) and ``ending_before``."""

    starting_on: datetime
    ending_before: datetime
