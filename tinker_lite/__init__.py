"""tinker_lite: a light, sync-only client for the Tinker fine-tuning API.

Sync code written for the official SDK runs with ``import tinker_lite as tinker``: the clients,
``types``, the errors and ``APIFuture`` keep the official names. Clients and their dependencies
(requests, tenacity, tokenizers) load on first use, so ``import tinker_lite`` stays fast.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from tinker_lite._errors import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    PromiseExpiredError,
    RateLimitError,
    RequestErrorCategory,
    RequestFailedError,
    TinkerError,
    UnprocessableEntityError,
)
from tinker_lite._version import __version__

if TYPE_CHECKING:
    from tinker_lite import types
    from tinker_lite._chunking import ChunkLimits
    from tinker_lite._futures import APIFuture
    from tinker_lite._progress import Progress, gather
    from tinker_lite._validate import ValidationReport, validate
    from tinker_lite.rest_client import RestClient
    from tinker_lite.sampling_client import SamplingClient
    from tinker_lite.service_client import ServiceClient
    from tinker_lite.training_client import TrainingClient
    from tinker_lite.types import (
        AdamParams,
        Checkpoint,
        Datum,
        EncodedTextChunk,
        ForwardBackwardOutput,
        ImageAssetPointerChunk,
        ImageChunk,
        LoraConfig,
        LossFnType,
        ModelInput,
        ModelInputChunk,
        SampledSequence,
        SampleResponse,
        SamplingParams,
        StopReason,
        TensorData,
        TrainingRun,
    )

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIFuture",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AdamParams",
    "AuthenticationError",
    "BadRequestError",
    "Checkpoint",
    "ChunkLimits",
    "ConflictError",
    "Datum",
    "EncodedTextChunk",
    "ForwardBackwardOutput",
    "ImageAssetPointerChunk",
    "ImageChunk",
    "InternalServerError",
    "InvalidInputError",
    "LoraConfig",
    "LossFnType",
    "ModelInput",
    "ModelInputChunk",
    "NotFoundError",
    "PermissionDeniedError",
    "Progress",
    "PromiseExpiredError",
    "RateLimitError",
    "RequestErrorCategory",
    "RequestFailedError",
    "RestClient",
    "SampleResponse",
    "SampledSequence",
    "SamplingClient",
    "SamplingParams",
    "ServiceClient",
    "StopReason",
    "TensorData",
    "TinkerError",
    "TrainingClient",
    "TrainingRun",
    "UnprocessableEntityError",
    "ValidationReport",
    "__version__",
    "gather",
    "types",
    "validate",
]

# Public name -> module that defines it; resolved on first attribute access (PEP 562).
_LAZY: dict[str, str] = {
    "APIFuture": "tinker_lite._futures",
    "RestClient": "tinker_lite.rest_client",
    "SamplingClient": "tinker_lite.sampling_client",
    "ServiceClient": "tinker_lite.service_client",
    "TrainingClient": "tinker_lite.training_client",
    "Progress": "tinker_lite._progress",
    "gather": "tinker_lite._progress",
    "ChunkLimits": "tinker_lite._chunking",
    "ValidationReport": "tinker_lite._validate",
    "validate": "tinker_lite._validate",
    **dict.fromkeys(
        (
            "AdamParams",
            "Checkpoint",
            "Datum",
            "EncodedTextChunk",
            "ForwardBackwardOutput",
            "ImageAssetPointerChunk",
            "ImageChunk",
            "LoraConfig",
            "LossFnType",
            "ModelInput",
            "ModelInputChunk",
            "SampleResponse",
            "SampledSequence",
            "SamplingParams",
            "StopReason",
            "TensorData",
            "TrainingRun",
        ),
        "tinker_lite.types",
    ),
}


def __getattr__(name: str) -> Any:
    if name == "types":
        return importlib.import_module("tinker_lite.types")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tinker_lite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
