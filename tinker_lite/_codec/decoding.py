"""Direct JSON answers to ``types`` models, with errors a caller can act on (docs/protocol.rst
§2.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from tinker_lite._codec import wire as _wire
from tinker_lite._errors import APIResponseValidationError, TinkerError, WireFormatError
from tinker_lite._secrets import redact

if TYPE_CHECKING:
    from tinker_lite._transport.answers import HttpResponse

__all__ = ["decode_json", "parse_model"]

T = TypeVar("T")

_MAX_BODY_IN_ERROR = 2000


def decode_json(resp: HttpResponse, *, what: str) -> Any:
    """Parse a direct answer's JSON body; APIResponseValidationError if it is not JSON."""
    try:
        return resp.json()
    except TinkerError as e:
        raise APIResponseValidationError(
            f"The service answered {what} with a body that is not valid JSON "
            f"(status {resp.status}, {len(resp.body)} bytes): {redact(str(e))}",
            body=resp.text(_MAX_BODY_IN_ERROR),
            status_code=resp.status,
        ) from e


def parse_model(resp: HttpResponse, cls: type[T], *, what: str | None = None) -> T:
    """Decode a direct JSON answer into ``cls`` (APIResponseValidationError on mismatch)."""
    label = what or cls.__name__
    data = decode_json(resp, what=label)
    try:
        return _wire.structure(data, cls)
    except WireFormatError as e:
        raise APIResponseValidationError(
            f"The service's answer to {label} does not match {cls.__name__}: {e}",
            body=data,
            status_code=resp.status,
        ) from e
