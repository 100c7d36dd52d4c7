"""``ClientConfigResponse`` (official module ``tinker.types.client_config_response``)."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class ClientConfigResponse:
    """Server feature flags from POST /api/v1/client/config (docs/protocol.rst §8.2); unknown flags
    ignored.

    ``ClientConfigResponse()`` holds the defaults used when the service has no client config.
    ``sample_max_concurrent_requests`` defaults to tinker_lite's own cap (docs/protocol.rst §6.4).
    """

    pjwt_auth_enabled: bool = False
    credential_default_source: str = "api_key"
    sample_dispatch_bytes_semaphore_size: int = 10 * 1024 * 1024
    inflight_response_bytes_semaphore_size: int = 50 * 1024 * 1024
    parallel_fwdbwd_chunks: bool = True
    proto_write_fwdbwd: bool = False
    proto_compress_fwdbwd: bool = False
    fwd_via_fwdbwd: bool = False
    billing_exception_max_pause_duration_sec: float = 3600.0
    sample_no_retries: bool = False
    sample_enable_stuck_detection: bool = True
    sample_max_concurrent_requests: int = 400
    use_pyqwest_transport: bool = True
    create_model_via_load_weights: bool = False
    sample_use_retrieve_futures: bool = False
    sample_join_sampling_session: bool = False
    fwdbwd_max_chunk_len: int = 1024
    fwdbwd_max_chunk_bytes_count: int = 5_000_000
    fwdbwd_dispatch_bytes_semaphore_size: int = 50_000_000
    custom_loss_server_side: bool = False
