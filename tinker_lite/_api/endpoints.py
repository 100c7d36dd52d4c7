"""The service's endpoint paths and the constants of its requests (docs/protocol.rst §4, §1.2)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

from tinker_lite._errors import InvalidInputError

__all__ = [
    "ACCESS_SCOPES",
    "API",
    "ASAMPLE_PATH",
    "CONSOLE_URL",
    "CREATE_SESSION_PATH",
    "HEARTBEAT_PATH",
    "REDIRECT_STATUSES",
    "RETRIEVE_FUTURES_PATH",
    "SAMPLE_BACKPRESSURE_HEADERS",
    "TELEMETRY_PATH",
    "checkpoint_segments",
    "segment",
]

API = "/api/v1"
CONSOLE_URL = "https://tinker.thinkingmachines.ai"
"""The web console; training runs and sessions have pages under it."""

ASAMPLE_PATH = f"{API}/asample"
CREATE_SESSION_PATH = f"{API}/create_session"
HEARTBEAT_PATH = f"{API}/session_heartbeat"
TELEMETRY_PATH = f"{API}/telemetry"
RETRIEVE_FUTURES_PATH = f"{API}/retrieve_futures"
# docs/protocol.rst §6.4: asample asks the service for 429 backpressure rather than queueing.
SAMPLE_BACKPRESSURE_HEADERS: Mapping[str, str] = {"X-Tinker-Sampling-Backpressure": "1"}
ACCESS_SCOPES = ("owned", "accessible")
# docs/protocol.rst §4.6: the archive URL is a redirect that is read, never followed.
REDIRECT_STATUSES = (301, 302, 303, 307, 308)


# RFC 3986 pchar: unreserved, sub-delims, ':' and '@' stay (sampler ids are 'sess:sample:1', as
# 0.38 sends them); every other character, '/' and '%' included, is percent-encoded.
_SEGMENT_SAFE = ":@!$&'()*+,;=-._~"
_DOT_SEGMENTS = (".", "..")


def segment(argument: str, value: object) -> str:
    """``value`` as one URL path segment, percent-encoded; ``.``, ``..`` and empty values are
    refused with :class:`~tinker_lite.InvalidInputError` naming ``argument``.

    A ``.``/``..`` segment would be removed before sending (RFC 3986 §5.2.4), and the request
    would reach another resource (``training_runs/..`` is the list of every run); a
    percent-encoded one is decoded back by requests, so it cannot be sent literally either.
    """
    if not isinstance(value, str) or not value:
        raise InvalidInputError(argument, f"must be a non-empty string, got {value!r}")
    if value in _DOT_SEGMENTS:
        raise InvalidInputError(
            argument,
            f"{value!r} is not an id: a '.' or '..' path segment would address another resource",
            "pass the id as listed by the service (e.g. TrainingClient.model_id, "
            "Checkpoint.checkpoint_id)",
        )
    return urllib.parse.quote(value, safe=_SEGMENT_SAFE)


def checkpoint_segments(argument: str, checkpoint_id: object) -> str:
    """A checkpoint id (``weights/<name>``) as its two path segments, each checked and encoded
    (docs/protocol.rst §2.1: the '/' between kind and name stays)."""
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise InvalidInputError(argument, f"must be a non-empty string, got {checkpoint_id!r}")
    return "/".join(segment(argument, part) for part in checkpoint_id.split("/"))
