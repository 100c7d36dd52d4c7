"""How ``tinker-lite`` prints results: aligned tables and records, or one JSON document."""

from __future__ import annotations

import datetime as _dt
import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

__all__ = ["Output", "cell", "iso", "size_cell", "to_jsonable"]


def to_jsonable(value: Any) -> Any:
    """Convert API objects (attrs classes, datetimes, enums) to JSON-ready builtins."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, _dt.datetime):
        return iso(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if attrs.has(type(value)):
        return {
            field.name: to_jsonable(getattr(value, field.name))
            for field in attrs.fields(type(value))
            if not field.name.startswith("_")
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return str(value)


def iso(moment: _dt.datetime) -> str:
    """``2025-01-02T03:04:05Z``: UTC, seconds; a naive time is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    text = moment.astimezone(_dt.timezone.utc).isoformat(timespec="seconds")
    return text.replace("+00:00", "Z")


def cell(value: Any) -> str:
    """A value as a table cell: ``-`` for nothing, yes/no, ISO times, comma-joined lists."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, _dt.datetime):
        return iso(value)
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value) if value else "-"
    return str(value)


def size_cell(size: int | None) -> str:
    """A byte count as a human size (``-`` when unknown)."""
    from tinker_lite._progress import format_bytes

    return "-" if size is None else format_bytes(size)


class Output:
    """Writes command results as tables/records (``table``) or one JSON document (``json``)."""

    def __init__(self, fmt: str, out: TextIO, err: TextIO) -> None:
        self.format = fmt
        self.out = out
        self.err = err

    @property
    def json(self) -> bool:
        """Whether results are printed as JSON."""
        return self.format == "json"

    def document(self, doc: Any) -> None:
        """Print one JSON document."""
        self.out.write(json.dumps(to_jsonable(doc), indent=2, sort_keys=False) + "\n")

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> None:
        """Print rows as aligned columns under ``headers`` (or ``empty`` when there are none)."""
        cells = [[cell(v) for v in row] for row in rows]
        if not cells:
            self.out.write(empty + "\n")
            return
        widths = [len(h) for h in headers]
        for row in cells:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        lines = [headers, *cells]
        for line in lines:
            text = "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
            self.out.write(text.rstrip() + "\n")

    def record(self, pairs: Sequence[tuple[str, Any]]) -> None:
        """Print ``label: value`` lines, labels aligned."""
        width = max((len(label) for label, _ in pairs), default=0)
        for label, value in pairs:
            self.out.write(f"{(label + ':').ljust(width + 1)} {cell(value)}\n")

    def line(self, text: str) -> None:
        """Print one line of human-readable text (table format only)."""
        self.out.write(text + "\n")

    def note(self, text: str) -> None:
        """Print a remark on stderr (kept out of the JSON on stdout)."""
        self.err.write(text + "\n")

    def waiting(self, text: str) -> None:
        """Say that something slow has started, on a terminal only: in a log or cron mail a
        failure stays the one error line, and a success its result."""
        isatty = getattr(self.err, "isatty", None)
        if isatty is not None and isatty():
            self.note(text)
