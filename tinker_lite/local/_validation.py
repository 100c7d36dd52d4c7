"""Strict request parsing for the local server: JSON body -> ``types`` request, or a 4xx.

Bodies are structured with ``_wire.structure(..., strict=True)`` so unknown keys, wrong types and
missing required fields are rejected like the service's own schemas do (422, naming the field).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tinker_lite import _wire, types
from tinker_lite._errors import InvalidInputError, WireFormatError
from tinker_lite.local.state import HTTPError

__all__ = ["check_empty_object", "field_error", "parse_json", "schema_error", "structure_request"]

T = TypeVar("T")


def _default_process_uuid() -> str:
    return str(uuid.uuid4())


# Required keys of a request model that an older SDK omits: name -> default factory.
_DEFAULTS: dict[type[Any], dict[str, Callable[[], Any]]] = {
    # WIRE.md §13.3: 0.4.1 sends no `optimizer`; the service treats it as false
    types.LoadWeightsRequest: {"optimizer": lambda: False},
    # WIRE.md §13.5: `process_uuid` arrived in 0.24.0; 0.4.1 batches have none
    types.TelemetrySendRequest: {"process_uuid": _default_process_uuid},
}


def parse_json(body: bytes) -> Any:
    """Decode a JSON body; 400 naming the problem when it is not JSON."""
    if not body.strip():
        raise HTTPError(400, "Request body is empty; expected a JSON object")
    try:
        return _wire.loads(body)
    except (WireFormatError, ValueError) as e:
        raise HTTPError(400, f"Request body is not valid JSON: {e}") from e


def field_error(loc: Sequence[str | int], msg: str, kind: str) -> HTTPError:
    """A 422 whose pydantic-style body names the offending field by its ``loc``."""
    return HTTPError(422, [{"loc": list(loc), "msg": msg, "type": kind}])


def structure_request(data: Any, cls: type[T], *, where: str = "body") -> T:
    """Structure a JSON object into ``cls`` strictly; 422 naming the field otherwise."""
    if not isinstance(data, dict):
        raise field_error([where], "Input should be a JSON object", "dict_type")
    missing = {key: factory() for key, factory in _DEFAULTS.get(cls, {}).items() if key not in data}
    try:
        return _wire.structure({**data, **missing}, cls, strict=True)
    except (WireFormatError, InvalidInputError, ValueError, TypeError) as e:
        raise schema_error(e, where) from e


_LOC_SPLIT = re.compile(r"\.|\[|\]")


def _loc(field: str) -> list[str | int]:
    parts: list[str | int] = []
    for part in _LOC_SPLIT.split(field):
        part = part.strip().strip("'\"")
        if not part:
            continue
        parts.append(int(part) if part.isdigit() else part)
    return parts


def _error_type(message: str) -> str:
    text = message.lower()
    if "unknown" in text or "extra" in text or "unexpected" in text or "not permitted" in text:
        return "extra_forbidden"
    if "missing" in text or "required" in text:
        return "missing"
    if "type" in text or "expected" in text or "must be" in text:
        return "type_error"
    return "value_error"


_AT_PATH = re.compile(r"^cannot read \w+ at (\S+?): ")
_KEYS = re.compile(r"(?:unknown keys \[([^\]]*)\]|missing required key '([^']+)')")


def schema_error(exc: BaseException, where: str = "body") -> HTTPError:
    """Turn a structuring error into a 422 whose body names the offending field.

    ``_wire`` reports ``cannot read <Model> at <path>: <problem>``; the path (plus the unknown or
    missing key it names) becomes the pydantic-style ``loc``.
    """
    message = str(exc) or type(exc).__name__
    loc: list[str | int] = [where]
    field = getattr(exc, "field", None)
    at_path = _AT_PATH.match(message)
    if at_path:
        loc += _loc(at_path.group(1))
    elif isinstance(field, str) and field:
        loc += _loc(field)
    keys = _KEYS.search(message)
    if keys:
        names = keys.group(1) or repr(keys.group(2))
        loc += [n.strip().strip("'\"") for n in names.split(",") if n.strip()][:1]
    return field_error(loc, message, _error_type(message))


def check_empty_object(data: Any, where: str = "body") -> None:
    """Require ``{}`` (auth/token takes no fields)."""
    if not isinstance(data, Mapping):
        raise field_error([where], "Input should be a JSON object", "dict_type")
    for key in data:
        raise field_error(
            [where, str(key)], f"{key}: Extra inputs are not permitted", "extra_forbidden"
        )
