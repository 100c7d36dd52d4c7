"""The ``*_async`` twins declared for type checkers (``tinker_lite._async_types``) are the twins
``with_async_twins`` sets at run time: the same twins, with the sync methods' parameters, giving
what each twin gives when awaited.

``make lint`` (``mypy --strict`` over tests/) checks the static half: each client class is its
declarations to a type checker (:func:`_as_declared`), and the tests that call the twins
(``test_async_compat``, ``test_async_hold``) type-check through them.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys

import pytest

import tinker_lite
from tests.support.paths import REPO
from tinker_lite import (
    AdminClient,
    BackcompatSamplingClientFuture,
    BackcompatTrainingClientFuture,
    RestClient,
    SamplingClient,
    ServiceClient,
    TrainingClient,
)
from tinker_lite._async import OFFICIAL_ASYNC_TWINS, TwinShape
from tinker_lite._async_types import (
    AdminClientTwins,
    RestClientTwins,
    SamplingClientTwins,
    ServiceClientTwins,
    TrainingClientTwins,
)

DECLARED: dict[str, type] = {
    "ServiceClient": ServiceClientTwins,
    "TrainingClient": TrainingClientTwins,
    "SamplingClient": SamplingClientTwins,
    "RestClient": RestClientTwins,
    "AdminClient": AdminClientTwins,
}
# What awaiting a client-creation future gives (the runtime twin of shape "result" awaits it).
CLIENT_OF = {
    "BackcompatTrainingClientFuture": "TrainingClient",
    "BackcompatSamplingClientFuture": "SamplingClient",
}
# The twins set at run time: those of the table whose sync method the class has.
TWINS: list[tuple[str, str, TwinShape]] = [
    (owner, name, shape)
    for owner, twins in OFFICIAL_ASYNC_TWINS.items()
    for name, shape in twins.items()
    if hasattr(getattr(tinker_lite, owner), f"{name}_async")
]


def _as_declared(
    service: ServiceClient,
    trainer: TrainingClient,
    sampler: SamplingClient,
    rest: RestClient,
    admin: AdminClient,
) -> tuple[
    ServiceClientTwins, TrainingClientTwins, SamplingClientTwins, RestClientTwins, AdminClientTwins
]:
    """Checked by mypy (never called): to a type checker each client is its declarations."""
    return service, trainer, sampler, rest, admin


def _declared(cls: type) -> set[str]:
    return {name for name in dir(cls) if name.endswith("_async")}


def test_every_client_of_the_table_has_its_declarations() -> None:
    assert set(DECLARED) == set(OFFICIAL_ASYNC_TWINS)
    assert len(TWINS) == 43


@pytest.mark.parametrize("owner", sorted(DECLARED))
def test_the_declared_twins_are_the_runtime_twins(owner: str) -> None:
    runtime = {f"{name}_async" for cls, name, _ in TWINS if cls == owner}
    assert runtime, f"{owner} has no twin at run time"
    assert _declared(DECLARED[owner]) == runtime
    cls = getattr(tinker_lite, owner)
    assert all(inspect.iscoroutinefunction(getattr(cls, name)) for name in runtime)


@pytest.mark.parametrize(
    ("future", "client"),
    [
        (BackcompatTrainingClientFuture, TrainingClient),
        (BackcompatSamplingClientFuture, SamplingClient),
    ],
)
def test_a_client_future_has_every_twin_its_client_declares(future: type, client: type) -> None:
    # A client's future is the client to a type checker: its forwarders must include the twins.
    declared = _declared(DECLARED[client.__name__])
    assert declared
    for name in declared:
        assert inspect.iscoroutinefunction(getattr(future, name)), name


@pytest.mark.parametrize(("owner", "name", "shape"), TWINS, ids=[f"{o}.{n}" for o, n, _ in TWINS])
def test_a_declaration_takes_the_sync_parameters(owner: str, name: str, shape: TwinShape) -> None:
    declared = getattr(DECLARED[owner], f"{name}_async")
    sync = getattr(getattr(tinker_lite, owner), name)
    assert inspect.iscoroutinefunction(declared)
    # Parameter equality: name, kind, default and annotation (as written: both are strings).
    assert inspect.signature(declared).parameters == inspect.signature(sync).parameters


@pytest.mark.parametrize(("owner", "name", "shape"), TWINS, ids=[f"{o}.{n}" for o, n, _ in TWINS])
def test_a_declaration_gives_what_the_twin_gives(owner: str, name: str, shape: TwinShape) -> None:
    declared = getattr(DECLARED[owner], f"{name}_async")
    sync = inspect.signature(getattr(getattr(tinker_lite, owner), name)).return_annotation
    assert isinstance(sync, str)
    if shape == "future":
        assert sync.startswith("APIFuture[")  # the twin gives the sync call's future
        expected = sync
    elif future := re.fullmatch(r"APIFuture\[(.*)\]", sync):
        expected = future.group(1)  # the twin awaits the sync call's future
    else:
        expected = CLIENT_OF.get(sync, sync)  # a created client, or the sync call's value
    assert inspect.signature(declared).return_annotation == expected


def test_only_type_checkers_see_the_declarations() -> None:
    for owner, declared in DECLARED.items():
        assert declared not in getattr(tinker_lite, owner).__mro__
    # Using every client imports neither the declarations nor asyncio.
    code = (
        "import sys, tinker_lite\n"
        f"for name in {sorted(DECLARED)!r}:\n"
        "    getattr(tinker_lite, name)\n"
        "print(sorted(m for m in ('tinker_lite._async_types', 'asyncio') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True
    )
    assert result.stdout.strip() == "[]"
