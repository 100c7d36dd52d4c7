"""The requestor: named operations between the clients and the transport
(docs/architecture.rst, "The layers")."""

from tinker_lite._api.requestor import Requestor
from tinker_lite._api.sampling import decode_sample
from tinker_lite._api.training import TrainingRequest, decode_forward_backward, json_result

__all__ = [
    "Requestor",
    "TrainingRequest",
    "decode_forward_backward",
    "decode_sample",
    "json_result",
]
