"""The sampling fan-out: what a queued sample costs, the sampling executor, the future.

Thousands of samples may be queued at once (``sample()`` returns at once; a process-wide cap
keeps 400 in flight): each one must cost little memory, still complete, and close must still
finish or drop it (tests/loopback/test_closing.py). Memory is measured with tracemalloc, never time.
"""

from __future__ import annotations

import concurrent.futures
import gc
import logging
import threading
import tracemalloc
import weakref
from collections.abc import Callable, Iterator

import pytest

from tinker_lite import FutureTimeoutError, ServiceClient, types
from tinker_lite._futures.future import APIFuture
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"
QUEUED = 2000


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    local = LocalServer(faults="", stub_model=True)
    local.start()
    try:
        yield local
    finally:
        local.stop()


def _traced_bytes_per_item(make: Callable[[], object], count: int) -> float:
    """The traced memory ``count`` calls of ``make`` keep alive, per call."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make() for _ in range(count)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == count
    return (after - before) / count


# -- samples queued by the fan-out ----------------------------------------------------------------


def test_a_queued_sample_costs_under_2_kib_and_every_one_completes(server: LocalServer) -> None:
    prompt = types.ModelInput.from_ints([1, 2, 3])
    params = types.SamplingParams(max_tokens=1)
    gate = threading.Event()
    with ServiceClient(base_url=server.base_url, telemetry=False, sample_workers=1) as client:
        sampler = client.create_sampling_client(base_model=BASE_MODEL).result()
        sampler.sample(prompt, 1, params).result(timeout=60)  # session, poller, pools started
        # The only submit thread waits on the gate: every sample below stays queued.
        client._context.sample_pool().submit(gate.wait, 60)
        try:
            per_sample = _traced_bytes_per_item(lambda: sampler.sample(prompt, 1, params), QUEUED)
        finally:
            gate.set()
        # The caller's APIFuture (a concurrent.futures.Future, 1.7 KiB with its Condition), the
        # executor's work item and its own Future (1.8 KiB), the job and the request: about
        # 4.1 KiB per queued sample.
        assert per_sample < 5 * 1024, f"{per_sample:.0f} bytes per queued sample"
    assert server.stats()["samples_submitted"] >= QUEUED + 1


def test_queued_samples_resolve_in_any_order_they_are_awaited(server: LocalServer) -> None:
    prompt = types.ModelInput.from_ints([4, 5, 6])
    params = types.SamplingParams(max_tokens=1)
    with ServiceClient(base_url=server.base_url, telemetry=False, sample_workers=2) as client:
        sampler = client.create_sampling_client(base_model=BASE_MODEL).result()
        futures = [sampler.sample(prompt, 1, params) for _ in range(200)]
        done = list(concurrent.futures.as_completed(futures, timeout=120))
        assert set(done) == set(futures)
        assert all(len(f.result(0).sequences[0].tokens) == 1 for f in futures)
        assert len({f.request_id for f in futures}) == len(futures)


# -- the sampling executor --------------------------------------------------------------------


def test_the_wide_executor_is_a_thread_pool_joined_on_close(server: LocalServer) -> None:
    prompt = types.ModelInput.from_ints([7, 8, 9])
    params = types.SamplingParams(max_tokens=1)
    with ServiceClient(base_url=server.base_url, telemetry=False, sample_workers=2) as client:
        sampler = client.create_sampling_client(base_model=BASE_MODEL).result()
        pool = client._context.sample_pool()
        assert isinstance(pool, concurrent.futures.ThreadPoolExecutor)
        futures = [sampler.sample(prompt, 1, params) for _ in range(50)]
        assert all(f.result(timeout=60).sequences for f in futures)
        workers = {pool.submit(threading.current_thread).result(30) for _ in range(20)}
        assert 1 <= len(workers) <= 2
        assert all(w.name.startswith("tinker-lite-sample") for w in workers)
    assert not any(w.is_alive() for w in workers)
    with pytest.raises(RuntimeError):
        pool.submit(int)


def test_an_error_escaping_a_sample_job_fails_its_future_and_is_logged(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    prompt = types.ModelInput.from_ints([1, 2])
    params = types.SamplingParams(max_tokens=1)
    with ServiceClient(base_url=server.base_url, telemetry=False) as client:
        sampler = client.create_sampling_client(base_model=BASE_MODEL).result()

        def broken_poll(*args: object, **kwargs: object) -> None:
            raise RuntimeError("poller broke")

        monkeypatch.setattr(client._context.holder.poller, "poll", broken_poll)
        with caplog.at_level(logging.ERROR, logger="tinker_lite.sampling_client"):
            with pytest.raises(RuntimeError, match="poller broke"):
                sampler.sample(prompt, 1, params).result(timeout=60)
        monkeypatch.undo()
        assert sampler.sample(prompt, 1, params).result(timeout=60).sequences
    assert any("A sample job failed" in r.getMessage() for r in caplog.records)


# -- the future -------------------------------------------------------------------------------


def test_a_pending_api_future_costs_under_2_kib() -> None:
    per_future = _traced_bytes_per_item(lambda: APIFuture(request_type="Sample"), QUEUED)
    # A concurrent.futures.Future alone takes about 1.6 KiB (1.3 KiB of it its Condition).
    assert per_future < 2048, f"{per_future:.0f} bytes per APIFuture"


def test_a_waiter_is_woken_by_the_result_set_on_another_thread() -> None:
    future: APIFuture[int] = APIFuture("req-1")
    waiting = threading.Event()

    def set_when_waited() -> None:
        waiting.wait(30)
        future.set_result(7)

    setter = threading.Thread(target=set_when_waited)
    setter.start()
    waiting.set()
    assert future.result(timeout=30) == 7
    setter.join()


def test_an_expired_wait_can_be_followed_by_a_successful_one() -> None:
    future: APIFuture[int] = APIFuture("req-2", request_type="Sample")
    with pytest.raises(FutureTimeoutError, match="req-2"):
        future.result(timeout=0.01)
    with pytest.raises(FutureTimeoutError):
        future.exception(timeout=0)
    future.set_result(3)
    assert future.result(timeout=0) == 3


def test_cancel_wakes_a_waiter_and_wait_and_as_completed_accept_api_futures() -> None:
    first: APIFuture[int] = APIFuture("a")
    second: APIFuture[int] = APIFuture("b")
    outcome: list[BaseException] = []

    def wait_first() -> None:
        try:
            first.result(timeout=30)
        except BaseException as e:
            outcome.append(e)

    waiter = threading.Thread(target=wait_first)
    waiter.start()
    assert first.cancel()
    waiter.join(30)
    assert len(outcome) == 1
    assert isinstance(outcome[0], concurrent.futures.CancelledError)
    third: APIFuture[int] = APIFuture.completed(3)
    done, not_done = concurrent.futures.wait(
        [third, second], timeout=0, return_when=concurrent.futures.FIRST_COMPLETED
    )
    assert done == {third}
    assert not_done == {second}
    threading.Thread(target=second.set_result, args=(1,)).start()
    assert list(concurrent.futures.as_completed([second], timeout=30)) == [second]


def test_a_done_callback_may_read_the_future_it_completes() -> None:
    future: APIFuture[str] = APIFuture("c")
    seen: list[str] = []
    future.add_done_callback(lambda f: seen.append(f.result(timeout=0) + repr(f)))
    future.set_result("ok")
    assert seen == ["ok<APIFuture request_id='c' type=None state=done>"]


def test_a_completed_future_keeps_neither_its_callbacks_nor_its_polling_state() -> None:
    class PollState:
        def on_done(self, future: concurrent.futures.Future[int]) -> None:
            self.done = future.done()

        def on_cancel(self) -> None:
            self.cancelled = True

        def on_demand(self, wanted: bool) -> None:
            self.wanted = wanted

    completions: list[Callable[[APIFuture[int]], object]] = [
        lambda f: f.set_result(1),
        lambda f: f.set_exception(ValueError("no")),
        lambda f: f.cancel(),
    ]
    for complete in completions:
        future: APIFuture[int] = APIFuture("d")
        state = PollState()
        future.add_done_callback(state.on_done)
        future._cancel_hook = state.on_cancel
        future._demand_hook = state.on_demand
        gone = weakref.ref(state)
        del state
        complete(future)
        gc.collect()
        # A fan-out keeps thousands of completed futures until it reads them in order.
        assert gone() is None
        assert future.done()
