"""The service's endpoints, one table (docs/protocol.rst §4), and how ids become path segments
(docs/protocol.rst §2.1)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

from tinker_lite import types
from tinker_lite._errors import InvalidInputError

__all__ = [
    "API",
    "ASAMPLE_PATH",
    "CONSOLE_URL",
    "Endpoint",
    "checkpoint_segments",
    "segment",
]

T = TypeVar("T")

API = "/api/v1"
CONSOLE_URL = "https://tinker.thinkingmachines.ai"
"""The web console; training runs and sessions have pages under it."""


@dataclass(frozen=True)
class Endpoint(Generic[T]):
    """One operation of the service: verb, path template (``{names}`` are ids), the models of
    ``types`` it answers and takes, its ``x-sdk-method`` and the ``request_type`` it polls as."""

    verb: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    response: str | None = None
    sdk_method: str | None = None
    request_type: str | None = None

    @property
    def response_type(self) -> type[T]:
        """The model of the answer (rows name their models: ``types`` loads them lazily)."""
        return cast("type[T]", getattr(types, self.response or ""))

    @property
    def request_model(self) -> type[Any]:
        """The model of the request body (``types`` loads it lazily)."""
        return cast("type[Any]", getattr(types, f"{self.request_type}Request"))

    def url_path(self, **ids: str) -> str:
        """The path with every id as an encoded segment (``.``/``..`` refused, naming the
        id's argument); ``checkpoint_id`` is two segments (``weights/<name>``)."""
        return self.path.format_map(
            {
                name: checkpoint_segments(name, value)
                if name == "checkpoint_id"
                else segment(name, value)
                for name, value in ids.items()
            }
        )


_RUN = f"{API}/training_runs/{{training_run_id}}"
_CHECKPOINT = f"{_RUN}/checkpoints/{{checkpoint_id}}"
_SESSION = f"{API}/sessions/{{session_id}}"

# -- REST: training runs, checkpoints, sessions, samplers (docs/protocol.rst §4.5-§4.8) ------------
GET_SERVER_CAPABILITIES: Endpoint[types.GetServerCapabilitiesResponse] = Endpoint(
    "GET", f"{API}/get_server_capabilities", "GetServerCapabilitiesResponse",
    sdk_method="RestClient.get_server_capabilities",
)  # fmt: skip
LIST_TRAINING_RUNS: Endpoint[types.TrainingRunsResponse] = Endpoint(
    "GET", f"{API}/training_runs", "TrainingRunsResponse",
    sdk_method="RestClient.list_training_runs",
)  # fmt: skip
GET_TRAINING_RUN: Endpoint[types.TrainingRun] = Endpoint(
    "GET", _RUN, "TrainingRun", sdk_method="RestClient.get_training_run"
)
LIST_CHECKPOINTS: Endpoint[types.CheckpointsListResponse] = Endpoint(
    "GET", f"{_RUN}/checkpoints", "CheckpointsListResponse",
    sdk_method="RestClient.list_checkpoints",
)  # fmt: skip
LIST_USER_CHECKPOINTS: Endpoint[types.CheckpointsListResponse] = Endpoint(
    "GET", f"{API}/checkpoints", "CheckpointsListResponse",
    sdk_method="RestClient.list_user_checkpoints",
)  # fmt: skip
DELETE_CHECKPOINT: Endpoint[None] = Endpoint(
    "DELETE", _CHECKPOINT, sdk_method="RestClient.delete_checkpoint"
)
PUBLISH_CHECKPOINT: Endpoint[None] = Endpoint(
    "POST", f"{_CHECKPOINT}/publish", sdk_method="RestClient.publish_checkpoint"
)
UNPUBLISH_CHECKPOINT: Endpoint[None] = Endpoint(
    "DELETE", f"{_CHECKPOINT}/publish", sdk_method="RestClient.unpublish_checkpoint"
)
SET_CHECKPOINT_TTL: Endpoint[None] = Endpoint(
    "PUT", f"{_CHECKPOINT}/ttl", sdk_method="RestClient.set_checkpoint_ttl"
)
CHECKPOINT_ARCHIVE: Endpoint[types.CheckpointArchiveUrlResponse] = Endpoint(
    "GET", f"{_CHECKPOINT}/archive", "CheckpointArchiveUrlResponse",
    sdk_method="RestClient.get_checkpoint_archive_url",
)  # fmt: skip
EXTERNAL_WEIGHTS_URLS: Endpoint[types.ExternalWeightsUrlsResponse] = Endpoint(
    "GET", f"{_CHECKPOINT}/external_weights_urls", "ExternalWeightsUrlsResponse",
    sdk_method="RestClient.get_external_weights_urls",
)  # fmt: skip
LIST_SESSIONS: Endpoint[types.ListSessionsResponse] = Endpoint(
    "GET", f"{API}/sessions", "ListSessionsResponse", sdk_method="RestClient.list_sessions"
)
GET_SESSION: Endpoint[types.GetSessionResponse] = Endpoint(
    "GET", _SESSION, "GetSessionResponse", sdk_method="RestClient.get_session"
)
ASSIGN_SESSION_PROJECT: Endpoint[None] = Endpoint(
    "PUT", f"{_SESSION}/project", sdk_method="RestClient.assign_session_project"
)
TRACE_EXPORT: Endpoint[Any] = Endpoint(
    "GET", f"{_SESSION}/trace_export", sdk_method="RestClient.export_session_trace"
)
SEARCH_SESSIONS: Endpoint[types.SessionSearchResponse] = Endpoint(
    "POST", f"{API}/sessions/search", "SessionSearchResponse",
    sdk_method="RestClient.search_sessions",
)  # fmt: skip
GET_SAMPLER: Endpoint[types.GetSamplerResponse] = Endpoint(
    "GET", f"{API}/samplers/{{sampler_id}}", "GetSamplerResponse",
    sdk_method="RestClient.get_sampler",
)  # fmt: skip
COPY_WEIGHTS: Endpoint[types.CopyWeightsResponse] = Endpoint(
    "POST", f"{API}/copy_weights", "CopyWeightsResponse", sdk_method="RestClient.copy_weights"
)
# -- admin ----------------------------------------------------------------------------------------
AUDIT_LOG: Endpoint[types.AuditLogResponse] = Endpoint(
    "GET", f"{API}/audit", "AuditLogResponse", sdk_method="AdminClient.get_audit_log"
)
BILLING_USAGE: Endpoint[types.BillingUsageResponse] = Endpoint(
    "GET", f"{API}/billing/usage/events", "BillingUsageResponse",
    sdk_method="AdminClient.get_billing_usage",
)  # fmt: skip
CHECKPOINT_STORAGE_USAGE: Endpoint[types.CurrentCheckpointStorageUsageResponse] = Endpoint(
    "GET", f"{API}/billing/usage/checkpoints/current",
    "CurrentCheckpointStorageUsageResponse",
    sdk_method="AdminClient.get_current_checkpoint_storage_usage",
)  # fmt: skip

# -- models and training (docs/protocol.rst §4.2-§4.4) ---------------------------------------------
CREATE_MODEL: Endpoint[types.CreateModelResponse] = Endpoint(
    "POST", f"{API}/create_model", "CreateModelResponse", request_type="CreateModel"
)
CREATE_CUSTOM_LOSS: Endpoint[types.CreateCustomLossResponse] = Endpoint(
    "POST", f"{API}/create_custom_loss", "CreateCustomLossResponse",
    request_type="CreateCustomLoss",
)  # fmt: skip
LOAD_WEIGHTS: Endpoint[types.LoadWeightsResponse] = Endpoint(
    "POST", f"{API}/load_weights", "LoadWeightsResponse", request_type="LoadWeights"
)
SAVE_WEIGHTS: Endpoint[types.SaveWeightsResponse] = Endpoint(
    "POST", f"{API}/save_weights", "SaveWeightsResponse", request_type="SaveWeights"
)
SAVE_WEIGHTS_FOR_SAMPLER: Endpoint[types.SaveWeightsForSamplerResponseInternal] = Endpoint(
    "POST", f"{API}/save_weights_for_sampler", "SaveWeightsForSamplerResponseInternal",
    request_type="SaveWeightsForSampler",
)  # fmt: skip
SAVE_WEIGHTS_EXTERNAL: Endpoint[types.SaveWeightsExternalResponseInternal] = Endpoint(
    "POST", f"{API}/save_weights_external", "SaveWeightsExternalResponseInternal",
    request_type="SaveWeightsExternal",
)  # fmt: skip
OPTIM_STEP: Endpoint[types.OptimStepResponse] = Endpoint(
    "POST", f"{API}/optim_step", "OptimStepResponse", request_type="OptimStep"
)
FORWARD: Endpoint[types.ForwardBackwardOutput] = Endpoint(
    "POST", f"{API}/forward", "ForwardBackwardOutput", request_type="Forward"
)
FORWARD_BACKWARD: Endpoint[types.ForwardBackwardOutput] = Endpoint(
    "POST", f"{API}/forward_backward", "ForwardBackwardOutput", request_type="ForwardBackward"
)
WEIGHTS_INFO: Endpoint[types.WeightsInfoResponse] = Endpoint(
    "POST", f"{API}/weights_info", "WeightsInfoResponse"
)
GET_INFO: Endpoint[types.GetInfoResponse] = Endpoint("POST", f"{API}/get_info", "GetInfoResponse")

# -- sampling (docs/protocol.rst §4.4, §6.4, §7.3) ------------------------------------------------
CREATE_SAMPLING_SESSION: Endpoint[types.CreateSamplingSessionResponse] = Endpoint(
    "POST", f"{API}/create_sampling_session", "CreateSamplingSessionResponse"
)
JOIN_SAMPLING_SESSION: Endpoint[types.JoinSamplingSessionResponse] = Endpoint(
    "POST", f"{API}/join_sampling_session", "JoinSamplingSessionResponse"
)
ASAMPLE_PATH = f"{API}/asample"

# -- the connection: start-up, session, heartbeat, telemetry, polls (docs/protocol.rst §8, §5) ----
CLIENT_CONFIG_PATH = f"{API}/client/config"
DYNAMIC_CONFIG_PATH = f"{API}/client/dynamic_config"
AUTH_TOKEN_PATH = f"{API}/auth/token"
CREATE_SESSION_PATH = f"{API}/create_session"
HEARTBEAT_PATH = f"{API}/session_heartbeat"
FINISH_SESSION: Endpoint[None] = Endpoint("POST", f"{_SESSION}/finish")
TELEMETRY_PATH = f"{API}/telemetry"
RETRIEVE_FUTURE_PATH = f"{API}/retrieve_future"
RETRIEVE_FUTURES_PATH = f"{API}/retrieve_futures"
# -- the command line's own checks -----------------------------------------------------------------
HEALTHZ_PATH = f"{API}/healthz"
API_KEY_SELF_PATH = f"{API}/auth/apikey/me"


# RFC 3986 pchar: unreserved, sub-delims, ':' and '@' stay (sampler ids are 'sess:sample:1', as
# 0.38 sends them); every other character, '/' and '%' included, is percent-encoded.
_SEGMENT_SAFE = ":@!$&'()*+,;=-._~"
_DOT_SEGMENTS = (".", "..")


def segment(argument: str, value: object) -> str:
    """``value`` as one percent-encoded URL path segment; ``.``, ``..`` and empty values are refused
    naming ``argument`` (they would address another resource, docs/protocol.rst §2.1)."""
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
    parts = checkpoint_id.split("/") if isinstance(checkpoint_id, str) else [checkpoint_id]
    return "/".join(segment(argument, part) for part in parts)
