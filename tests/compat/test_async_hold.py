"""No ``*_async`` twin holds the caller's event loop while it waits for the service.

The local server runs in a process of its own with ``delay=0.05`` added to every request (its
fault grammar, ``tinker_lite.local``): a twin that waited on the loop for a single round trip
would hold it 50 ms or more. A heartbeat task ticks on the loop every millisecond; the hold of a
twin is the longest gap between two ticks while it is awaited (``bench/bench_async_hold.py``
measures the same way, and prints the figures). Every async method of the official 0.38 surface
(``../shared/api/official-0.38-surface.json``) that tinker_lite provides has a case below, and
each must hold the loop under 20 ms and give the kind of result the official one returns.

A busy machine can stall any thread for a while: a case over the bound is measured again, up to
three times in all. A twin that blocks holds the loop for a round trip every time.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import pickle
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import tinker_lite
from tests.compat.test_surface import load_surface
from tests.support.clients import ce_datum
from tests.support.paths import REPO
from tests.support.served import served
from tinker_lite import (
    AdminClient,
    APIFuture,
    BackcompatSamplingClientFuture,
    BackcompatTrainingClientFuture,
    RestClient,
    SamplingClient,
    ServiceClient,
    TrainingClient,
    types,
)


def _bench_heartbeat() -> Any:
    """The heartbeat of ``bench/bench_async_hold.py``: the test measures as the bench does."""
    bench = str(REPO / "bench")
    sys.path.insert(0, bench)
    try:
        from bench_async_hold import Heartbeat

        return Heartbeat
    finally:
        sys.path.remove(bench)


Heartbeat = _bench_heartbeat()

MODEL = "tinker-lite/tiny-64"
DELAY = 0.05
BOUND = 0.020
ATTEMPTS = 3
DATA = [ce_datum([5, 6, 7, 8, 9])]
PROMPT = types.ModelInput.from_ints([104, 105, 32])
PARAMS = types.SamplingParams(max_tokens=2)
ADAM = types.AdamParams(learning_rate=1e-3)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # every twin is deprecated


_NAMES = itertools.count()


@dataclass
class Env:
    """What the cases call twins on, made before any hold is measured."""

    url: str
    service: ServiceClient
    rest: RestClient
    admin: AdminClient
    trainer: TrainingClient
    sampler: SamplingClient
    state: str
    sampler_path: str
    external: str
    doomed: str = ""

    def prepare(self, twin: str) -> None:
        """Made before each measure of a twin: a fresh checkpoint for the twins that change one
        for good (deleted, published, unpublished: done twice, the service refuses)."""
        if "delete_checkpoint" in twin or "publish_checkpoint" in twin:
            name = f"doomed-{next(_NAMES)}"
            self.doomed = self.trainer.save_weights_for_sampler(name).result(timeout=60).path
        if "unpublish_checkpoint" in twin:
            self.rest.publish_checkpoint_from_tinker_path(self.doomed).result(timeout=60)


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    # A copy of a sampler joins the session on its first sample (a request of its own).
    with served(
        "--faults", f"delay={DELAY}", "--config", "sample_join_sampling_session=true"
    ) as url:
        with ServiceClient(base_url=url, api_key="tml-hold", telemetry=False) as service:
            trainer = service.create_lora_training_client(MODEL, rank=2).result(timeout=60)
            trainer.forward_backward(DATA, "cross_entropy")
            trainer.optim_step(ADAM).result(timeout=60)
            yield Env(
                url=url,
                service=service,
                rest=RestClient(service),
                admin=AdminClient(service),
                trainer=trainer,
                sampler=trainer.save_weights_and_get_sampling_client().result(timeout=60),
                state=trainer.save_state("hold-state").result(timeout=60).path,
                sampler_path=trainer.save_weights_for_sampler("hold-s").result(timeout=60).path,
                external=trainer.save_weights_external("hold-x").result(timeout=60).path,
            )


def _custom_loss(data: list[types.Datum], logprobs: list[Any]) -> Any:
    """A custom loss in the numpy form (no torch needed): minus the summed logprobs."""
    grads = [-np.ones_like(lp) for lp in logprobs]
    return float(-sum(float(lp.sum()) for lp in logprobs)), grads, {}


def _hour_window() -> tuple[str, datetime.datetime]:
    now = datetime.datetime.now(datetime.timezone.utc).replace(minute=0, second=0, microsecond=0)
    start = (now - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return start, now + datetime.timedelta(hours=1)


Case = Callable[[Env], Awaitable[Any]]
CLIENT_OF = {
    "BackcompatTrainingClientFuture": TrainingClient,
    "BackcompatSamplingClientFuture": SamplingClient,
}


def _training_cases(on: Callable[[Env], TrainingClient]) -> dict[str, Case]:
    """The TrainingClient twins, called on what ``on(env)`` gives (a client, or its future)."""
    return {
        "forward_async": lambda e: on(e).forward_async(DATA, "cross_entropy"),
        "forward_backward_async": lambda e: on(e).forward_backward_async(DATA, "cross_entropy"),
        "forward_backward_custom_async": lambda e: on(e).forward_backward_custom_async(
            DATA, _custom_loss
        ),
        "optim_step_async": lambda e: on(e).optim_step_async(ADAM),
        "save_state_async": lambda e: on(e).save_state_async(f"hold-{next(_NAMES)}"),
        "load_state_async": lambda e: on(e).load_state_async(e.state),
        "load_state_with_optimizer_async": lambda e: on(e).load_state_with_optimizer_async(e.state),
        "save_weights_for_sampler_async": lambda e: on(e).save_weights_for_sampler_async(
            f"hold-{next(_NAMES)}"
        ),
        "save_weights_external_async": lambda e: on(e).save_weights_external_async(
            f"hold-{next(_NAMES)}"
        ),
        "get_info_async": lambda e: on(e).get_info_async(),
        "create_sampling_client_async": lambda e: on(e).create_sampling_client_async(
            e.sampler_path
        ),
        "save_weights_and_get_sampling_client_async": lambda e: on(
            e
        ).save_weights_and_get_sampling_client_async(),
    }


def _sampling_cases(on: Callable[[Env], SamplingClient]) -> dict[str, Case]:
    return {
        "sample_async": lambda e: on(e).sample_async(PROMPT, 1, PARAMS),
        "compute_logprobs_async": lambda e: on(e).compute_logprobs_async(PROMPT),
        "get_base_model_async": lambda e: on(e).get_base_model_async(),
    }


def _admin_cases(on: Callable[[Env], AdminClient | RestClient]) -> dict[str, Case]:
    return {
        "get_audit_log_async": lambda e: on(e).get_audit_log_async(),
        "get_billing_usage_async": lambda e: on(e).get_billing_usage_async(*_hour_window()),
        "get_current_checkpoint_storage_usage_async": lambda e: on(
            e
        ).get_current_checkpoint_storage_usage_async(),
    }


def _pending_trainer(e: Env) -> BackcompatTrainingClientFuture:
    """A client-creation future still pending: its forwarders must not wait on the loop."""
    return e.service.create_lora_training_client(MODEL, rank=2)


def _pending_sampler(e: Env) -> BackcompatSamplingClientFuture:
    return e.service.create_sampling_client(base_model=MODEL)


CASES: dict[str, dict[str, Case]] = {
    "ServiceClient": {
        "create_lora_training_client_async": lambda e: e.service.create_lora_training_client_async(
            MODEL, rank=2
        ),
        "create_sampling_client_async": lambda e: e.service.create_sampling_client_async(
            base_model=MODEL
        ),
        "create_training_client_from_state_async": lambda e: (
            e.service.create_training_client_from_state_async(e.state)
        ),
        "create_training_client_from_state_with_optimizer_async": lambda e: (
            e.service.create_training_client_from_state_with_optimizer_async(e.state)
        ),
        "get_server_capabilities_async": lambda e: e.service.get_server_capabilities_async(),
    },
    "TrainingClient": _training_cases(lambda e: e.trainer),
    "SamplingClient": _sampling_cases(lambda e: e.sampler),
    "BackcompatTrainingClientFuture": {
        **_training_cases(_pending_trainer),
        "result_async": lambda e: _pending_trainer(e).result_async(),
        "coroutine": lambda e: _pending_trainer(e).coroutine(),
    },
    "BackcompatSamplingClientFuture": {
        **_sampling_cases(_pending_sampler),
        "result_async": lambda e: _pending_sampler(e).result_async(),
        "coroutine": lambda e: _pending_sampler(e).coroutine(),
    },
    "APIFuture": {
        "result_async": lambda e: e.trainer.forward(DATA, "cross_entropy").result_async(),
        "coroutine": lambda e: e.sampler.sample(PROMPT, 1, PARAMS).coroutine(),
    },
    "RestClient": {
        **_admin_cases(lambda e: e.rest),
        "assign_session_project_async": lambda e: e.rest.assign_session_project_async(
            str(e.service.session_id), "proj-hold"
        ),
        "copy_weights_async": lambda e: e.rest.copy_weights_async(e.state, "proj-copy"),
        "delete_checkpoint_async": lambda e: _delete(e.rest, e.doomed),
        "delete_checkpoint_from_tinker_path_async": lambda e: (
            e.rest.delete_checkpoint_from_tinker_path_async(e.doomed)
        ),
        "export_session_trace_async": lambda e: e.rest.export_session_trace_async(
            str(e.service.session_id)
        ),
        "get_external_weights_urls_async": lambda e: e.rest.get_external_weights_urls_async(
            e.external
        ),
        "get_sampler_async": lambda e: e.rest.get_sampler_async(e.sampler.sampling_session_id),
        "get_session_async": lambda e: e.rest.get_session_async(str(e.service.session_id)),
        "get_training_run_async": lambda e: e.rest.get_training_run_async(e.trainer.model_id),
        "get_training_run_by_tinker_path_async": lambda e: (
            e.rest.get_training_run_by_tinker_path_async(e.state)
        ),
        "list_checkpoints_async": lambda e: e.rest.list_checkpoints_async(e.trainer.model_id),
        "list_sessions_async": lambda e: e.rest.list_sessions_async(),
        "list_training_runs_async": lambda e: e.rest.list_training_runs_async(),
        "list_user_checkpoints_async": lambda e: e.rest.list_user_checkpoints_async(),
        "publish_checkpoint_from_tinker_path_async": lambda e: (
            e.rest.publish_checkpoint_from_tinker_path_async(e.doomed)
        ),
        "set_checkpoint_ttl_from_tinker_path_async": lambda e: (
            e.rest.set_checkpoint_ttl_from_tinker_path_async(e.state, 86400)
        ),
        "unpublish_checkpoint_from_tinker_path_async": lambda e: (
            e.rest.unpublish_checkpoint_from_tinker_path_async(e.doomed)
        ),
    },
    "AdminClient": _admin_cases(lambda e: e.admin),
}


def _delete(rest: RestClient, path: str) -> Awaitable[Any]:
    parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(path)
    return rest.delete_checkpoint_async(parsed.training_run_id, parsed.checkpoint_id)


def _official_twins() -> dict[str, str | None]:
    """``Class.method`` -> the official return annotation, for every official async method."""
    out: dict[str, str | None] = {}
    for cls, fact in load_surface()["top_level"].items():
        for method, spec in fact.get("methods", {}).items():
            if spec["kind"] == "async" or method.endswith("_async"):
                out[f"{cls}.{method}"] = spec.get("returns")
    return out


OFFICIAL = _official_twins()
PROVIDED = sorted(
    key for key in OFFICIAL if hasattr(getattr(tinker_lite, key.split(".")[0]), key.split(".")[1])
)


def _returns_like(official: str | None, value: object) -> bool:
    """Whether ``value`` is of the kind the official method's annotation names."""
    if official is None or official == "None":
        return value is None
    if official.startswith("APIFuture["):
        return isinstance(value, APIFuture)
    if official in ("T", "C"):  # a future's own result: checked by the cases' callers
        return True
    if official.startswith("list["):
        return isinstance(value, list)
    if official == "str":
        return isinstance(value, str)
    return type(value).__name__ == official.removeprefix("types.")


