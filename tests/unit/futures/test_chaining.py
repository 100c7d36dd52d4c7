"""``then`` and ``flatten``: the next step of a chain of requests, with no thread waiting between.

Client creation is built from them: a blocking step (an HTTP call) runs on an executor, returns
the future of the request it submitted, and the next step runs when that future completes.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator

import pytest

from tinker_lite._futures.future import APIFuture, flatten, then


@pytest.fixture
def pool() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="step") as executor:
        yield executor


def test_then_maps_the_result_on_the_completing_thread() -> None:
    source: APIFuture[int] = APIFuture("r-1", request_type="CreateModel")
    threads: list[str] = []

    def step(value: int) -> int:
        threads.append(threading.current_thread().name)
        return value * 10

    out = then(source, step)
    assert not out.done()
    assert out.request_type == "CreateModel"
    assert out.request_id == "r-1"
    completer = threading.Thread(target=source.set_result, args=(4,), name="completer")
    completer.start()
    completer.join()
    assert out.result(timeout=1) == 40
    assert threads == ["completer"]


def test_a_step_that_returns_a_future_delivers_that_futures_outcome() -> None:
    source: APIFuture[int] = APIFuture()
    submitted: APIFuture[str] = APIFuture("r-2")
    out: APIFuture[str] = then(source, lambda value: submitted)
    source.set_result(1)
    assert not out.done()  # waits for the submitted request, on no thread
    assert out.request_id == "r-2"
    submitted.set_result("created")
    assert out.result(timeout=1) == "created"


def test_a_blocking_step_runs_where_run_runs_it(
    pool: concurrent.futures.ThreadPoolExecutor,
) -> None:
    source: APIFuture[int] = APIFuture()
    release = threading.Event()
    threads: list[str] = []

    def blocking(value: int) -> int:
        threads.append(threading.current_thread().name)
        release.wait(5)
        return value + 1

    out = then(source, blocking, run=pool.submit)
    source.set_result(1)  # returns although the step blocks: it runs on the pool
    assert not out.done()
    release.set()
    assert out.result(timeout=5) == 2
    assert threads[0].startswith("step")


def test_errors_pass_through_every_step(pool: concurrent.futures.ThreadPoolExecutor) -> None:
    failed: APIFuture[int] = APIFuture()
    error = KeyError("k")
    out = then(failed, lambda value: value, run=pool.submit)
    failed.set_exception(error)
    assert out.exception(timeout=1) is error

    raising = then(APIFuture.completed(1), lambda value: 1 // 0, run=pool.submit)
    assert isinstance(raising.exception(timeout=1), ZeroDivisionError)

    inner_error = then(APIFuture.completed(1), lambda value: APIFuture.failed(error))
    assert inner_error.exception(timeout=1) is error

    def refuse(call: object) -> concurrent.futures.Future[object]:
        raise RuntimeError("cannot schedule new futures after shutdown")

    refused = then(APIFuture.completed(1), lambda value: value, run=refuse)
    assert isinstance(refused.exception(timeout=1), RuntimeError)


def test_cancelling_goes_both_ways() -> None:
    source: APIFuture[int] = APIFuture()
    out = then(source, lambda value: value)
    assert out.cancel()
    assert source.cancelled()

    source2: APIFuture[int] = APIFuture()
    out2 = then(source2, lambda value: value)
    source2.cancel()
    assert out2.cancelled()


def test_flatten_gives_the_inner_futures_outcome() -> None:
    inner: APIFuture[str] = APIFuture()
    outer: APIFuture[concurrent.futures.Future[str]] = APIFuture.completed(inner)
    flat = flatten(outer)
    assert not flat.done()
    inner.set_result("x")
    assert flat.result(timeout=1) == "x"
