# mypy: disable-error-code="empty-body"
"""The official ``*_async`` twins, declared for type checkers (``mypy --strict``, pyright).

:func:`~tinker_lite._async.with_async_twins` sets the twins on each client class when it is
made, so a type checker cannot see them. Each client class inherits its declarations here only
under ``TYPE_CHECKING``: at run time its bases are unchanged and ``import tinker_lite`` never
imports this module. A twin takes its sync method's parameters (same names, kinds, defaults and
annotations; a test keeps them equal) and gives what the runtime twin gives: the sync call's
result (a future's result, a created client), or for the training twins of shape ``"future"``
(see :data:`~tinker_lite._async.OFFICIAL_ASYNC_TWINS`) the call's :class:`~tinker_lite.APIFuture`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import date, datetime
    from typing import Literal

    from tinker_lite import types
    from tinker_lite._custom_loss import CustomLossFn
    from tinker_lite._futures.future import APIFuture
    from tinker_lite._loss_handle import LossHandle
    from tinker_lite.admin_client import AuditEventType
    from tinker_lite.sampling_client import SamplingClient
    from tinker_lite.training_client import TrainingClient

__all__ = [
    "AdminClientTwins",
    "RestClientTwins",
    "SamplingClientTwins",
    "ServiceClientTwins",
    "TrainingClientTwins",
]


class ServiceClientTwins:
    """The declarations of :class:`~tinker_lite.ServiceClient`'s twins (they give the client)."""

    async def create_lora_training_client_async(  # noqa: PLR0917 - the sync signature
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: Mapping[str, str] | None = None,
        optimizer: types.OptimizerConfig | None = None,
    ) -> TrainingClient: ...

    async def create_sampling_client_async(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: object | None = None,
        record_stability_info: bool = False,
    ) -> SamplingClient: ...

    async def create_training_client_from_state_async(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: Mapping[str, str] | None = None,
        weights_access_token: str | None = None,
        optimizer: types.OptimizerConfig | None = None,
    ) -> TrainingClient: ...

    async def create_training_client_from_state_with_optimizer_async(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: Mapping[str, str] | None = None,
        weights_access_token: str | None = None,
    ) -> TrainingClient: ...

    async def get_server_capabilities_async(self) -> types.GetServerCapabilitiesResponse: ...


class TrainingClientTwins:
    """The declarations of :class:`~tinker_lite.TrainingClient`'s twins: the training calls give
    their future (``fut = await tc.forward_async(...)``), the others their result."""

    async def create_sampling_client_async(
        self,
        model_path: str,
        retry_config: object | None = None,
        record_stability_info: bool = False,
    ) -> SamplingClient: ...

    async def get_info_async(self) -> types.GetInfoResponse: ...

    async def save_weights_and_get_sampling_client_async(
        self,
        name: str | None = None,
        retry_config: object | None = None,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> SamplingClient: ...

    async def forward_async(
        self,
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]: ...

    async def forward_backward_async(
        self,
        data: Sequence[types.Datum],
        loss_fn: str | types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]: ...

    async def forward_backward_custom_async(
        self,
        data: Sequence[types.Datum],
        loss_fn: CustomLossFn | LossHandle,
        *,
        loss_type_input: Literal["logprobs"] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]: ...

    async def load_state_async(
        self, path: str, weights_access_token: str | None = None
    ) -> APIFuture[types.LoadWeightsResponse]: ...

    async def load_state_with_optimizer_async(
        self, path: str, weights_access_token: str | None = None
    ) -> APIFuture[types.LoadWeightsResponse]: ...

    async def optim_step_async(
        self,
        optim_params: types.OptimParams | None = None,
        *,
        adam_params: types.AdamParams | None = None,
    ) -> APIFuture[types.OptimStepResponse]: ...

    async def save_state_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> APIFuture[types.SaveWeightsResponse]: ...

    async def save_weights_external_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        age_encryption_recipients: list[str] | None = None,
    ) -> APIFuture[types.SaveWeightsExternalResponse]: ...

    async def save_weights_for_sampler_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        user_metadata: dict[str, str] | None = None,
    ) -> APIFuture[types.SaveWeightsForSamplerResponse]: ...


class SamplingClientTwins:
    """The declarations of :class:`~tinker_lite.SamplingClient`'s twins (they give the result)."""

    async def compute_logprobs_async(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> list[float | None]: ...

    async def get_base_model_async(self) -> str: ...

    async def sample_async(  # noqa: PLR0917 - the sync signature
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> types.SampleResponse: ...


class AdminClientTwins:
    """The declarations of :class:`~tinker_lite.AdminClient`'s twins (they give the result)."""

    async def get_audit_log_async(
        self, event_type: AuditEventType = "all", day: date | None = None
    ) -> types.AuditLogResponse: ...

    async def get_billing_usage_async(
        self, starting_on: datetime | str, ending_before: datetime | str
    ) -> types.BillingUsageResponse: ...

    async def get_current_checkpoint_storage_usage_async(
        self, project_id: str | None = None
    ) -> types.CurrentCheckpointStorageUsageResponse: ...


class RestClientTwins(AdminClientTwins):
    """The declarations of :class:`~tinker_lite.RestClient`'s twins (they give the result; the
    admin ones, deprecated there as officially, are :class:`AdminClient`'s)."""

    async def assign_session_project_async(self, session_id: str, project_id: str) -> None: ...

    async def copy_weights_async(
        self,
        path: str,
        destination_project_id: str | None = None,
        *,
        ttl_seconds: int | None = None,
        weights_access_token: str | None = None,
    ) -> str: ...

    async def delete_checkpoint_async(self, training_run_id: str, checkpoint_id: str) -> None: ...

    async def delete_checkpoint_from_tinker_path_async(self, tinker_path: str) -> None: ...

    async def export_session_trace_async(self, session_id: str) -> str: ...

    async def get_external_weights_urls_async(
        self, tinker_path: str
    ) -> types.ExternalWeightsUrlsResponse: ...

    async def get_sampler_async(self, sampler_id: str) -> types.GetSamplerResponse: ...

    async def get_session_async(
        self, session_id: str, access_scope: str | None = "owned"
    ) -> types.GetSessionResponse: ...

    async def get_training_run_async(
        self, training_run_id: str, access_scope: str | None = "owned"
    ) -> types.TrainingRun: ...

    async def get_training_run_by_tinker_path_async(
        self, tinker_path: str, access_scope: str | None = "owned"
    ) -> types.TrainingRun: ...

    async def list_checkpoints_async(
        self, training_run_id: str
    ) -> types.CheckpointsListResponse: ...

    async def list_sessions_async(
        self, limit: int = 20, offset: int = 0, access_scope: str | None = "owned"
    ) -> types.ListSessionsResponse: ...

    async def list_training_runs_async(
        self,
        limit: int = 20,
        offset: int = 0,
        access_scope: str | None = "owned",
        project_id: str | None = None,
    ) -> types.TrainingRunsResponse: ...

    async def list_user_checkpoints_async(
        self, limit: int = 100, offset: int = 0
    ) -> types.CheckpointsListResponse: ...

    async def publish_checkpoint_from_tinker_path_async(self, tinker_path: str) -> None: ...

    async def set_checkpoint_ttl_from_tinker_path_async(
        self, tinker_path: str, ttl_seconds: int | None
    ) -> None: ...

    async def unpublish_checkpoint_from_tinker_path_async(self, tinker_path: str) -> None: ...
