"""Every official ``*_async`` twin (``../shared/api/official-0.38-surface.json``) is declared once,
in its class, from its sync method, and takes the sync method's parameters.

A twin that gives the call's future (``fut = await training_client.forward_async(...)``) is
declared with ``async_future_twin``, every other one with ``async_twin``: the surface file's return
annotation says which. ``make lint`` (``mypy --strict`` over tests/) checks :func:`_typed`: a
type checker reads the twins from the same declarations as the runtime.
"""

from __future__ import annotations

import ast
import inspect
import sys
from typing import TYPE_CHECKING, Any

import pytest

import tinker_lite
from tests.compat.test_surface import load_surface
from tinker_lite import (
    AdminClient,
    APIFuture,
    RestClient,
    SamplingClient,
    ServiceClient,
    TrainingClient,
    types,
)

if TYPE_CHECKING:
    from typing_extensions import assert_type

CLIENTS = ("ServiceClient", "TrainingClient", "SamplingClient", "RestClient", "AdminClient")
FUTURES = {
    "BackcompatTrainingClientFuture": "TrainingClient",
    "BackcompatSamplingClientFuture": "SamplingClient",
}


def _official_twins(owner: str) -> dict[str, dict[str, Any]]:
    """The official class's twins (a deprecated method ``x_async`` beside a method ``x``)."""
    methods: dict[str, dict[str, Any]] = load_surface()["top_level"][owner]["methods"]
    return {
        name: facts
        for name, facts in methods.items()
        if name.endswith("_async") and name.removesuffix("_async") in methods
    }


TWINS = [(owner, name) for owner in CLIENTS for name in sorted(_official_twins(owner))]


def _declarations(owner: str) -> dict[str, tuple[str, str]]:
    """``x_async = factory(x)`` in ``owner``'s class body: twin name -> (factory, sync name)."""
    cls = getattr(tinker_lite, owner)
    tree = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body
    found: dict[str, tuple[str, str]] = {}
    for node in body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        call, target = node.value, node.targets[0]
        if isinstance(target, ast.Name) and isinstance(call.func, ast.Name) and call.args:
            sync = call.args[0]
            assert target.id not in found, f"{owner}.{target.id} is declared twice"
            found[target.id] = (call.func.id, sync.id if isinstance(sync, ast.Name) else "?")
    return found


def test_the_surface_lists_the_43_official_twins() -> None:
    assert len(TWINS) == 43


@pytest.mark.parametrize(("owner", "name"), TWINS, ids=[f"{o}.{n}" for o, n in TWINS])
def test_a_twin_is_declared_in_its_class_from_its_sync_method(owner: str, name: str) -> None:
    official = _official_twins(owner)[name]
    sync = name.removesuffix("_async")
    gives_future = str(official["returns"]).startswith("APIFuture[")
    factory = "async_future_twin" if gives_future else "async_twin"
    assert _declarations(owner).get(name) == (factory, sync)


@pytest.mark.parametrize(("owner", "name"), TWINS, ids=[f"{o}.{n}" for o, n in TWINS])
def test_a_twin_takes_its_sync_methods_parameters(owner: str, name: str) -> None:
    cls = getattr(tinker_lite, owner)
    twin, sync = getattr(cls, name), getattr(cls, name.removesuffix("_async"))
    assert inspect.iscoroutinefunction(twin)
    assert twin.__name__ == name
    assert "deprecated" in twin.__deprecated__  # it warns, as the official twin does
    parameters = list(inspect.signature(twin).parameters.values())
    assert parameters == list(inspect.signature(sync).parameters.values())
    # The official parameters come first, with the official names, kinds and defaults.
    official = _official_twins(owner)[name]["params"]
    ours = [
        (p.name, p.kind.name, None if p.default is p.empty else repr(p.default))
        for p in parameters[1:]
    ]
    assert ours[: len(official)] == [(p["name"], p["kind"], p["default"]) for p in official]


@pytest.mark.parametrize("future", sorted(FUTURES))
def test_a_client_future_forwards_every_twin_of_its_client(future: str) -> None:
    client = FUTURES[future]
    names = _official_twins(future).keys() & _official_twins(client).keys()
    assert names == _official_twins(client).keys()
    for name in names:
        assert inspect.iscoroutinefunction(getattr(getattr(tinker_lite, future), name)), name


async def _typed(
    service: ServiceClient,
    trainer: TrainingClient,
    sampler: SamplingClient,
    rest: RestClient,
    admin: AdminClient,
) -> None:
    """Checked by mypy (never called): each twin takes its sync parameters, gives its result."""
    prompt = types.ModelInput.from_ints([1, 2])
    assert_type(await service.create_lora_training_client_async("m", 8), TrainingClient)
    assert_type(await service.get_server_capabilities_async(), types.GetServerCapabilitiesResponse)
    assert_type(
        await trainer.forward_backward_async([], "cross_entropy"),
        APIFuture[types.ForwardBackwardOutput],
    )
    assert_type(await trainer.get_info_async(), types.GetInfoResponse)
    assert_type(
        await sampler.sample_async(prompt, 1, types.SamplingParams(max_tokens=1)),
        types.SampleResponse,
    )
    assert_type(await sampler.compute_logprobs_async(prompt), list[float | None])
    assert_type(await rest.get_training_run_async("run"), types.TrainingRun)
    assert_type(await admin.get_audit_log_async("all"), types.AuditLogResponse)
