"""Strict request parsing for the local server: JSON body -> ``types`` request, or a 4xx.

Bodies are structured with ``_wire.structure(..., strict=True)`` so unknown keys, wrong types and
missing required fields are rejected like the service's own schemas do (422, naming the field).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tinker_lite import types
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import InvalidInputError, WireFormatError
from tinker_lite.local.refusals import InvalidRequest, RequestRefused, field_error
from tinker_lite.local.service.checks import DimuonStepRequest

__all__ = [
    "check_empty_object",
    "optim_step_request",
    "parse_json",
    "schema_error",
    "structure_request",
]

T = TypeVar("T")


def _default_process_uuid() -> str:
    return str(uuid.uuid4())


# Required keys of a request model that an older SDK omits: name -> default factory.
_DEFAULTS: dict[type[Any], dict[str, Callable[[], Any]]] = {
    # docs/protocol.rst §4.3: 0.4.1 sends no `optimizer`; the service treats it as false
    types.LoadWeightsRequest: {"optimizer": lambda: False},
    # docs/protocol.rst §9: `process_uuid` arrived in 0.24.0; 0.4.1 batches have none
    types.TelemetrySendRequest: {"process_uuid": _default_process_uuid},
}


def parse_json(body: bytes) -> Any:
    """Decode a JSON body; 400 naming the problem when it is not JSON."""
    if not body.strip():
        raise InvalidRequest("Request body is empty; expected a JSON object")
    try:
        return _wire.loads(body)
    except (WireFormatError, ValueError) as e:
        raise InvalidRequest(f"Request body is not valid JSON: {e}") from e


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


def schema_error(exc: BaseException, where: str = "body") -> RequestRefused:
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


_OPTIM_STEP_KEYS = ("model_id", "seq_id", "type", "optimizer_params")
_DIMUON_KEYS = ("type", "learning_rate", "grad_clip_norm", "beta1")


def optim_step_request(data: Any) -> types.OptimStepRequest | DimuonStepRequest:
    """Structure an optim_step body: ``adam_params`` (AdamW) or ``optimizer_params`` (Dimuon).

    Unknown keys, a missing field or a bad value are a 422 naming the field.
    """
    if not isinstance(data, Mapping) or "optimizer_params" not in data:
        return structure_request(data, types.OptimStepRequest)
    for key in data:
        if key == "adam_params":
            raise field_error(
                ["body", "adam_params"],
                "adam_params: send either adam_params (AdamW) or optimizer_params, not both",
                "extra_forbidden",
            )
        if key not in _OPTIM_STEP_KEYS:
            raise field_error(
                ["body", str(key)], f"{key}: Extra inputs are not permitted", "extra_forbidden"
            )
    model_id, seq_id = data.get("model_id"), data.get("seq_id")
    if not isinstance(model_id, str) or not model_id:
        raise field_error(["body", "model_id"], "model_id: a string is required", "missing")
    if seq_id is not None and (
        not isinstance(seq_id, int) or isinstance(seq_id, bool) or seq_id < 0
    ):
        raise field_error(["body", "seq_id"], "seq_id: must be an integer >= 0", "int_type")
    if data.get("type", "optim_step") != "optim_step":
        raise field_error(["body", "type"], "type: must be 'optim_step'", "literal_error")
    params = data["optimizer_params"]
    if not isinstance(params, Mapping):
        raise field_error(
            ["body", "optimizer_params"], "optimizer_params: must be an object", "dict_type"
        )
    kind = params.get("type")
    if kind != "dimuon":
        raise field_error(
            ["body", "optimizer_params", "type"],
            f"optimizer_params.type: unsupported optimizer {kind!r} (supported: 'dimuon'; "
            "AdamW settings go in adam_params)",
            "missing" if kind is None else "literal_error",
        )
    for key in params:
        if key not in _DIMUON_KEYS:
            raise field_error(
                ["body", "optimizer_params", str(key)],
                f"optimizer_params.{key}: Extra inputs are not permitted",
                "extra_forbidden",
            )
    if "learning_rate" not in params:
        raise field_error(
            ["body", "optimizer_params", "learning_rate"],
            "optimizer_params.learning_rate: Field required",
            "missing",
        )
    learning_rate = _finite(params, "learning_rate", None)
    if learning_rate < 0:
        raise _bad_dimuon("learning_rate", f"must be >= 0, got {learning_rate}")
    beta1 = _finite(params, "beta1", 0.9)
    if not 0.0 <= beta1 < 1.0:
        raise _bad_dimuon("beta1", f"must be in [0, 1), got {beta1}")
    return DimuonStepRequest(
        model_id=model_id,
        seq_id=seq_id,
        learning_rate=learning_rate,
        grad_clip_norm=_finite(params, "grad_clip_norm", 0.0),
        beta1=beta1,
    )


def _bad_dimuon(key: str, problem: str) -> RequestRefused:
    return field_error(
        ["body", "optimizer_params", key], f"optimizer_params.{key}: {problem}", "value_error"
    )


def _finite(params: Mapping[str, Any], key: str, default: float | None) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad_dimuon(key, f"must be a finite number, got {value!r}")
    return float(value)
