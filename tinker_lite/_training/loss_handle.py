"""``LossHandle`` and the tracing behind ``create_custom_loss`` (docs/protocol.rst §7.6)."""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import inspect
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from tinker_lite import types
from tinker_lite._errors import InvalidInputError

__all__ = [
    "LossHandle",
    "PerDatumLossFn",
    "check_handle_session",
    "encode_graph",
    "loss_inputs",
    "trace_loss",
]

PerDatumLossFn = Callable[..., tuple[Any, Mapping[str, Any]]]
"""A per-datum custom loss: ``(logprobs, *inputs) -> (loss, metrics)``, all torch tensors."""

_ALLOWED_FUNCTION_MODULES = ("torch", "math", "operator", "_operator")
_METRIC_KEY = re.compile(r"custom/[a-z0-9_./-]{1,64}:(sum|mean)")
_INPUT_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_MAX_INPUTS = 16
_HOST_METHODS = frozenset({"item", "numpy", "tolist"})


@dataclasses.dataclass(frozen=True)
class LossHandle:
    """A loss made with ``ServiceClient.create_custom_loss``; pass it to
    ``TrainingClient.forward_backward_custom`` in place of a callable."""

    name: str
    inputs: tuple[types.CustomLossInput, ...]
    """``logprobs``, then the ``loss_fn_inputs`` keys the loss reads, in order, with ranks."""
    session_id: str
    """The session that made the loss; only its clients can use it."""
    graph: Any = dataclasses.field(repr=False, compare=False)
    """The traced ``torch.fx.GraphModule``: what runs, not the original function."""
    loss_id: str | None = None
    """The service's id of the uploaded loss, or ``None`` when it runs client-side."""

    @property
    def key(self) -> str:
        """Identifies the traced loss, so a session makes each loss once."""
        digest = hashlib.sha256(str(getattr(self.graph, "code", "")).encode())
        digest.update(repr(self.inputs).encode())
        return digest.hexdigest()

    @property
    def input_names(self) -> tuple[str, ...]:
        """The ``loss_fn_inputs`` keys the loss reads, in the order it takes them."""
        return tuple(loss_input.name for loss_input in self.inputs[1:])

    def as_loss_fn(self) -> Callable[[list[types.Datum], list[Any]], tuple[Any, dict[str, Any]]]:
        """``(data, logprobs) -> (summed loss, metrics)`` run client-side: the graph on each datum,
        ``:sum`` metrics added over the datums, ``:mean`` ones averaged."""
        names = self.input_names

        def run(data: list[types.Datum], logprobs: list[Any]) -> tuple[Any, dict[str, Any]]:
            import torch

            total: Any = None
            sums: dict[str, Any] = {}
            for index, (datum, datum_logprobs) in enumerate(zip(data, logprobs, strict=True)):
                inputs = []
                for name in names:
                    tensor = datum.loss_fn_inputs.get(name)
                    if tensor is None:
                        raise InvalidInputError(
                            f"data[{index}].loss_fn_inputs",
                            f"has no {name!r}, which the loss {self.name!r} reads",
                        )
                    inputs.append(torch.as_tensor(tensor.to_numpy()))
                loss, metrics = self.graph(datum_logprobs, *inputs)
                total = loss if total is None else total + loss
                for key, value in metrics.items():
                    sums[key] = value if key not in sums else sums[key] + value
            count = max(len(data), 1)
            metrics_out = {
                key: (value / count if key.endswith(":mean") else value)
                for key, value in sums.items()
            }
            return total, metrics_out

        return run


def check_handle_session(handle: LossHandle, session_id: str) -> None:
    """A LossHandle is used only by clients of the session that created it."""
    if handle.session_id != session_id:
        raise InvalidInputError(
            "loss_fn",
            f"LossHandle {handle.name!r} was created in session {handle.session_id}; "
            "only clients of that session can use it",
            "make the loss with this client's ServiceClient.create_custom_loss",
        )


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def loss_inputs(fn: object, input_ranks: object) -> tuple[types.CustomLossInput, ...]:
    """The inputs of ``fn`` with their ranks; :class:`InvalidInputError` naming what is wrong."""
    if not callable(fn):
        raise InvalidInputError("fn", f"must be a function, got {type(fn).__name__}")
    if not isinstance(input_ranks, Mapping):
        raise InvalidInputError(
            "input_ranks",
            f"must map each parameter of the loss to its rank, got {type(input_ranks).__name__}",
            "e.g. {'logprobs': 1, 'weights': 1}",
        )
    name = _fn_name(fn)
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].name != "logprobs":
        raise InvalidInputError(
            "fn",
            f"{name} must take logprobs as its first parameter",
            "then the loss_fn_inputs it reads, e.g. def loss(logprobs, advantages)",
        )
    if len(params) > _MAX_INPUTS:
        raise InvalidInputError(
            "fn", f"{name} takes {len(params)} parameters; at most {_MAX_INPUTS}, logprobs included"
        )
    for param in params:
        problem, hint = "", ""
        if not _INPUT_NAME.fullmatch(param.name):
            problem = "must be a lowercase name"
        elif param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            problem = "must be a plain positional parameter"
        elif param.default is not param.empty:
            problem = "has a default"
            hint = "every parameter after logprobs names a required loss_fn_inputs key"
        if problem:
            raise InvalidInputError("fn", f"{name} parameter {param.name!r} {problem}", hint)
    names = [param.name for param in params]
    if set(input_ranks) != set(names):
        raise InvalidInputError(
            "input_ranks",
            f"must give a rank for each parameter of {name} ({', '.join(names)}), "
            f"got {sorted(map(str, input_ranks))}",
        )
    if input_ranks["logprobs"] == 0:
        raise InvalidInputError("input_ranks", "logprobs has rank 1 ([T]) or 2 ([T, K]), not 0")
    return tuple(types.CustomLossInput(name=n, rank=input_ranks[n]) for n in names)


