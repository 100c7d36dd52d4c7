"""The client side of ``forward_backward_custom``: the gradient of a user's loss
(docs/protocol.rst §7.6; docs/api.rst, "Custom losses")."""

from __future__ import annotations

import functools
import importlib
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from tinker_lite import types
from tinker_lite._api import TrainingRequest
from tinker_lite._codec.chunking import combine_outputs
from tinker_lite._errors import APIResponseValidationError, InvalidInputError, TinkerError
from tinker_lite._futures.future import APIFuture, chain, combine
from tinker_lite._training.queue import Deferred, TrainingQueue
from tinker_lite._training.validate import validate

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tinker_lite._codec.chunking import ChunkLimits

__all__ = [
    "CustomLossFn",
    "check_loss_type_input",
    "custom_forward_datum",
    "schedule_custom",
]

# loss_fn(data, logprobs) -> (loss, grads, metrics) without torch, or (loss_tensor, metrics).
CustomLossFn = Callable[[list["types.Datum"], list[Any]], Any]
# encode(chunk, forward_only): the submission of one forward/forward_backward chunk by seq_id.
ChunkEncoder = Callable[[list["types.Datum"], bool], Callable[[int], TrainingRequest]]


@attrs.frozen
class CustomLoss:
    """What a custom loss function gave: d loss / d logprobs per datum, its metrics, its value."""

    grads: list[npt.NDArray[np.float64]]
    metrics: dict[str, float]
    loss_sum: float


def merge_metrics(service: Mapping[str, float], custom: CustomLoss) -> dict[str, float]:
    """The metrics of a forward_backward_custom result, as the official SDK reports them: the
    service's ``loss:sum`` becomes ``surrogate_loss:sum``, the custom loss is ``loss:sum``."""
    merged = dict(service)
    surrogate = merged.pop("loss:sum", None)
    merged.update(custom.metrics)
    merged["loss:sum"] = custom.loss_sum
    if surrogate is not None:
        merged["surrogate_loss:sum"] = surrogate
    return merged


def check_loss_type_input(loss_type_input: str | None) -> None:
    """Warn that ``loss_type_input`` is deprecated (as 0.38 does) and accept only "logprobs"."""
    if loss_type_input is None:
        return
    warnings.warn(
        "forward_backward_custom(loss_type_input=...) is deprecated: the loss function always "
        "receives logprobs; remove the argument.",
        DeprecationWarning,
        stacklevel=3,
    )
    if loss_type_input != "logprobs":
        raise InvalidInputError(
            "loss_type_input",
            f"unsupported value {loss_type_input!r}",
            "the only supported value is 'logprobs' (or leave it out)",
        )


def logprobs_of(out: Mapping[str, types.TensorData], index: int) -> npt.NDArray[np.float32]:
    import numpy as np

    tensor = out.get("logprobs")
    if tensor is None:
        raise APIResponseValidationError(
            f"forward output {index} has no 'logprobs' (keys: {sorted(out)})"
        )
    return np.asarray(tensor.to_numpy(), dtype=np.float32)


