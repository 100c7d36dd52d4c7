"""Wire models of the Tinker API, with the official SDK's public names.

``from tinker_lite import types`` reads like ``from tinker import types``: requests, results, model
inputs, tensors and REST records are frozen, slotted attrs classes. Every constructor validates
its arguments and raises :class:`~tinker_lite.InvalidInputError` naming the field and how to fix
it, so nothing malformed can be sent. Serialization lives in ``tinker_lite._codec.wire``, not here.

The package imports only the standard library, attrs, numpy and ``tinker_lite._errors``; numpy
only when a numpy value or array is at hand (values built from lists are kept in stdlib arrays).
torch is never imported unless the caller already has it (``TensorData.from_torch`` /
``to_torch``).

One module per module of the official package (``tinker_lite.types.tensor_data`` is
``tinker.types.tensor_data``); every public name is re-exported here, and its module is
imported on first use (PEP 562), so ``import tinker_lite.types`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._common import ImageFormat as ImageFormat
    from ._common import check_tinker_path as check_tinker_path
    from .audit_log_entry import AuditLogEntry as AuditLogEntry
    from .audit_log_response import AuditLogResponse as AuditLogResponse
    from .auth_token_response import AuthTokenResponse as AuthTokenResponse
    from .billing_usage_request import GetBillingUsageRequest as GetBillingUsageRequest
    from .billing_usage_response import BillingEventInfo as BillingEventInfo
    from .billing_usage_response import BillingUsageEvent as BillingUsageEvent
    from .billing_usage_response import BillingUsageResponse as BillingUsageResponse
    from .billing_usage_response import BillingUsageSession as BillingUsageSession
    from .billing_usage_response import CheckpointBillingEvent as CheckpointBillingEvent
    from .billing_usage_response import SamplingPrefillBillingEvent as SamplingPrefillBillingEvent
    from .billing_usage_response import SamplingSampleBillingEvent as SamplingSampleBillingEvent
    from .billing_usage_response import StorageBillingEvent as StorageBillingEvent
    from .billing_usage_response import TrainingBillingEvent as TrainingBillingEvent
    from .checkpoint import Checkpoint as Checkpoint
    from .checkpoint import CheckpointType as CheckpointType
    from .checkpoint import ParsedCheckpointTinkerPath as ParsedCheckpointTinkerPath
    from .checkpoint_archive_url_response import (
        CheckpointArchiveUrlResponse as CheckpointArchiveUrlResponse,
    )
    from .checkpoints_list_response import CheckpointsListResponse as CheckpointsListResponse
    from .client_config_request import ClientConfigRequest as ClientConfigRequest
    from .client_config_response import ClientConfigResponse as ClientConfigResponse
    from .client_dynamic_config_response import (
        ClientDynamicConfigResponse as ClientDynamicConfigResponse,
    )
    from .client_dynamic_config_response import DynamicConfigResponse as DynamicConfigResponse
    from .copy_weights_request import CopyWeightsRequest as CopyWeightsRequest
    from .copy_weights_response import CopyWeightsResponse as CopyWeightsResponse
    from .create_custom_loss_request import CreateCustomLossRequest as CreateCustomLossRequest
    from .create_custom_loss_response import CreateCustomLossResponse as CreateCustomLossResponse
    from .create_model_request import CreateModelRequest as CreateModelRequest
    from .create_model_response import CreateModelResponse as CreateModelResponse
    from .create_sampling_session_request import (
        CreateSamplingSessionRequest as CreateSamplingSessionRequest,
    )
    from .create_sampling_session_response import (
        CreateSamplingSessionResponse as CreateSamplingSessionResponse,
    )
    from .create_session_request import CreateSessionRequest as CreateSessionRequest
    from .create_session_response import CreateSessionResponse as CreateSessionResponse
    from .current_checkpoint_storage_usage_request import (
        GetCurrentCheckpointStorageUsageRequest as GetCurrentCheckpointStorageUsageRequest,
    )
    from .current_checkpoint_storage_usage_response import (
        CurrentCheckpointStorageUsageItem as CurrentCheckpointStorageUsageItem,
    )
    from .current_checkpoint_storage_usage_response import (
        CurrentCheckpointStorageUsageResponse as CurrentCheckpointStorageUsageResponse,
    )
    from .cursor import Cursor as Cursor
    from .custom_loss_graph import CustomLossGraph as CustomLossGraph
    from .custom_loss_graph import CustomLossNode as CustomLossNode
    from .custom_loss_input import CustomLossInput as CustomLossInput
    from .custom_loss_input import CustomLossInputRank as CustomLossInputRank
    from .datum import Datum as Datum
    from .dmel_chunk import DmelChunk as DmelChunk
    from .encoded_text_chunk import EncodedTextChunk as EncodedTextChunk
    from .event_type import EventType as EventType
    from .external_weights_urls_response import (
        ExternalWeightsUrlsResponse as ExternalWeightsUrlsResponse,
    )
    from .forward_backward_input import ForwardBackwardInput as ForwardBackwardInput
    from .forward_backward_output import ForwardBackwardOutput as ForwardBackwardOutput
    from .forward_backward_request import ForwardBackwardRequest as ForwardBackwardRequest
    from .forward_request import ForwardRequest as ForwardRequest
    from .future_completion import FutureCompletion as FutureCompletion
    from .future_completion import FutureFailed as FutureFailed
    from .future_completion import FutureFinished as FutureFinished
    from .future_retrieve_request import FutureRetrieveRequest as FutureRetrieveRequest
    from .future_retrieve_response import FutureMetadataResponse as FutureMetadataResponse
    from .futures_retrieve_request import FuturesRetrieveRequest as FuturesRetrieveRequest
    from .futures_retrieve_request import (
        SamplingSessionFuturesTarget as SamplingSessionFuturesTarget,
    )
    from .futures_retrieve_response import FuturesRetrieveResponse as FuturesRetrieveResponse
    from .generic_event import GenericEvent as GenericEvent
    from .get_info_request import GetInfoRequest as GetInfoRequest
    from .get_info_response import GetInfoResponse as GetInfoResponse
    from .get_info_response import ModelData as ModelData
    from .get_sampler_response import GetSamplerResponse as GetSamplerResponse
    from .get_server_capabilities_response import (
        GetServerCapabilitiesResponse as GetServerCapabilitiesResponse,
    )
    from .get_server_capabilities_response import SupportedModel as SupportedModel
    from .get_session_response import GetSessionResponse as GetSessionResponse
    from .health_response import HealthResponse as HealthResponse
    from .image_asset_pointer_chunk import ImageAssetPointerChunk as ImageAssetPointerChunk
    from .image_chunk import ImageChunk as ImageChunk
    from .join_sampling_session_request import (
        JoinSamplingSessionRequest as JoinSamplingSessionRequest,
    )
    from .join_sampling_session_response import (
        JoinSamplingSessionResponse as JoinSamplingSessionResponse,
    )
    from .list_sessions_response import ListSessionsResponse as ListSessionsResponse
    from .load_weights_request import LoadWeightsRequest as LoadWeightsRequest
    from .load_weights_response import LoadWeightsResponse as LoadWeightsResponse
    from .lora_config import LoraConfig as LoraConfig
    from .loss_fn_inputs import _PER_TOKEN_KEYS as _PER_TOKEN_KEYS
    from .loss_fn_inputs import LOSS_FN_INPUT_DTYPES as LOSS_FN_INPUT_DTYPES
    from .loss_fn_inputs import LossFnInputs as LossFnInputs
    from .loss_fn_output import LossFnOutput as LossFnOutput
    from .loss_fn_type import ALLOW_UNKNOWN_LOSS_ENV as ALLOW_UNKNOWN_LOSS_ENV
    from .loss_fn_type import KNOWN_LOSS_FNS as KNOWN_LOSS_FNS
    from .loss_fn_type import LossFnType as LossFnType
    from .loss_fn_type import check_loss_fn as check_loss_fn
    from .model_id import ModelID as ModelID
    from .model_input import ModelInput as ModelInput
    from .model_input_chunk import ModelInputChunk as ModelInputChunk
    from .optim_step_request import OptimStepRequest as OptimStepRequest
    from .optim_step_response import OptimStepResponse as OptimStepResponse
    from .optimizer import AdamOptimizerConfig as AdamOptimizerConfig
    from .optimizer import AdamParams as AdamParams
    from .optimizer import DimuonOptimizerConfig as DimuonOptimizerConfig
    from .optimizer import DimuonParams as DimuonParams
    from .optimizer import OptimizerConfig as OptimizerConfig
    from .optimizer import OptimParams as OptimParams
    from .prompt_alt_tokens import PromptAltTokens as PromptAltTokens
    from .provenance_spans import PromptProvenanceSpan as PromptProvenanceSpan
    from .provenance_spans import ProvenanceSpans as ProvenanceSpans
    from .provenance_spans import SampledProvenanceSpan as SampledProvenanceSpan
    from .request_error_category import RequestErrorCategory as RequestErrorCategory
    from .request_failed_response import RequestFailedResponse as RequestFailedResponse
    from .request_id import RequestID as RequestID
    from .sample_request import SampleRequest as SampleRequest
    from .sample_response import SampleResponse as SampleResponse
    from .sampled_sequence import SampledSequence as SampledSequence
    from .sampling_client_kind import SamplingClientKind as SamplingClientKind
    from .sampling_params import SamplingParams as SamplingParams
    from .save_weights_external_request import (
        SaveWeightsExternalRequest as SaveWeightsExternalRequest,
    )
    from .save_weights_external_response import (
        SaveWeightsExternalResponse as SaveWeightsExternalResponse,
    )
    from .save_weights_external_response import (
        SaveWeightsExternalResponseInternal as SaveWeightsExternalResponseInternal,
    )
    from .save_weights_for_sampler_request import (
        SaveWeightsForSamplerRequest as SaveWeightsForSamplerRequest,
    )
    from .save_weights_for_sampler_response import (
        SaveWeightsForSamplerResponse as SaveWeightsForSamplerResponse,
    )
    from .save_weights_for_sampler_response import (
        SaveWeightsForSamplerResponseInternal as SaveWeightsForSamplerResponseInternal,
    )
    from .save_weights_request import SaveWeightsRequest as SaveWeightsRequest
    from .save_weights_response import SaveWeightsResponse as SaveWeightsResponse
    from .search_owner import AccessibleSearchOwner as AccessibleSearchOwner
    from .search_owner import OwnSearchOwner as OwnSearchOwner
    from .search_owner import SearchOwner as SearchOwner
    from .search_owner import UserSearchOwner as UserSearchOwner
    from .session_end_event import SessionEndEvent as SessionEndEvent
    from .session_finish_request import SessionFinishReason as SessionFinishReason
    from .session_finish_request import SessionFinishRequest as SessionFinishRequest
    from .session_heartbeat_request import SessionHeartbeatRequest as SessionHeartbeatRequest
    from .session_heartbeat_response import SessionHeartbeatResponse as SessionHeartbeatResponse
    from .session_search_cursor import SessionSearchCursor as SessionSearchCursor
    from .session_search_request import SessionSearchRequest as SessionSearchRequest
    from .session_search_response import SessionSearchResponse as SessionSearchResponse
    from .session_start_event import SessionStartEvent as SessionStartEvent
    from .session_status import ClientSessionFinished as ClientSessionFinished
    from .session_status import ClientSessionFinishErrored as ClientSessionFinishErrored
    from .session_status import ClientSessionFinishInterrupted as ClientSessionFinishInterrupted
    from .session_status import ClientSessionFinishReason as ClientSessionFinishReason
    from .session_status import ClientSessionFinishSuccess as ClientSessionFinishSuccess
    from .session_status import SessionActive as SessionActive
    from .session_status import SessionCancelled as SessionCancelled
    from .session_status import SessionFailed as SessionFailed
    from .session_status import SessionFailedReason as SessionFailedReason
    from .session_status import SessionFailedRequestReason as SessionFailedRequestReason
    from .session_status import (
        SessionFailedSamplingSessionReason as SessionFailedSamplingSessionReason,
    )
    from .session_status import SessionFailedTrainingRunReason as SessionFailedTrainingRunReason
    from .session_status import SessionStatus as SessionStatus
    from .session_status_query import ActiveSessionStatusQuery as ActiveSessionStatusQuery
    from .session_status_query import CancelledSessionStatusQuery as CancelledSessionStatusQuery
    from .session_status_query import (
        ClientFinishedSessionStatusQuery as ClientFinishedSessionStatusQuery,
    )
    from .session_status_query import ClientSessionFinishReasonType as ClientSessionFinishReasonType
    from .session_status_query import FailedSessionStatusQuery as FailedSessionStatusQuery
    from .session_status_query import SessionStatusQuery as SessionStatusQuery
    from .session_summary import SessionSummary as SessionSummary
    from .set_checkpoint_ttl_request import SetCheckpointTTLRequest as SetCheckpointTTLRequest
    from .severity import Severity as Severity
    from .shared.untyped_api_future import UntypedAPIFuture as UntypedAPIFuture
    from .stop_reason import StopReason as StopReason
    from .telemetry_batch import TelemetryBatch as TelemetryBatch
    from .telemetry_event import TelemetryEvent as TelemetryEvent
    from .telemetry_response import TelemetryResponse as TelemetryResponse
    from .telemetry_send_request import TelemetrySendRequest as TelemetrySendRequest
    from .tensor_data import TensorData as TensorData
    from .tensor_data import _csr_to_dense as _csr_to_dense
    from .tensor_dtype import TensorDtype as TensorDtype
    from .training_run import TrainingRun as TrainingRun
    from .training_runs_response import TrainingRunsResponse as TrainingRunsResponse
    from .try_again_response import QueueState as QueueState
    from .try_again_response import TryAgainResponse as TryAgainResponse
    from .unhandled_exception_event import UnhandledExceptionEvent as UnhandledExceptionEvent
    from .unload_model_request import UnloadModelRequest as UnloadModelRequest
    from .unload_model_response import UnloadModelResponse as UnloadModelResponse
    from .weights_info_request import WeightsInfoRequest as WeightsInfoRequest
    from .weights_info_response import WeightsInfoResponse as WeightsInfoResponse
    from .whoami_response import WhoamiResponse as WhoamiResponse

# Public (and a few internal) names -> the module that defines them.
_MODULE_OF: dict[str, str] = {
    "ALLOW_UNKNOWN_LOSS_ENV": "loss_fn_type",
    "AccessibleSearchOwner": "search_owner",
    "ActiveSessionStatusQuery": "session_status_query",
    "AdamOptimizerConfig": "optimizer",
    "AdamParams": "optimizer",
    "AuditLogEntry": "audit_log_entry",
    "AuditLogResponse": "audit_log_response",
    "AuthTokenResponse": "auth_token_response",
    "BillingEventInfo": "billing_usage_response",
    "BillingUsageEvent": "billing_usage_response",
    "BillingUsageResponse": "billing_usage_response",
    "BillingUsageSession": "billing_usage_response",
    "CancelledSessionStatusQuery": "session_status_query",
    "Checkpoint": "checkpoint",
    "CheckpointArchiveUrlResponse": "checkpoint_archive_url_response",
    "CheckpointBillingEvent": "billing_usage_response",
    "CheckpointType": "checkpoint",
    "CheckpointsListResponse": "checkpoints_list_response",
    "ClientConfigRequest": "client_config_request",
    "ClientConfigResponse": "client_config_response",
    "ClientDynamicConfigResponse": "client_dynamic_config_response",
    "ClientFinishedSessionStatusQuery": "session_status_query",
    "ClientSessionFinishErrored": "session_status",
    "ClientSessionFinishInterrupted": "session_status",
    "ClientSessionFinishReason": "session_status",
    "ClientSessionFinishReasonType": "session_status_query",
    "ClientSessionFinishSuccess": "session_status",
    "ClientSessionFinished": "session_status",
    "CopyWeightsRequest": "copy_weights_request",
    "CopyWeightsResponse": "copy_weights_response",
    "CreateCustomLossRequest": "create_custom_loss_request",
    "CreateCustomLossResponse": "create_custom_loss_response",
    "CreateModelRequest": "create_model_request",
    "CreateModelResponse": "create_model_response",
    "CreateSamplingSessionRequest": "create_sampling_session_request",
    "CreateSamplingSessionResponse": "create_sampling_session_response",
    "CreateSessionRequest": "create_session_request",
    "CreateSessionResponse": "create_session_response",
    "CurrentCheckpointStorageUsageItem": "current_checkpoint_storage_usage_response",
    "CurrentCheckpointStorageUsageResponse": "current_checkpoint_storage_usage_response",
    "Cursor": "cursor",
    "CustomLossGraph": "custom_loss_graph",
    "CustomLossInput": "custom_loss_input",
    "CustomLossInputRank": "custom_loss_input",
    "CustomLossNode": "custom_loss_graph",
    "Datum": "datum",
    "DimuonOptimizerConfig": "optimizer",
    "DimuonParams": "optimizer",
    "DmelChunk": "dmel_chunk",
    "DynamicConfigResponse": "client_dynamic_config_response",
    "EncodedTextChunk": "encoded_text_chunk",
    "EventType": "event_type",
    "ExternalWeightsUrlsResponse": "external_weights_urls_response",
    "FailedSessionStatusQuery": "session_status_query",
    "ForwardBackwardInput": "forward_backward_input",
    "ForwardBackwardOutput": "forward_backward_output",
    "ForwardBackwardRequest": "forward_backward_request",
    "ForwardRequest": "forward_request",
    "FutureCompletion": "future_completion",
    "FutureFailed": "future_completion",
    "FutureFinished": "future_completion",
    "FutureMetadataResponse": "future_retrieve_response",
    "FutureRetrieveRequest": "future_retrieve_request",
    "FuturesRetrieveRequest": "futures_retrieve_request",
    "FuturesRetrieveResponse": "futures_retrieve_response",
    "GenericEvent": "generic_event",
    "GetBillingUsageRequest": "billing_usage_request",
    "GetCurrentCheckpointStorageUsageRequest": "current_checkpoint_storage_usage_request",
    "GetInfoRequest": "get_info_request",
    "GetInfoResponse": "get_info_response",
    "GetSamplerResponse": "get_sampler_response",
    "GetServerCapabilitiesResponse": "get_server_capabilities_response",
    "GetSessionResponse": "get_session_response",
    "HealthResponse": "health_response",
    "ImageAssetPointerChunk": "image_asset_pointer_chunk",
    "ImageChunk": "image_chunk",
    "ImageFormat": "_common",
    "JoinSamplingSessionRequest": "join_sampling_session_request",
    "JoinSamplingSessionResponse": "join_sampling_session_response",
    "KNOWN_LOSS_FNS": "loss_fn_type",
    "LOSS_FN_INPUT_DTYPES": "loss_fn_inputs",
    "ListSessionsResponse": "list_sessions_response",
    "LoadWeightsRequest": "load_weights_request",
    "LoadWeightsResponse": "load_weights_response",
    "LoraConfig": "lora_config",
    "LossFnInputs": "loss_fn_inputs",
    "LossFnOutput": "loss_fn_output",
    "LossFnType": "loss_fn_type",
    "ModelData": "get_info_response",
    "ModelID": "model_id",
    "ModelInput": "model_input",
    "ModelInputChunk": "model_input_chunk",
    "OptimParams": "optimizer",
    "OptimStepRequest": "optim_step_request",
    "OptimStepResponse": "optim_step_response",
    "OptimizerConfig": "optimizer",
    "OwnSearchOwner": "search_owner",
    "ParsedCheckpointTinkerPath": "checkpoint",
    "PromptAltTokens": "prompt_alt_tokens",
    "PromptProvenanceSpan": "provenance_spans",
    "ProvenanceSpans": "provenance_spans",
    "QueueState": "try_again_response",
    "RequestErrorCategory": "request_error_category",
    "RequestFailedResponse": "request_failed_response",
    "RequestID": "request_id",
    "SampleRequest": "sample_request",
    "SampleResponse": "sample_response",
    "SampledProvenanceSpan": "provenance_spans",
    "SampledSequence": "sampled_sequence",
    "SamplingClientKind": "sampling_client_kind",
    "SamplingParams": "sampling_params",
    "SamplingPrefillBillingEvent": "billing_usage_response",
    "SamplingSampleBillingEvent": "billing_usage_response",
    "SamplingSessionFuturesTarget": "futures_retrieve_request",
    "SaveWeightsExternalRequest": "save_weights_external_request",
    "SaveWeightsExternalResponse": "save_weights_external_response",
    "SaveWeightsExternalResponseInternal": "save_weights_external_response",
    "SaveWeightsForSamplerRequest": "save_weights_for_sampler_request",
    "SaveWeightsForSamplerResponse": "save_weights_for_sampler_response",
    "SaveWeightsForSamplerResponseInternal": "save_weights_for_sampler_response",
    "SaveWeightsRequest": "save_weights_request",
    "SaveWeightsResponse": "save_weights_response",
    "SearchOwner": "search_owner",
    "SessionActive": "session_status",
    "SessionCancelled": "session_status",
    "SessionEndEvent": "session_end_event",
    "SessionFailed": "session_status",
    "SessionFailedReason": "session_status",
    "SessionFailedRequestReason": "session_status",
    "SessionFailedSamplingSessionReason": "session_status",
    "SessionFailedTrainingRunReason": "session_status",
    "SessionFinishReason": "session_finish_request",
    "SessionFinishRequest": "session_finish_request",
    "SessionHeartbeatRequest": "session_heartbeat_request",
    "SessionHeartbeatResponse": "session_heartbeat_response",
    "SessionSearchCursor": "session_search_cursor",
    "SessionSearchRequest": "session_search_request",
    "SessionSearchResponse": "session_search_response",
    "SessionStartEvent": "session_start_event",
    "SessionStatus": "session_status",
    "SessionStatusQuery": "session_status_query",
    "SessionSummary": "session_summary",
    "SetCheckpointTTLRequest": "set_checkpoint_ttl_request",
    "Severity": "severity",
    "StopReason": "stop_reason",
    "StorageBillingEvent": "billing_usage_response",
    "SupportedModel": "get_server_capabilities_response",
    "TelemetryBatch": "telemetry_batch",
    "TelemetryEvent": "telemetry_event",
    "TelemetryResponse": "telemetry_response",
    "TelemetrySendRequest": "telemetry_send_request",
    "TensorData": "tensor_data",
    "TensorDtype": "tensor_dtype",
    "TrainingBillingEvent": "billing_usage_response",
    "TrainingRun": "training_run",
    "TrainingRunsResponse": "training_runs_response",
    "TryAgainResponse": "try_again_response",
    "UnhandledExceptionEvent": "unhandled_exception_event",
    "UnloadModelRequest": "unload_model_request",
    "UnloadModelResponse": "unload_model_response",
    "UntypedAPIFuture": "shared.untyped_api_future",
    "UserSearchOwner": "search_owner",
    "WeightsInfoRequest": "weights_info_request",
    "WeightsInfoResponse": "weights_info_response",
    "WhoamiResponse": "whoami_response",
    "_PER_TOKEN_KEYS": "loss_fn_inputs",
    "_csr_to_dense": "tensor_data",
    "check_loss_fn": "loss_fn_type",
    "check_tinker_path": "_common",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = [
    "KNOWN_LOSS_FNS",
    "LOSS_FN_INPUT_DTYPES",
    "AccessibleSearchOwner",
    "ActiveSessionStatusQuery",
    "AdamOptimizerConfig",
    "AdamParams",
    "AuditLogEntry",
    "AuditLogResponse",
    "AuthTokenResponse",
    "BillingEventInfo",
    "BillingUsageEvent",
    "BillingUsageResponse",
    "BillingUsageSession",
    "CancelledSessionStatusQuery",
    "Checkpoint",
    "CheckpointArchiveUrlResponse",
    "CheckpointBillingEvent",
    "CheckpointType",
    "CheckpointsListResponse",
    "ClientConfigRequest",
    "ClientConfigResponse",
    "ClientDynamicConfigResponse",
    "ClientFinishedSessionStatusQuery",
    "ClientSessionFinishErrored",
    "ClientSessionFinishInterrupted",
    "ClientSessionFinishReason",
    "ClientSessionFinishReasonType",
    "ClientSessionFinishSuccess",
    "ClientSessionFinished",
    "CopyWeightsRequest",
    "CopyWeightsResponse",
    "CreateCustomLossRequest",
    "CreateCustomLossResponse",
    "CreateModelRequest",
    "CreateModelResponse",
    "CreateSamplingSessionRequest",
    "CreateSamplingSessionResponse",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "CurrentCheckpointStorageUsageItem",
    "CurrentCheckpointStorageUsageResponse",
    "Cursor",
    "CustomLossGraph",
    "CustomLossInput",
    "CustomLossInputRank",
    "CustomLossNode",
    "Datum",
    "DimuonOptimizerConfig",
    "DimuonParams",
    "DmelChunk",
    "DynamicConfigResponse",
    "EncodedTextChunk",
    "EventType",
    "ExternalWeightsUrlsResponse",
    "FailedSessionStatusQuery",
    "ForwardBackwardInput",
    "ForwardBackwardOutput",
    "ForwardBackwardRequest",
    "ForwardRequest",
    "FutureCompletion",
    "FutureFailed",
    "FutureFinished",
    "FutureMetadataResponse",
    "FutureRetrieveRequest",
    "FuturesRetrieveRequest",
    "FuturesRetrieveResponse",
    "GenericEvent",
    "GetBillingUsageRequest",
    "GetCurrentCheckpointStorageUsageRequest",
    "GetInfoRequest",
    "GetInfoResponse",
    "GetSamplerResponse",
    "GetServerCapabilitiesResponse",
    "GetSessionResponse",
    "HealthResponse",
    "ImageAssetPointerChunk",
    "ImageChunk",
    "JoinSamplingSessionRequest",
    "JoinSamplingSessionResponse",
    "ListSessionsResponse",
    "LoadWeightsRequest",
    "LoadWeightsResponse",
    "LoraConfig",
    "LossFnInputs",
    "LossFnOutput",
    "LossFnType",
    "ModelData",
    "ModelID",
    "ModelInput",
    "ModelInputChunk",
    "OptimParams",
    "OptimStepRequest",
    "OptimStepResponse",
    "OptimizerConfig",
    "OwnSearchOwner",
    "ParsedCheckpointTinkerPath",
    "PromptAltTokens",
    "PromptProvenanceSpan",
    "ProvenanceSpans",
    "QueueState",
    "RequestErrorCategory",
    "RequestFailedResponse",
    "RequestID",
    "SampleRequest",
    "SampleResponse",
    "SampledProvenanceSpan",
    "SampledSequence",
    "SamplingClientKind",
    "SamplingParams",
    "SamplingPrefillBillingEvent",
    "SamplingSampleBillingEvent",
    "SamplingSessionFuturesTarget",
    "SaveWeightsExternalRequest",
    "SaveWeightsExternalResponse",
    "SaveWeightsExternalResponseInternal",
    "SaveWeightsForSamplerRequest",
    "SaveWeightsForSamplerResponse",
    "SaveWeightsForSamplerResponseInternal",
    "SaveWeightsRequest",
    "SaveWeightsResponse",
    "SearchOwner",
    "SessionActive",
    "SessionCancelled",
    "SessionEndEvent",
    "SessionFailed",
    "SessionFailedReason",
    "SessionFailedRequestReason",
    "SessionFailedSamplingSessionReason",
    "SessionFailedTrainingRunReason",
    "SessionFinishReason",
    "SessionFinishRequest",
    "SessionHeartbeatRequest",
    "SessionHeartbeatResponse",
    "SessionSearchCursor",
    "SessionSearchRequest",
    "SessionSearchResponse",
    "SessionStartEvent",
    "SessionStatus",
    "SessionStatusQuery",
    "SessionSummary",
    "SetCheckpointTTLRequest",
    "Severity",
    "StopReason",
    "StorageBillingEvent",
    "SupportedModel",
    "TelemetryBatch",
    "TelemetryEvent",
    "TelemetryResponse",
    "TelemetrySendRequest",
    "TensorData",
    "TensorDtype",
    "TrainingBillingEvent",
    "TrainingRun",
    "TrainingRunsResponse",
    "TryAgainResponse",
    "UnhandledExceptionEvent",
    "UnloadModelRequest",
    "UnloadModelResponse",
    "UntypedAPIFuture",
    "UserSearchOwner",
    "WeightsInfoRequest",
    "WeightsInfoResponse",
    "WhoamiResponse",
    "check_loss_fn",
    "check_tinker_path",
]
