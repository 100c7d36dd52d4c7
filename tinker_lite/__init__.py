"""tinker_lite: a light, sync-only client for the Tinker fine-tuning API.

Sync code written for the official SDK runs with ``import tinker_lite as tinker``: the clients,
``types``, the errors and ``APIFuture`` keep the official names. Clients and their dependencies
(urllib3, tenacity, tokenizers) load on first use, so ``import tinker_lite`` stays fast.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from tinker_lite import _logging
from tinker_lite._errors import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    BillingError,
    ClientClosedError,
    ConflictError,
    DownloadError,
    ExperimentalWarning,
    FutureTimeoutError,
    InternalServerError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    PromiseExpiredError,
    RateLimitError,
    RequestErrorCategory,
    RequestFailedError,
    ResponseTooLargeError,
    TinkerError,
    TokenizerUnavailableError,
    UnprocessableEntityError,
    UnsafeArchiveError,
    WireFormatError,
)
from tinker_lite._version import __version__

if TYPE_CHECKING:
    from tinker_lite import auth, types
    from tinker_lite._api.request_options import RequestOptions, Timeout
    from tinker_lite._codec.chunking import ChunkLimits
    from tinker_lite._futures.future import APIFuture
    from tinker_lite._progress import Progress, gather
    from tinker_lite._training.loss_handle import LossHandle, PerDatumLossFn
    from tinker_lite._training.validate import ValidationReport, validate
    from tinker_lite.admin_client import AdminClient
    from tinker_lite.rest_client import RestClient
    from tinker_lite.sampling_client import BackcompatSamplingClientFuture, SamplingClient
    from tinker_lite.service_client import ServiceClient
    from tinker_lite.training_client import BackcompatTrainingClientFuture, TrainingClient
    from tinker_lite.types import (
        AdamOptimizerConfig,
        AdamParams,
        Checkpoint,
        CheckpointType,
        Datum,
        DimuonOptimizerConfig,
        DimuonParams,
        DmelChunk,
        EncodedTextChunk,
        ForwardBackwardOutput,
        ImageAssetPointerChunk,
        ImageChunk,
        LoraConfig,
        LossFnType,
        ModelID,
        ModelInput,
        ModelInputChunk,
        OptimParams,
        OptimStepRequest,
        OptimStepResponse,
        ParsedCheckpointTinkerPath,
        PromptProvenanceSpan,
        SampledProvenanceSpan,
        SampledSequence,
        SampleRequest,
        SampleResponse,
        SamplingParams,
        StopReason,
        TensorData,
        TensorDtype,
        TrainingRun,
    )

logging.getLogger(__name__).addHandler(_logging.UnconfiguredWarningsHandler())
_logging.setup_logging()  # TINKER_LOG=debug|info, as the official SDK reads it

__title__ = "tinker_lite"

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIFuture",
    "APIResponseValidationError",
    "APIStatusError",
    "APITimeoutError",
    "AdamOptimizerConfig",
    "AdamParams",
    "AdminClient",
    "AuthenticationError",
    "BackcompatSamplingClientFuture",
    "BackcompatTrainingClientFuture",
    "BadRequestError",
    "BillingError",
    "Checkpoint",
    "CheckpointType",
    "ChunkLimits",
    "ClientClosedError",
    "ConflictError",
    "Datum",
    "DimuonOptimizerConfig",
    "DimuonParams",
    "DmelChunk",
    "DownloadError",
    "EncodedTextChunk",
    "ExperimentalWarning",
    "ForwardBackwardOutput",
    "FutureTimeoutError",
    "ImageAssetPointerChunk",
    "ImageChunk",
    "InternalServerError",
    "InvalidInputError",
    "LoraConfig",
    "LossFnType",
    "LossHandle",
    "ModelID",
    "ModelInput",
    "ModelInputChunk",
    "NotFoundError",
    "OptimParams",
    "OptimStepRequest",
    "OptimStepResponse",
    "ParsedCheckpointTinkerPath",
    "PerDatumLossFn",
    "PermissionDeniedError",
    "Progress",
    "PromiseExpiredError",
    "PromptProvenanceSpan",
    "RateLimitError",
    "RequestErrorCategory",
    "RequestFailedError",
    "RequestOptions",
    "ResponseTooLargeError",
    "RestClient",
    "SampleRequest",
    "SampleResponse",
    "SampledProvenanceSpan",
    "SampledSequence",
    "SamplingClient",
    "SamplingParams",
    "ServiceClient",
    "StopReason",
    "TensorData",
    "TensorDtype",
    "Timeout",
    "TinkerError",
    "TokenizerUnavailableError",
    "TrainingClient",
    "TrainingRun",
    "UnprocessableEntityError",
    "UnsafeArchiveError",
    "ValidationReport",
    "WireFormatError",
    "__title__",
    "__version__",
    "auth",
    "gather",
    "types",
    "validate",
]

# Public name -> module that defines it, resolved on first access (PEP 562); any other public
# name not defined here comes from ``types``.
_LAZY: dict[str, str] = {
    "APIFuture": "tinker_lite._futures.future",
    "RestClient": "tinker_lite.rest_client",
    "AdminClient": "tinker_lite.admin_client",
    "LossHandle": "tinker_lite._training.loss_handle",
    "PerDatumLossFn": "tinker_lite._training.loss_handle",
    "RequestOptions": "tinker_lite._api.request_options",
    "Timeout": "tinker_lite._api.request_options",
    "SamplingClient": "tinker_lite.sampling_client",
    "ServiceClient": "tinker_lite.service_client",
    "TrainingClient": "tinker_lite.training_client",
    "BackcompatSamplingClientFuture": "tinker_lite.sampling_client",
    "BackcompatTrainingClientFuture": "tinker_lite.training_client",
    "Progress": "tinker_lite._progress",
    "gather": "tinker_lite._progress",
    "ChunkLimits": "tinker_lite._codec.chunking",
    "ValidationReport": "tinker_lite._training.validate",
    "validate": "tinker_lite._training.validate",
}


def __getattr__(name: str) -> Any:
    if name in ("types", "auth"):
        return importlib.import_module(f"tinker_lite.{name}")
    module = _LAZY.get(name, "tinker_lite.types" if name in __all__ else None)
    if module is None:
        raise AttributeError(f"module 'tinker_lite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