def custom_gradients(
    loss_fn: CustomLossFn, data: list[types.Datum], logprobs: list[npt.NDArray[np.float32]]
) -> CustomLoss:
    """Call ``loss_fn`` once (torch tensors when torch is installed, else numpy arrays, decided
    before the call); d loss / d logprobs per datum, its metrics and its value."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        torch = None
    if torch is not None:
        return _torch_form(torch, loss_fn, data, logprobs)
    result = loss_fn(data, [lp.copy() for lp in logprobs])
    if isinstance(result, tuple) and len(result) == 3:
        return _numpy_form(result, logprobs)
    raise InvalidInputError(
        "loss_fn",
        f"returned {_describe(result)}; without torch it must return (loss, grads, metrics)",
        "return the loss, one gradient array per datum (d loss / d logprobs) and a dict, "
        "or install torch to return (loss_tensor, metrics)",
    )


def _describe(value: object) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return type(value).__name__


def _numpy_form(
    result: tuple[Any, Any, Any], logprobs: list[npt.NDArray[np.float32]]
) -> CustomLoss:
    import numpy as np

    loss, grads, metrics = result
    try:
        loss_value = float(loss)
    except (TypeError, ValueError):
        raise InvalidInputError(
            "loss_fn", f"returned a loss that is not a number: {loss!r}"
        ) from None
    if not math.isfinite(loss_value):
        raise InvalidInputError("loss_fn", f"returned a non-finite loss ({loss_value})")
    if isinstance(grads, (str, bytes)) or not isinstance(grads, Sequence):
        raise InvalidInputError("loss_fn", "grads must be a list with one array per datum")
    if len(grads) != len(logprobs):
        raise InvalidInputError(
            "loss_fn", f"returned {len(grads)} gradients for {len(logprobs)} datums"
        )
    out: list[npt.NDArray[np.float64]] = []
    for index, (grad, lp) in enumerate(zip(grads, logprobs, strict=True)):
        arr = np.asarray(grad, dtype=np.float64)
        if arr.shape != lp.shape:
            if arr.size != lp.size:
                raise InvalidInputError(
                    f"loss_fn grads[{index}]",
                    f"has shape {list(arr.shape)}, expected {list(lp.shape)} like the logprobs",
                )
            arr = arr.reshape(lp.shape)
        if not bool(np.isfinite(arr).all()):
            raise InvalidInputError(f"loss_fn grads[{index}]", "holds NaN or Inf")
        out.append(arr)
    return CustomLoss(grads=out, metrics=_metrics_dict(metrics), loss_sum=loss_value)


def _metrics_dict(metrics: object) -> dict[str, float]:
    if metrics is None:
        return {}
    if not isinstance(metrics, Mapping):
        raise InvalidInputError("loss_fn", f"metrics must be a dict, got {type(metrics).__name__}")
    out: dict[str, float] = {}
    for key, value in metrics.items():
        try:
            out[str(key)] = float(value)
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"loss_fn metrics[{key!r}]", f"must be a number, got {value!r}"
            ) from None
    return out


def _torch_form(
    torch: Any,
    loss_fn: CustomLossFn,
    data: list[types.Datum],
    logprobs: list[npt.NDArray[np.float32]],
) -> CustomLoss:
    import numpy as np

    tensors = [torch.tensor(lp, dtype=torch.float32, requires_grad=True) for lp in logprobs]
    result = loss_fn(data, tensors)
    if isinstance(result, tuple) and len(result) == 3:
        value, given, extra = result
        if isinstance(given, Sequence) and not isinstance(given, (str, bytes)):
            given = [g.detach().cpu().numpy() if isinstance(g, torch.Tensor) else g for g in given]
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        return _numpy_form((value, given, extra), logprobs)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.Tensor)):
        raise InvalidInputError(
            "loss_fn",
            f"returned {_describe(result)}",
            "return (loss_tensor, metrics) with a scalar torch loss, or (loss, grads, metrics)",
        )
    loss, metrics = result
    if loss.numel() != 1:
        raise InvalidInputError(
            "loss_fn", f"the loss must be a scalar, got shape {list(loss.shape)}"
        )
    loss_sum = float(loss.detach().sum().item())
    loss.backward()
    grads: list[npt.NDArray[np.float64]] = []
    for index, tensor in enumerate(tensors):
        if tensor.grad is None:
            raise TinkerError(f"No gradient computed for logprob tensor {index}")
        grads.append(np.asarray(tensor.grad.detach().cpu().numpy(), dtype=np.float64))
    return _numpy_form((loss_sum, grads, metrics), logprobs)


def _weighted(datum: types.Datum, weights: types.TensorData | None = None) -> types.Datum:
    """``datum``'s targets with these cross-entropy ``weights`` (None: zeros, a backward pass
    that changes nothing) as its only inputs."""
    targets = datum.loss_fn_inputs["target_tokens"]
    if weights is None:
        weights = types.TensorData(
            data=[0.0] * len(targets.data), dtype="float32", shape=targets.shape
        )
    return attrs.evolve(datum, loss_fn_inputs={"target_tokens": targets, "weights": weights})


def custom_forward_datum(datum: object, index: int) -> types.Datum:
    """The datum forward_backward_custom sends: targets and weights (zeros when not given)."""
    import numpy as np

    if not isinstance(datum, types.Datum):
        raise InvalidInputError(f"data[{index}]", f"must be a Datum, got {datum!r}")
    targets = datum.loss_fn_inputs.get("target_tokens")
    if targets is None:
        raise InvalidInputError(
            f"data[{index}].loss_fn_inputs",
            "forward_backward_custom needs 'target_tokens'",
            "give the token each position predicts",
        )
    weights = datum.loss_fn_inputs.get("weights")
    if weights is None:
        # As 0.38 sends it: zero weights shaped like the targets (the forward's loss is unused).
        weights = types.TensorData.from_numpy(np.zeros(targets.to_numpy().shape, dtype=np.float32))
    return _weighted(datum, weights)


def schedule_custom(
    queue: TrainingQueue,
    items: list[types.Datum],
    forward_data: list[types.Datum],
    loss_fn: CustomLossFn,
    *,
    created_at: float,
    limits: ChunkLimits,
    vocab_size: int | None,
    first_last: bool,
    encode: ChunkEncoder,
) -> APIFuture[types.ForwardBackwardOutput]:
    """Queue the forward now and reserve the backward's ``seq_id`` now (as 0.38 does), its body
    built from the loss once the forward is back; a failed loss sends zero weights."""
    report = validate(forward_data, "cross_entropy", None, limits=limits, vocab_size=vocab_size)

    @functools.cache  # called by the client's submit thread, chunk after chunk
    def backward() -> tuple[list[types.Datum], CustomLoss | None, BaseException | None]:
        try:
            forward_out = forward.result()
            logprobs = [
                logprobs_of(out, index) for index, out in enumerate(forward_out.loss_fn_outputs)
            ]
            if len(logprobs) != len(items):
                raise APIResponseValidationError(
                    f"forward returned {len(logprobs)} outputs for {len(items)} datums"
                )
            custom = custom_gradients(loss_fn, items, logprobs)
            grads = [
                types.TensorData.from_numpy((-grad).astype("float32")) for grad in custom.grads
            ]
            return list(map(_weighted, forward_data, grads)), custom, None
        except Exception as e:
            return list(map(_weighted, forward_data)), None, e

    def deferred(chunk: range) -> Deferred:
        def build(seq_id: int) -> TrainingRequest:
            return encode(backward()[0][chunk.start : chunk.stop], False)(seq_id)

        tokens = sum(datum.model_input.length for datum in forward_data[chunk.start : chunk.stop])
        return Deferred("ForwardBackward", tokens, build)

    with queue.order_lock:  # the forward's and the backward's seq_ids are contiguous
        forwards = queue.schedule(
            [encode(forward_data[c.start : c.stop], True) for c in report.chunks],
            created_at=created_at,
            kind="forward_backward_custom",
            first_last=first_last,
        )
        forward = combine(forwards, combine_outputs, request_type="Forward")
        backwards = queue.schedule(
            [deferred(c) for c in report.chunks],
            created_at=created_at,
            kind="forward_backward_custom",
            first_last=first_last,
        )

    def result(out: types.ForwardBackwardOutput) -> types.ForwardBackwardOutput:
        _, custom, error = backward()
        if error is not None:
            raise error
        assert custom is not None
        return attrs.evolve(out, metrics=merge_metrics(out.metrics, custom))

    return chain(combine(backwards, combine_outputs, request_type="ForwardBackward"), result)
