"""The requestor's model and training operations: create, load, inspect, encode, submit.

:class:`TrainingRequests` is part of the requestor (``requestor.training``): it names each
endpoint, encodes forward/forward_backward chunks (protobuf or JSON, zstd when the service asks,
docs/protocol.rst §1.1), optim steps and saves, and decodes their polled results; every request goes
through the requestor's one send.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._api.endpoints import API
from tinker_lite._chunking import DEFAULT_LIMITS, ChunkLimits
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.decoding import parse_model
from tinker_lite._futures.future import APIFuture
from tinker_lite._repr import tolerant_repr
from tinker_lite._transport.http import JSON, PROTOBUF, HttpResponse

if TYPE_CHECKING:
    from tinker_lite._api.requestor import Requestor

__all__ = [
    "TrainingRequest",
    "TrainingRequests",
    "decode_forward_backward",
    "json_result",
]

T = TypeVar("T")

logger = logging.getLogger("tinker_lite.api")

_zstd_warned = threading.Event()


def _warn_zstd_missing() -> None:
    """Say once per process that the service asks for zstd bodies and they go uncompressed."""
    if _zstd_warned.is_set():
        return
    _zstd_warned.set()
    logger.warning(
        "The service asks for zstd-compressed forward/forward_backward requests "
        "(proto_compress_fwdbwd), but the 'zstandard' package is not installed: they are sent "
        "uncompressed. Install it with: pip install 'tinker-lite[zstd]'"
    )


# ---------------------------------------------------------------------------------------------
# Decoding polled results


def json_result(cls: type[T]) -> Callable[[HttpResponse], T]:
    """A poll decoder reading a JSON result into ``cls``."""

    def decode(resp: HttpResponse) -> T:
        return _wire.structure(resp.json(), cls)

    return decode


def decode_forward_backward(resp: HttpResponse) -> types.ForwardBackwardOutput:
    """A forward/forward_backward result in whichever content type came back
    (docs/protocol.rst §3.5)."""
    if resp.is_protobuf:
        from tinker_lite._codec import proto as _proto

        return _proto.decode_forward_backward_output(resp.body)
    return _wire.structure(resp.json(), types.ForwardBackwardOutput)


# ---------------------------------------------------------------------------------------------
# Training requests


@attrs.frozen
class TrainingRequest:
    """One training request, encoded at call time, waiting for its turn to be submitted."""

    path: str
    body: bytes
    content_type: str
    request_type: str
    decode: Callable[[HttpResponse], Any]
    accept: str = JSON
    headers: Mapping[str, str] = attrs.field(factory=dict)
    tokens: int | None = None  # input tokens of a forward/forward_backward chunk (journal)


_TRAINING_PATHS: Mapping[type[Any], tuple[str, str]] = {
    types.OptimStepRequest: ("optim_step", "OptimStep"),
    types.SaveWeightsRequest: ("save_weights", "SaveWeights"),
    types.LoadWeightsRequest: ("load_weights", "LoadWeights"),
    types.SaveWeightsForSamplerRequest: ("save_weights_for_sampler", "SaveWeightsForSampler"),
}


class TrainingRequests:
    """The model and training operations of one requestor (``requestor.training``)."""

    def __init__(self, api: Requestor) -> None:
        self._api = api

    @tolerant_repr
    def __repr__(self) -> str:
        return f"TrainingRequests(base_url={self._api.base_url!r})"

    def _submitted(
        self,
        path: str,
        request: object,
        *,
        sdk_method: str,
        request_type: str,
        decode: Callable[[HttpResponse], T],
        created_at: float,
    ) -> APIFuture[T]:
        """Send a request the service answers with a future (HTTP retries only,
        docs/protocol.rst §6.5) and poll its result."""
        try:
            resp = self._api.call(
                "POST", path, body_obj=request, sdk_method=sdk_method, operation_retries=False
            )
            submitted = parse_model(resp, types.UntypedAPIFuture, what=path.rsplit("/", 1)[-1])
            session = self._api.session_holder()
        except Exception as e:
            return APIFuture.failed(e)
        return session.poller.poll(
            submitted.request_id,
            request_type,
            decode,
            created_at=created_at,
            sdk_method=sdk_method,
        )

    def create_model(
        self, request: types.CreateModelRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.CreateModelResponse]:
        """Send ``create_model`` (HTTP retries only, docs/protocol.rst §6.5) and poll its result."""
        return self._submitted(
            f"{API}/create_model",
            request,
            sdk_method=sdk_method,
            request_type="CreateModel",
            decode=json_result(types.CreateModelResponse),
            created_at=created_at,
        )

    def load_weights_creating_model(
        self, request: types.LoadWeightsRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.LoadWeightsResponse]:
        """Send a ``load_weights`` that creates its model (``session_id`` + ``model_seq_id``,
        golden-0.38) with HTTP retries only, like ``create_model``, and poll its result."""
        return self._submitted(
            f"{API}/load_weights",
            request,
            sdk_method=sdk_method,
            request_type="LoadWeights",
            decode=json_result(types.LoadWeightsResponse),
            created_at=created_at,
        )

    def create_custom_loss(
        self, request: types.CreateCustomLossRequest, *, sdk_method: str, created_at: float
    ) -> APIFuture[types.CreateCustomLossResponse]:
        """Upload a custom loss (HTTP retries only, like create_model) and poll its loss id."""
        return self._submitted(
            f"{API}/create_custom_loss",
            request,
            sdk_method=sdk_method,
            request_type="CreateCustomLoss",
            decode=json_result(types.CreateCustomLossResponse),
            created_at=created_at,
        )

    def weights_info(self, tinker_path: str, *, sdk_method: str) -> types.WeightsInfoResponse:
        """What a checkpoint holds (a 0.4.1-era service answers 404: NotFoundError)."""
        resp = self._api.call(
            "POST",
            f"{API}/weights_info",
            body_obj=types.WeightsInfoRequest(tinker_path=tinker_path),
            sdk_method=sdk_method,
        )
        return parse_model(resp, types.WeightsInfoResponse)

    def get_info(
        self, model_id: str, *, sdk_method: str, operation_retries: bool = True
    ) -> types.GetInfoResponse:
        """A model's base model, LoRA rank and tokenizer id."""
        resp = self._api.call(
            "POST",
            f"{API}/get_info",
            body_obj=types.GetInfoRequest(model_id=model_id),
            sdk_method=sdk_method,
            operation_retries=operation_retries,
        )
        return parse_model(resp, types.GetInfoResponse)

    # -- training ----------------------------------------------------------------------------

    def chunk_limits(self) -> ChunkLimits:
        """Forward/forward_backward chunk limits: the service's client config, else
        docs/protocol.rst §7.4."""
        session = self._api.session_holder()
        if session.client_config_from_server:
            config = session.client_config
            return ChunkLimits(
                max_datums=max(1, config.fwdbwd_max_chunk_len),
                max_numbers=None,
                max_bytes=max(1, config.fwdbwd_max_chunk_bytes_count),
            )
        return DEFAULT_LIMITS

    def encode_training(self, request: object, result_cls: type[Any]) -> TrainingRequest:
        """Encode an optim_step / save / load request for :meth:`submit_training`."""
        name, request_type = _TRAINING_PATHS[type(request)]
        return TrainingRequest(
            path=f"{API}/{name}",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=json_result(result_cls),
        )

    def encode_forward_backward(
        self,
        *,
        model_id: str,
        seq_id: int,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: dict[str, float | str] | None,
        forward_only: bool,
        wire: Literal["protobuf", "json"],
    ) -> TrainingRequest:
        """Encode one forward/forward_backward chunk in the connection's wire format."""
        request_type = "Forward" if forward_only else "ForwardBackward"
        tokens = sum(datum.model_input.length for datum in data)
        if wire == "protobuf":
            from tinker_lite._codec import proto as _proto

            # docs/protocol.rst §3.4: protobuf to /forward_backward; forward_only marks a forward.
            body = _proto.encode_forward_backward_request(
                model_id=model_id,
                seq_id=seq_id,
                data=data,
                loss_fn=loss_fn,
                loss_fn_config=loss_fn_config,
                forward_only=forward_only,
            )
            headers: dict[str, str] = {}
            if self._api.session_holder().client_config.proto_compress_fwdbwd:
                if _proto.zstd_available():
                    body = _proto.compress(body)
                    headers["Content-Encoding"] = "zstd"
                else:
                    _warn_zstd_missing()
            return TrainingRequest(
                path=f"{API}/forward_backward",
                body=body,
                content_type=PROTOBUF,
                request_type=request_type,
                decode=decode_forward_backward,
                accept=PROTOBUF,
                headers=headers,
                tokens=tokens,
            )
        fb_input = types.ForwardBackwardInput(
            data=data, loss_fn=loss_fn, loss_fn_config=loss_fn_config
        )
        request: object
        if forward_only:
            request = types.ForwardRequest(forward_input=fb_input, model_id=model_id, seq_id=seq_id)
        else:
            request = types.ForwardBackwardRequest(
                forward_backward_input=fb_input, model_id=model_id, seq_id=seq_id
            )
        return TrainingRequest(
            path=f"{API}/forward" if forward_only else f"{API}/forward_backward",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=request_type,
            decode=decode_forward_backward,
            tokens=tokens,
        )

    def encode_optim_step(
        self, model_id: str, seq_id: int, params: types.AdamParams | types.DimuonParams
    ) -> TrainingRequest:
        """Encode an optim_step: AdamW settings go as ``adam_params``, others (Dimuon) as
        ``optimizer_params`` with their ``type``, as 0.38 sends them."""
        if isinstance(params, types.AdamParams):
            request = types.OptimStepRequest(model_id=model_id, seq_id=seq_id, adam_params=params)
            return self.encode_training(request, types.OptimStepResponse)
        body = {
            "model_id": model_id,
            "seq_id": seq_id,
            "type": "optim_step",
            "optimizer_params": _wire.to_builtins(params),
        }
        return TrainingRequest(
            path=f"{API}/optim_step",
            body=_wire.dumps(body),
            content_type=JSON,
            request_type="OptimStep",
            decode=json_result(types.OptimStepResponse),
        )

    def encode_save_weights_external(
        self, request: types.SaveWeightsExternalRequest
    ) -> TrainingRequest:
        """Encode a save_weights_external (a training request, polled like save_weights)."""
        return TrainingRequest(
            path=f"{API}/save_weights_external",
            body=_wire.dumps(request),
            content_type=JSON,
            request_type="SaveWeightsExternal",
            decode=json_result(types.SaveWeightsExternalResponseInternal),
        )

    def submit_training(self, request: TrainingRequest, *, sdk_method: str) -> str:
        """Submit an encoded training request (HTTP and operation retries); its request id."""
        resp = self._api.call(
            "POST",
            request.path,
            body=request.body,
            content_type=request.content_type,
            headers=request.headers,
            sdk_method=sdk_method,
        )
        return parse_model(resp, types.UntypedAPIFuture, what=request.path).request_id

    # -- sampling --------------------------------------------------------------------------------
