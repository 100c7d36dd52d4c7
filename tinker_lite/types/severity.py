"""``Severity`` (official module ``tinker.types.severity``)."""

from __future__ import annotations

from typing import Literal

Severity = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
