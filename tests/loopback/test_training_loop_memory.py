"""The pipelined training loop frees each step's requests and results by reference counting.

A reference cycle per request (a future's done-callback or poller hook referring back to it)
kept every request body and result alive until the cyclic garbage collector ran, so the
process grew by ~120 KiB per 32-datum step between collections.
"""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.clients import API_KEY, FakeTinker, ce_datum
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    Respond,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import APIFuture, ServiceClient, types
from tinker_lite._api import TrainingRequest
from tinker_lite._futures.future import chain, combine
from tinker_lite.local import LocalServer


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    """Only reference counting frees objects while the test runs."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Holder:
    """A callback object that refers to the future it is attached to (a cycle)."""

    def __init__(self, future: APIFuture[Any]) -> None:
        self.future = future

    def __call__(self, *args: object) -> None:
        del args


def _complete_ok(future: APIFuture[Any]) -> None:
    future.set_result(1)


def _complete_failed(future: APIFuture[Any]) -> None:
    future.set_exception(ValueError("boom"))


def _complete_cancelled(future: APIFuture[Any]) -> None:
    assert future.cancel()


@pytest.mark.parametrize("complete", [_complete_ok, _complete_failed, _complete_cancelled])
@pytest.mark.usefixtures("no_automatic_gc")
def test_a_completed_future_drops_callbacks_and_hooks_that_refer_back_to_it(
    complete: Callable[[APIFuture[Any]], None],
) -> None:
    future: APIFuture[int] = APIFuture("req-1", request_type="ForwardBackward")
    future.add_done_callback(_Holder(future))
    future._cancel_hook = _Holder(future)
    future._demand_hook = _Holder(future)
    calls: list[bool] = []
    future.add_done_callback(lambda done: calls.append(done.done()))
    complete(future)
    assert calls == [True]  # the callbacks still ran, once
    gone = weakref.ref(future)
    del future
    assert gone() is None


@pytest.mark.usefixtures("no_automatic_gc")
def test_combined_and_chained_futures_are_freed_without_the_collector() -> None:
    sources: list[APIFuture[int]] = [APIFuture(f"req-{i}") for i in range(3)]
    combined = combine(sources, sum)
    chained = chain(combined, lambda total: total * 2)
    for index, source in enumerate(sources):
        source.set_result(index)
    assert chained.result(0) == 6
    refs = [weakref.ref(f) for f in (*sources, combined, chained)]
    del sources, combined, chained, source
    assert [r() for r in refs] == [None] * 5


def test_a_completed_future_still_runs_late_callbacks_and_refuses_a_second_result() -> None:
    future: APIFuture[int] = APIFuture()
    future.set_result(3)
    late: list[int] = []
    future.add_done_callback(lambda f: late.append(f.result()))
    assert late == [3]
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_result(4)
    assert not future.cancel()


@pytest.mark.usefixtures("no_automatic_gc")
def test_pipelined_training_steps_leave_no_reference_cycles() -> None:
    """Requests, futures and poll tasks of finished steps are not left to the collector."""
    data = [ce_datum([1, 2, 3, 4, 5, 6]) for _ in range(4)]
    adam = types.AdamParams(learning_rate=1e-3)
    with LocalServer() as url, ServiceClient(base_url=url, telemetry=False) as service:
        trainer = service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
        trainer.forward_backward(data, "cross_entropy").result()
        trainer.optim_step(adam).result()
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            previous: tuple[APIFuture[Any], APIFuture[Any]] | None = None
            for _ in range(4):
                step = (trainer.forward_backward(data, "cross_entropy"), trainer.optim_step(adam))
                if previous is not None:
                    assert len(previous[0].result(30).loss_fn_outputs) == len(data)
                    previous[1].result(30)
                previous = step
            assert previous is not None
            previous[0].result(30)
            previous[1].result(30)
            del previous, step
            gc.collect()
            leaked = sorted(
                {
                    type(o).__name__
                    for o in gc.garbage
                    if isinstance(o, (APIFuture, TrainingRequest, types.ForwardBackwardOutput))
                    or type(o).__module__.startswith("tinker_lite._")
                }
            )
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert leaked == [], leaked


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_sent_request_body_is_freed_before_its_result_arrives(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pipelined steps keep one encoded body alive per request being sent, not per pending
    result: the body goes once the service has accepted it."""
    fake = FakeTinker(server)
    with ServiceClient(
        base_url=server.url, api_key=API_KEY, telemetry=False, wire="json"
    ) as service:
        trainer = service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
        release = threading.Event()

        def held_poll(r: Recorded) -> Any:
            assert release.wait(30), "the test never released the poll"
            return fake.handle(r)

        server.on("POST", "/api/v1/retrieve_future", Respond(held_poll))
        sent: list[weakref.ref[TrainingRequest]] = []
        submit = trainer._api.training.submit_training

        def recording_submit(request: TrainingRequest, *, sdk_method: str) -> str:
            sent.append(weakref.ref(request))
            return submit(request, sdk_method=sdk_method)

        monkeypatch.setattr(trainer._api.training, "submit_training", recording_submit)
        future = trainer.forward_backward([ce_datum([1, 2, 3, 4])] * 3, "cross_entropy")
        # The client's single training thread has finished sending it once this runs.
        trainer._queue.executor.submit(lambda: None).result(30)
        try:
            assert len(sent) == 1
            assert not future.done()
            assert sent[0]() is None
        finally:
            release.set()
        assert len(future.result(30).loss_fn_outputs) == 3