def trace_loss(
    fn: Callable[..., Any], inputs: tuple[types.CustomLossInput, ...], session_id: str
) -> LossHandle:
    """Trace ``fn`` with ``torch.fx`` into a handle; refuse what is not torch and math only."""
    try:
        import torch.fx
    except ImportError as e:
        raise ImportError(
            "create_custom_loss traces the loss with torch.fx: install torch to create one "
            "(forward_backward_custom also takes a plain loss function without torch)"
        ) from e
    name = _fn_name(fn)
    try:
        graph = torch.fx.symbolic_trace(fn)
    except Exception as e:
        raise InvalidInputError(
            "fn",
            f"{name} cannot be traced by torch.fx: {e}",
            "custom losses cannot branch on tensor values or call libraries other than torch "
            "and math",
        ) from e
    _check_graph(name, graph)
    return LossHandle(name=name, inputs=inputs, session_id=session_id, graph=graph)


def _check_graph(name: str, graph: Any) -> None:
    import torch
    import torch.fx

    for node in graph.graph.nodes:
        problem = ""
        if node.op == "call_function":
            module = getattr(node.target, "__module__", None) or ""
            if node.target is not builtins.getattr and (
                module.split(".")[0] not in _ALLOWED_FUNCTION_MODULES
            ):
                problem = f"calls {node.target!r} from {module or 'an unknown module'!r}"
        elif node.op == "call_method":
            if not hasattr(torch.Tensor, node.target) or node.target == "backward":
                problem = f"calls method {node.target!r}"
            elif node.target in _HOST_METHODS:
                problem = f"calls {node.target}(), which leaves torch"
        elif node.op == "call_module":
            problem = f"calls module {node.target!r}"
        elif node.op == "get_attr":
            problem = f"captures a tensor ({node.target!r})"
        elif node.op == "output":
            problem = _output_problem(node.args[0], torch.fx.Node)
        if problem:
            raise InvalidInputError(
                "fn",
                f"{name} {problem}",
                "a custom loss uses torch and math functions only and returns "
                "(loss, {'custom/<name>:sum' or ':mean': tensor})",
            )


def _output_problem(output: Any, node_type: type) -> str:
    if not (isinstance(output, (tuple, list)) and len(output) == 2):
        return "must return (loss, metrics)"
    if not isinstance(output[0], node_type):
        return f"must return its loss as a tensor, got {output[0]!r}"
    if not isinstance(output[1], dict):
        return "must return its metrics as a dict"
    for key, value in output[1].items():
        if not (isinstance(key, str) and _METRIC_KEY.fullmatch(key)):
            return f"metric {key!r} must be named custom/<name>:sum or custom/<name>:mean"
        if not isinstance(value, node_type):
            return f"metric {key!r} must be a tensor"
    return ""


def encode_graph(handle: LossHandle) -> types.CustomLossGraph:
    """The handle's graph as plain data, node for node (the service decides what it allows)."""
    from torch.fx.node import _get_qualified_name

    nodes = []
    for node in handle.graph.graph.nodes:
        if node.op == "call_function":
            target = _get_qualified_name(node.target)
            # Python operators live in CPython's private _operator; the wire names `operator`.
            if target.startswith("_operator."):
                target = "operator." + target.removeprefix("_operator.")
        else:
            target = str(node.target)
        nodes.append(
            types.CustomLossNode(
                op=node.op,
                name=node.name,
                target=target,
                args=[_encode_arg(handle.name, arg) for arg in node.args],
                kwargs={key: _encode_arg(handle.name, arg) for key, arg in node.kwargs.items()},
            )
        )
    return types.CustomLossGraph(nodes=nodes)


def _encode_arg(name: str, arg: Any) -> Any:
    import torch
    import torch.fx

    if isinstance(arg, torch.fx.Node):
        return {"ref": arg.name}
    if isinstance(arg, float) and not math.isfinite(arg):
        return {"float": str(arg)}
    if arg is None or isinstance(arg, (bool, int, float, str)):
        return arg
    if isinstance(arg, list):
        return [_encode_arg(name, a) for a in arg]
    if isinstance(arg, tuple):
        return {"tuple": [_encode_arg(name, a) for a in arg]}
    if isinstance(arg, dict) and all(isinstance(key, str) for key in arg):
        return {"dict": {key: _encode_arg(name, a) for key, a in arg.items()}}
    if isinstance(arg, slice):
        return {"slice": [_encode_arg(name, a) for a in (arg.start, arg.stop, arg.step)]}
    if arg is Ellipsis:
        return {"ellipsis": True}
    constants = {
        torch.dtype: "dtype",
        torch.device: "device",
        torch.layout: "layout",
        torch.memory_format: "memory_format",
    }
    kind = constants.get(type(arg))
    if kind is not None:
        return {kind: str(arg).removeprefix("torch.")}
    raise InvalidInputError(
        "fn", f"{name} passes a {type(arg).__name__} argument, which cannot be sent to the service"
    )
