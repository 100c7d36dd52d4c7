"""The local server's HTTP answers and the small parsers of what a request carries.

:class:`Response` is what every route returns; the helpers read bodies (compression, JSON
objects), query parameters, ``Accept`` / ``Content-Type`` and ``Range`` headers.
"""

from __future__ import annotations

import io
import unicodedata
import urllib.parse
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tinker_lite._codec import wire as _wire
from tinker_lite.local.protocol.parsing import parse_json
from tinker_lite.local.refusals import InvalidRequest, RequestRefused, field_error, refusal

__all__ = [
    "API",
    "JSON",
    "MAX_BODY",
    "PROTOBUF",
    "Response",
    "as_json",
    "content_disposition",
    "cursor",
    "decompress",
    "http_error",
    "is_protobuf",
    "json_object",
    "no_content",
    "parse_range",
    "prefers_protobuf",
    "query_int",
    "query_opt",
    "query_time",
    "too_large",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# The default cap on a request body, as sent and once inflated (LocalServer(max_body_bytes=...)).
# The tiny model's context is 512 tokens: its largest legitimate request (a forward_backward of
# thousands of datums) is a few MiB.
MAX_BODY = 64 << 20
API = "/api/v1/"


@dataclass
class Response:
    """An HTTP answer; ``drop`` closes without answering, ``truncate_at`` cuts the body short."""

    status: int
    body: bytes = b""
    content_type: str | None = JSON
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    truncate_at: float | None = None
    content_length: int | None = None


def as_json(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """``obj`` as a JSON answer."""
    return Response(status, _wire.dumps(obj), JSON, dict(headers or {}))


def http_error(status: int, detail: Any, headers: Mapping[str, str] | None = None) -> Response:
    """An error answer ``{"detail": ...}``, the service's error body."""
    return as_json({"detail": detail}, status, headers)


def no_content() -> Response:
    """A 204 answer."""
    return Response(204, b"", None)


def prefers_protobuf(accept: str | None) -> bool:
    """True when the Accept header ranks protobuf above (or before) JSON."""
    if not accept:
        return False
    best: dict[str, tuple[float, int]] = {}
    for index, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        kind = "proto" if media.lower() in (PROTOBUF, "application/protobuf") else "other"
        if media.lower() in (JSON, "*/*", "application/*"):
            kind = "json"
        if kind != "other" and kind not in best:
            best[kind] = (q, index)
    proto = best.get("proto")
    if proto is None or proto[0] <= 0:
        return False
    other = best.get("json")
    return other is None or proto[0] > other[0] or (proto[0] == other[0] and proto[1] < other[1])


def decompress(body: bytes, encoding: str | None, limit: int = MAX_BODY) -> bytes:
    """The body without its ``Content-Encoding`` (gzip, zstd); 400, 413 or 415 otherwise.

    Inflation stops as soon as the output passes ``limit`` bytes (413): a small compressed body
    that inflates to gigabytes costs no more than ``limit``.
    """
    if not encoding or encoding.lower() == "identity":
        return body
    enc = encoding.lower().strip()
    if enc == "gzip":
        return _gunzip(body, limit)
    if enc == "zstd":
        from tinker_lite._codec import zstd as _zstd_codec

        module = _zstd_codec._zstd()
        if module is None:
            raise refusal(
                415, "Content-Encoding zstd needs the 'zstandard' package on the local server"
            )
        try:
            with module.ZstdDecompressor().stream_reader(io.BytesIO(body)) as reader:
                out: bytes = reader.read(limit + 1)
        except module.ZstdError as e:
            raise InvalidRequest(f"Request body is not valid zstd: {e}") from e
        if len(out) > limit:
            raise too_large(limit, inflated=True)
        return out
    raise refusal(415, f"Unsupported Content-Encoding {encoding!r}")


# gzip is inflated this many bytes at a time: the peak stays near the output's own size.
_INFLATE_STEP = 1 << 20


def _gunzip(body: bytes, limit: int) -> bytes:
    """Inflate a gzip body (every member, as ``gzip.decompress``) without passing ``limit``."""
    parts: list[bytes] = []
    total = 0
    data = body
    try:
        while data:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not inflater.eof:
                part = inflater.decompress(data, min(limit + 1 - total, _INFLATE_STEP))
                data = inflater.unconsumed_tail
                if not part and not data and not inflater.eof:
                    raise InvalidRequest("Request body is not valid gzip: truncated stream")
                total += len(part)
                if total > limit:
                    raise too_large(limit, inflated=True)
                parts.append(part)
            data = inflater.unused_data.lstrip(b"\x00")
    except zlib.error as e:
        raise InvalidRequest(f"Request body is not valid gzip: {e}") from e
    return b"".join(parts)


def too_large(limit: int, *, inflated: bool = False) -> RequestRefused:
    """The 413 refusal of a request body (or its inflated form) over ``limit`` bytes."""
    what = "Inflated request body" if inflated else "Request body"
    return refusal(413, f"{what} too large (the limit is {limit} bytes)")


# Unicode categories never put in a download's file name: controls, surrogates, line separators.
_UNSAFE_IN_NAMES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def content_disposition(filename: str) -> str:
    """An ``attachment`` Content-Disposition for ``filename``, safe for any name (RFC 6266).

    The plain ``filename`` is an ASCII stand-in (no control characters, quotes or backslashes);
    ``filename*`` carries the name UTF-8 and percent-encoded, so ``模型.tar.gz`` arrives intact.
    Control characters (CR, LF, ESC...) become ``_`` in both: a header never holds a CR/LF (no
    header injection) and no client is handed one to write as a file name.
    """
    name = "".join("_" if unicodedata.category(c) in _UNSAFE_IN_NAMES else c for c in filename)
    fallback = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\' else "_" for c in name)
    encoded = urllib.parse.quote(name, safe="!#$&+-.^_`|~")
    if encoded == name:
        return f'attachment; filename="{fallback}"'
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


def json_object(body: bytes) -> dict[str, Any]:
    """A body that must be a JSON object; 400/422 otherwise."""
    data = parse_json(body)
    if not isinstance(data, dict):
        raise field_error(["body"], "Input should be a JSON object", "dict_type")
    return data


def query_opt(query: Mapping[str, list[str]], name: str) -> str | None:
    """The first value of query parameter ``name``, or None."""
    values = query.get(name)
    return values[0] if values else None


def query_time(query: Mapping[str, list[str]], name: str) -> float:
    """An ISO 8601 date-time query parameter as epoch seconds; 422 naming it otherwise."""
    values = query.get(name)
    if not values:
        raise field_error(["query", name], f"{name}: is required", "missing")
    text = values[0].strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise field_error(
            ["query", name], f"{name}: expected an ISO 8601 date-time", "datetime_parsing"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def cursor(offset: int, limit: int, total: int) -> dict[str, int]:
    """A REST listing's ``cursor`` object."""
    return {"offset": offset, "limit": limit, "total_count": total}


def query_int(query: Mapping[str, list[str]], name: str, default: int) -> int:
    """Query parameter ``name`` as an int >= 0 (``default`` when absent); 422 naming it."""
    values = query.get(name)
    if not values:
        return default
    try:
        value = int(values[-1])
    except ValueError:
        raise field_error(
            ["query", name], f"{name}: Input should be a valid integer", "int_parsing"
        ) from None
    if value < 0:
        raise field_error(["query", name], f"{name}: must be >= 0", "greater_than_equal")
    return value


def is_protobuf(headers: Mapping[str, str]) -> bool:
    """True when the request body is protobuf (by its Content-Type)."""
    content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    return content_type in (PROTOBUF, "application/protobuf")


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """Parse a single ``bytes=`` range; None to ignore it, "unsatisfiable" for 416."""
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash:
        return None
    try:
        if not first:
            if not last:
                return None
            suffix = int(last)
            if suffix <= 0:
                return "unsatisfiable"
            return max(0, size - suffix), size - 1
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if last and end < start:
        # RFC 9110 §14.1.1: a range whose last byte precedes its first is invalid: ignore it.
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)
