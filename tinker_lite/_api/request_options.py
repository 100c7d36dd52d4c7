"""``Timeout`` and ``RequestOptions``: the official SDK's per-request option types, no httpx."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import attrs

from tinker_lite._errors import InvalidInputError
from tinker_lite._repr import tolerant_repr

__all__ = ["RequestOptions", "Timeout"]

_UNSET: Any = object()
_PHASES = ("connect", "read", "write", "pool")


def _seconds(field: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidInputError(field, f"must be a number of seconds >= 0 or None, got {value!r}")
    return float(value)


@attrs.frozen(init=False, repr=False)
class Timeout:
    """Timeouts of one HTTP request, in seconds (``None``: no limit), as ``httpx.Timeout``.

    ``Timeout(10.0)`` sets all four; ``Timeout(10.0, connect=5.0)`` overrides one;
    ``Timeout(None)`` disables them; ``Timeout(connect=..., read=..., write=..., pool=...)``
    must then name all four; ``Timeout((connect, read, write, pool))`` and
    ``Timeout(other_timeout)`` copy them.
    """

    connect: float | None
    read: float | None
    write: float | None
    pool: float | None

    def __init__(
        self,
        timeout: Timeout | tuple[float | None, ...] | float | None = _UNSET,
        *,
        connect: float | None = _UNSET,
        read: float | None = _UNSET,
        write: float | None = _UNSET,
        pool: float | None = _UNSET,
    ) -> None:
        given = {"connect": connect, "read": read, "write": write, "pool": pool}
        if isinstance(timeout, Timeout):
            if any(value is not _UNSET for value in given.values()):
                raise InvalidInputError(
                    "timeout", "a Timeout cannot be combined with connect/read/write/pool"
                )
            values: dict[str, Any] = timeout.as_dict()
        elif isinstance(timeout, tuple):
            if len(timeout) != len(_PHASES):
                raise InvalidInputError(
                    "timeout", f"a tuple must be (connect, read, write, pool), got {timeout!r}"
                )
            values = dict(zip(_PHASES, timeout, strict=True))
        else:
            missing = [name for name, value in given.items() if value is _UNSET]
            if timeout is _UNSET and missing:
                raise InvalidInputError(
                    "timeout",
                    f"is required unless connect, read, write and pool are all set "
                    f"(missing: {', '.join(missing)})",
                    "e.g. Timeout(60.0) or Timeout(60.0, connect=5.0)",
                )
            values = {name: timeout if value is _UNSET else value for name, value in given.items()}
        self.__attrs_init__(**{name: _seconds(name, values[name]) for name in _PHASES})

    def as_dict(self) -> dict[str, float | None]:
        """The four timeouts by name (``httpx.Timeout.as_dict``)."""
        return attrs.asdict(self)

    @tolerant_repr
    def __repr__(self) -> str:
        values = set(self.as_dict().values())
        if len(values) == 1:
            return f"Timeout(timeout={values.pop()})"
        parts = ", ".join(f"{name}={value}" for name, value in self.as_dict().items())
        return f"Timeout({parts})"


class RequestOptions(TypedDict, total=False):
    """Per-request options of the official SDK's low-level calls (a typed dict)."""

    headers: Mapping[str, str]
    max_retries: int
    timeout: float | Timeout | None
    params: Mapping[str, object]
    extra_json: Mapping[str, object]
    idempotency_key: str
    follow_redirects: bool
