"""The service's endpoint paths and the constants of its requests (docs/protocol.rst §4, §1.2)."""

from __future__ import annotations

from collections.abc import Mapping

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
