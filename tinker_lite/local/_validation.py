"""Strict request parsing for the local server: JSON body -> ``types`` request, or a 4xx.

Bodies are structured with ``_wire.structure(..., strict=True)`` so unknown keys, wrong types and
missing required fields are rejected like the service's own schemas do (422). A few keys that the
official SDKs send but the request models do not (yet) declare are accepted explicitly: they are
taken out of the body before structuring and handed back to the caller, type-checked.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tinker_lite import _wire, types
from tinker_lite._errors import InvalidInputError, WireFormatError
from tinker_lite.local.state import HTTPError

__all__ = ["parse_json", "structure_request"]

T = TypeVar("T")


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


# Keys the official SDKs send that a request model may not declare: name -> type check.
_EXTRAS: dict[type[Any], dict[str, Callable[[object], bool]]] = {
    # golden-0.38 asample bodies always carry it (stable_reinforce, SERVER.md §1.6)
    types.SampleRequest: {"record_stability_info": _is_bool},
    types.CreateSessionRequest: {"project_id": _is_str, "display_name": _is_str},
    types.SaveWeightsRequest: {"overwrite": _is_bool, "ttl_seconds": _is_int},
    types.SaveWeightsForSamplerRequest: {"kind": _is_str, "ttl_seconds": _is_int},
    types.FutureRetrieveRequest: {"allow_metadata_only": _is_bool},
    types.CreateModelRequest: {"optimizer_config": lambda v: isinstance(v, dict)},
    types.LoadWeightsRequest: {"optimizer": _is_bool},
}


def _default_process_uuid() -> Any:
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


def _field_names(cls: type[Any]) -> set[str]:
    # request models are attrs classes; read their fields without importing attrs (STYLE.md
    # layering: local/ depends on types/_wire only)
    names: set[str] = set()
    for f in getattr(cls, "__attrs_attrs__", ()):
        names.add(f.name)
        if getattr(f, "alias", None):
            names.add(f.alias)
    return names


def structure_request(data: Any, cls: type[T], *, where: str = "body") -> tuple[T, dict[str, Any]]:
    """Structure a JSON object into ``cls`` strictly; return it with the accepted extra keys."""
    if not isinstance(data, dict):
        raise HTTPError(
            422,
            [{"loc": [where], "msg": "Input should be a JSON object", "type": "dict_type"}],
        )
    data = dict(data)
    declared = _field_names(cls)
    extras: dict[str, Any] = {}
    for key, check in _EXTRAS.get(cls, {}).items():
        if key in data and key not in declared:
            value = data.pop(key)
            if value is not None and not check(value):
                raise HTTPError(
                    422,
                    [
                        {
                            "loc": [where, key],
                            "msg": f"{key}: wrong type {type(value).__name__}",
                            "type": "type_error",
                        }
                    ],
                )
            extras[key] = value
    for key, factory in _DEFAULTS.get(cls, {}).items():
        if key not in data:
            data[key] = factory()
    try:
        obj = _wire.structure(data, cls, strict=True)
    except (WireFormatError, InvalidInputError, ValueError, TypeError) as e:
        raise schema_error(e, where) from e
    return obj, extras


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
    return HTTPError(422, [{"loc": loc, "msg": message, "type": _error_type(message)}])


def check_empty_object(data: Any, where: str = "body") -> None:
    """Require ``{}`` (auth/token takes no fields)."""
    if not isinstance(data, Mapping):
        raise HTTPError(
            422, [{"loc": [where], "msg": "Input should be a JSON object", "type": "dict_type"}]
        )
    for key in data:
        raise HTTPError(
            422,
            [
                {
                    "loc": [where, str(key)],
                    "msg": f"{key}: Extra inputs are not permitted",
                    "type": "extra_forbidden",
                }
            ],
        )