async def _measure(twin: str, env: Env) -> tuple[list[float], object]:
    cls, name = twin.split(".")
    holds: list[float] = []
    value: object = None
    async with Heartbeat() as beat:
        for _ in range(ATTEMPTS):
            env.prepare(twin)
            hold, value = await beat.hold(lambda: CASES[cls][name](env))
            holds.append(hold)
            if hold < BOUND:
                break
    return holds, value


def test_every_official_twin_has_a_case() -> None:
    assert len(PROVIDED) > 60
    cased = {f"{cls}.{name}" for cls, cases in CASES.items() for name in cases}
    assert sorted(cased) == PROVIDED


@pytest.mark.parametrize("twin", PROVIDED)
def test_twin_never_holds_the_loop(env: Env, twin: str) -> None:
    holds, value = asyncio.run(_measure(twin, env))
    assert holds[-1] < BOUND, f"{twin} held the event loop {[round(h * 1e3, 1) for h in holds]} ms"
    assert _returns_like(OFFICIAL[twin], value), f"{twin} gave {value!r}"
    cls, name = twin.split(".")
    if cls in CLIENT_OF and name in ("result_async", "coroutine"):
        assert type(value) is CLIENT_OF[cls]


@pytest.mark.parametrize("how", ["pickled", "handle"])
def test_a_sampler_copys_first_sample_does_not_hold_the_loop(env: Env, how: str) -> None:
    """A copy joins the session on its first sample; a copy made from a handle also connects."""

    async def first_sample(copy: SamplingClient) -> tuple[float, Any]:
        async with Heartbeat() as beat:
            held: tuple[float, Any] = await beat.hold(lambda: copy.sample_async(PROMPT, 1, PARAMS))
            return held

    holds = []
    for _ in range(ATTEMPTS):
        if how == "pickled":
            copy = pickle.loads(pickle.dumps(env.sampler))
        else:
            handle = env.sampler.get_sampler_handle()
            copy = SamplingClient.from_sampler_handle(handle, api_key="tml-hold")
        try:
            assert copy._unjoined()
            hold, response = asyncio.run(first_sample(copy))
            assert isinstance(response, types.SampleResponse)
            assert not copy._unjoined()
        finally:
            if how == "handle":
                copy._context.close()
        holds.append(hold)
        if hold < BOUND:
            break
    assert holds[-1] < BOUND, f"a {how} copy's first sample held the loop {holds} s"
