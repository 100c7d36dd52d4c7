"""``RequestErrorCategory`` (official module ``tinker.types.request_error_category``).

The enum lives with the exceptions in ``tinker_lite._errors``; this is its official home.
"""

from __future__ import annotations

from tinker_lite._errors import RequestErrorCategory

__all__ = ["RequestErrorCategory"]
