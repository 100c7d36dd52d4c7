"""The requestor: named operations in ``types`` between the clients and the transport.

Clients send a row of the endpoint table (``request(endpoints.LIST_CHECKPOINTS, ...)``) or call
an operation (``training.submit(endpoints.CREATE_MODEL, ...)``, ``training.submit_training``,
``sampling.submit_sample``, ...) with ``types`` models and get ``types`` models (or futures of
them) back; the session holder asks it for the start-up,
heartbeat, telemetry and poll requests. This package alone knows the endpoint paths
(:mod:`~tinker_lite._api.endpoints`), the request and result encodings (JSON, protobuf, zstd),
the pool each operation uses and which statuses it accepts, and builds the service's headers
(:mod:`~tinker_lite._api.requestor`, the only caller of the retrying send).
"""

from tinker_lite._api.endpoints import (
    ACCESS_SCOPES,
    ASAMPLE_PATH,
    CONSOLE_URL,
    REDIRECT_STATUSES,
    SAMPLE_BACKPRESSURE_HEADERS,
)
from tinker_lite._api.requestor import Requestor, new_idempotency_key
from tinker_lite._api.sampling import decode_sample
from tinker_lite._api.training import TrainingRequest, decode_forward_backward, json_result

__all__ = [
    "ACCESS_SCOPES",
    "ASAMPLE_PATH",
    "CONSOLE_URL",
    "REDIRECT_STATUSES",
    "SAMPLE_BACKPRESSURE_HEADERS",
    "Requestor",
    "TrainingRequest",
    "decode_forward_backward",
    "decode_sample",
    "json_result",
    "new_idempotency_key",
]
