"""Making a TrainingClient: the model is created on the service, then its client is made, on the
REST threads (docs/protocol.rst §7.1)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from tinker_lite import types
from tinker_lite._api import endpoints
from tinker_lite._context import ClientContext
from tinker_lite._errors import ClientClosedError, InvalidInputError
from tinker_lite._futures.future import APIFuture, then

if TYPE_CHECKING:
    from tinker_lite.training_client import TrainingClient

__all__ = ["Steps", "create_model_steps", "from_state_steps", "in_background"]

T = TypeVar("T")

Steps = tuple[Callable[[], "APIFuture[T]"], Callable[[T], "TrainingClient"]]
"""A creation's two blocking steps: send the request (its future), then make the client."""


def create_model_steps(
    cls: type[TrainingClient],
    context: ClientContext,
    base_model: str,
    lora: types.LoraConfig,
    *,
    user_metadata: dict[str, Any] | None,
    sdk_method: str,
    optimizer: types.OptimizerConfig | None = None,
    model_seq_id: int | None = None,
) -> Steps[types.CreateModelResponse]:
    """Create the model on the service (starting the session if needed): send
    ``create_model``, then make the client of the created model. Checks the arguments now."""
    if not isinstance(base_model, str) or not base_model:
        raise InvalidInputError(
            "base_model", f"must be a model name, got {base_model!r}", "e.g. 'Qwen/Qwen3-8B'"
        )
    api = context.api
    # docs/protocol.rst §7.1: the number is taken before create_model is sent; a failure
    # consumes it.
    seq_id = context.holder.get_training_client_id() if model_seq_id is None else model_seq_id
    created_at = time.monotonic()

    def send() -> APIFuture[types.CreateModelResponse]:
        request = types.CreateModelRequest(
            session_id=context.holder.ensure_session(),
            model_seq_id=seq_id,
            base_model=base_model,
            user_metadata=user_metadata,
            lora_config=lora,
            **({} if optimizer is None else {"optimizer_config": optimizer}),
        )
        source = api.training.submit(
            endpoints.CREATE_MODEL, request, sdk_method=sdk_method, created_at=created_at
        )
        # Watched first: the journal line is written before the client is delivered.
        context.journal_watch(source, "create_model", seq_id=0, started=created_at)
        return source

    def finish(created: types.CreateModelResponse) -> TrainingClient:
        # 0.38 reads the new model's info once.
        info = _info(context, created.model_id, sdk_method)
        return cls(context, model_id=created.model_id, base_model=base_model, info=info)

    return send, finish


def from_state_steps(
    cls: type[TrainingClient],
    context: ClientContext,
    path: str,
    *,
    model_seq_id: int,
    optimizer: bool,
    optimizer_config: object | None,
    base_model: str | None,
    user_metadata: dict[str, Any] | None,
    weights_access_token: str | None,
    sdk_method: str,
) -> Steps[types.LoadWeightsResponse]:
    """Create a model from a saved state with one ``load_weights`` carrying ``session_id`` +
    ``model_seq_id`` (golden-0.38): the model is ``<session_id>:train:<model_seq_id>``."""
    api = context.api
    created_at = time.monotonic()

    def send() -> APIFuture[types.LoadWeightsResponse]:
        request = types.LoadWeightsRequest(
            session_id=context.holder.ensure_session(),
            model_seq_id=model_seq_id,
            base_model=base_model,
            user_metadata=user_metadata,
            path=path,
            optimizer=optimizer,
            optimizer_config=optimizer_config,
            weights_access_token=weights_access_token,
        )
        # golden-0.38: a load_weights with session_id + model_seq_id creates its model.
        source = api.training.submit(
            endpoints.LOAD_WEIGHTS, request, sdk_method=sdk_method, created_at=created_at
        )
        context.journal_watch(source, "create_model", seq_id=0, started=created_at)
        return source

    def finish(loaded: types.LoadWeightsResponse) -> TrainingClient:
        # golden-0.38: the service names the model after the session and the number.
        model_id = f"{context.holder.ensure_session()}:train:{model_seq_id}"
        info = _info(context, model_id, sdk_method)
        base = info.model_data.model_name or info.model_name
        return cls(context, model_id=model_id, base_model=base, info=info)

    return send, finish


def in_background(
    context: ClientContext, steps: Steps[T], *, request_type: str
) -> APIFuture[TrainingClient]:
    """The future of a creation's client, at once: both steps run on the REST threads, registered
    for close() as one ``create_model``."""
    send, finish = steps
    pool = context.rest_pool()

    def run(step: Callable[[], Any]) -> Future[Any]:
        try:
            return pool.submit(step)
        except RuntimeError:  # the pool was shut down by close()
            raise ClientClosedError("The ServiceClient is closed.") from None

    def start() -> APIFuture[T]:
        if not pending.claim():
            raise ClientClosedError("The ServiceClient was closed before the model was made.")
        return send()

    out: APIFuture[TrainingClient] = APIFuture(request_type=request_type)
    pending = context.pending.track("create_model", out, on_drop=out.try_set_exception)
    try:
        started = run(start)
    except ClientClosedError as e:
        out.try_set_exception(e)
        raise
    out.forward_from(then(started, lambda sent: then(sent, finish, run=run)))
    return out


def _info(context: ClientContext, model_id: str, sdk_method: str) -> types.GetInfoResponse:
    """The new model's info; a close that waited for the creation refuses the new client."""
    if context.closed:
        raise ClientClosedError(
            f"The ServiceClient was closed while training run {model_id} was being created: "
            "the service created it, but no client is made for a closed connection"
        )
    return context.api.training.get_info(model_id, sdk_method=sdk_method)
