"""Reading a run journal back, as a job resuming from it would."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_journal(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The journal's entries, oldest first; a torn last line and non-objects are skipped."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    lines = raw.split(b"\n")
    if lines and lines[-1]:
        lines = lines[:-1]  # torn last line: no newline yet
    entries: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            entries.append(value)
    return entries
