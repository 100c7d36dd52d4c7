"""The requestor's model and training operations (docs/protocol.rst §4.3)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs

from tinker_lite import types
from tinker_lite._api.endpoints import FORWARD, FORWARD_BACKWARD, GET_INFO, OPTIM_STEP, Endpoint
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.chunking import DEFAULT_LIMITS, ChunkLimits
from tinker_lite._codec.decoding import parse_model
from tinker_lite._futures.future import APIFuture
from tinker_lite._transport.answers import JSON, PROTOBUF, HttpResponse

if TYPE_CHECKING:
    from tinker_lite._api.sender import Sender

__all__ = [
    "TrainingRequest",
    "TrainingRequests",
    "decode_forward_backward",
    "json_result",
]

T = TypeVar("T")

logger = logging.getLogger("tinker_lite.api")


@functools.cache
def _warn_zstd_missing() -> None:
    """Say once per process that the service asks for zstd bodies and they go uncompressed."""
    logger.warning(
        "The service asks for zstd-compressed forward/forward_backward requests "
        "(proto_compress_fwdbwd), but the 'zstandard' package is not installed: they are sent "
        "uncompressed. Install it with: pip install 'tinker-lite[zstd]'"
    )


def json_result(cls: type[T]) -> Callable[[HttpResponse], T]:
    """A poll decoder reading a JSON result into ``cls``."""
    return lambda resp: _wire.structure(resp.json(), cls)


def decode_forward_backward(resp: HttpResponse) -> types.ForwardBackwardOutput:
    """A forward/forward_backward result in either content type (docs/protocol.rst §3.5)."""
    if resp.is_protobuf:
        from tinker_lite._codec import proto as _proto

        return _proto.decode_forward_backward_output(resp.body)
    return _wire.structure(resp.json(), types.ForwardBackwardOutput)


@attrs.frozen
class TrainingRequest:
    """One training request, encoded at call time, waiting for its turn to be submitted."""

    path: str
    body: bytes
    content_type: str
    request_type: str
    decode: Callable[[HttpResponse], Any]
    sdk_method: str
    accept: str = JSON
    headers: Mapping[str, str] = attrs.field(factory=dict)
    tokens: int | None = None  # input tokens of a forward/forward_backward chunk (journal)


class TrainingRequests:
    """The model and training operations of one requestor (``requestor.training``)."""

    def __init__(self, api: Sender) -> None:
        self._api = api

    def submit(
        self, endpoint: Endpoint[T], request: object, *, sdk_method: str, created_at: float
    ) -> APIFuture[T]:
        """Send a request answered with a future (HTTP retries only, docs/protocol.rst §6.5) and
        poll its result into the row's response model."""
        try:
            resp = self._api.call(
                endpoint.verb,
                endpoint.path,
                body_obj=request,
                sdk_method=sdk_method,
                operation_retries=False,
            )
            submitted = parse_model(
                resp, types.UntypedAPIFuture, what=endpoint.path.rsplit("/", 1)[-1]
            )
            session = self._api.session_holder()
        except Exception as e:
            return APIFuture.failed(e)
        return session.poller.poll(
            submitted.request_id,
            endpoint.request_type or "",
            json_result(endpoint.response_type),
            created_at=created_at,
            sdk_method=sdk_method,
        )

    def get_info(
        self, model_id: str, *, sdk_method: str, operation_retries: bool = True
    ) -> types.GetInfoResponse:
        """A model's base model, LoRA rank and tokenizer id."""
        resp = self._api.call(
            GET_INFO.verb,
            GET_INFO.path,
            body_obj=types.GetInfoRequest(model_id=model_id),
            sdk_method=sdk_method,
            operation_retries=operation_retries,
        )
        return parse_model(resp, types.GetInfoResponse)

    def chunk_limits(self) -> ChunkLimits:
        """Forward/forward_backward chunk limits: the service's, else docs/protocol.rst §7.4."""
        session = self._api.session_holder()
        if session.client_config_from_server:
            config = session.client_config
            return ChunkLimits(
                max_datums=max(1, config.fwdbwd_max_chunk_len),
                max_numbers=None,
                max_bytes=max(1, config.fwdbwd_max_chunk_bytes_count),
            )
        return DEFAULT_LIMITS

    def encode_training(
        self, endpoint: Endpoint[Any], request: object, *, sdk_method: str
    ) -> TrainingRequest:
        """Encode a JSON training request for :meth:`submit_training`; the result is read into
        the row's response model."""
        return TrainingRequest(
            path=endpoint.path,
            body=_wire.dumps(request),
            content_type=JSON,
            request_type=endpoint.request_type or "",
            decode=json_result(endpoint.response_type),
            sdk_method=sdk_method,
        )

    def encode_forward_backward(
        self,
        seq_id: int,
        *,
        model_id: str,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: dict[str, float | str] | None,
        forward_only: bool,
        wire: Literal["protobuf", "json"],
        sdk_method: str,
    ) -> TrainingRequest:
        """Encode one forward/forward_backward chunk in the connection's wire format."""
        endpoint = FORWARD if forward_only else FORWARD_BACKWARD
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
                path=FORWARD_BACKWARD.path,
                body=body,
                content_type=PROTOBUF,
                request_type=endpoint.request_type or "",
                decode=decode_forward_backward,
                sdk_method=sdk_method,
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
        json_request = self.encode_training(endpoint, request, sdk_method=sdk_method)
        return attrs.evolve(json_request, decode=decode_forward_backward, tokens=tokens)

    def encode_optim_step(
        self, model_id: str, seq_id: int, params: types.OptimParams, *, sdk_method: str
    ) -> TrainingRequest:
        """Encode an optim_step: AdamW settings go as ``adam_params``, others (Dimuon) as
        ``optimizer_params`` with their ``type``, as 0.38 sends them."""
        if isinstance(params, types.AdamParams):
            request = types.OptimStepRequest(model_id=model_id, seq_id=seq_id, adam_params=params)
            return self.encode_training(OPTIM_STEP, request, sdk_method=sdk_method)
        body = {
            "model_id": model_id,
            "seq_id": seq_id,
            "type": "optim_step",
            "optimizer_params": _wire.to_builtins(params),
        }
        return self.encode_training(OPTIM_STEP, body, sdk_method=sdk_method)

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
