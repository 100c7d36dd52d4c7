"""Future and poller tests against a scripted loopback server (no real sleeps: FakeClock)."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.holder import requestor_for
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    DropMidBody,
    FakeClock,
    Hang,
    Recorded,
    Reply,
    Respond,
    ScriptedServer,
    TruncatedJSON,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import types
from tinker_lite._api import Requestor
from tinker_lite._codec import wire as _wire
from tinker_lite._errors import (
    APIResponseValidationError,
    APITimeoutError,
    BadRequestError,
    PromiseExpiredError,
    RequestErrorCategory,
    RequestFailedError,
    TinkerError,
)
from tinker_lite._futures.answers import QueueStateLogger, default_queue_reason
from tinker_lite._futures.future import APIFuture, FutureTimeoutError, chain, combine
from tinker_lite._futures.poller import Poller
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import ClientClosedError, Timeout

RETRIEVE = "/api/v1/retrieve_future"
WALL = 1_700_000_000.0


def try_again(request_id: str = "req-1", state: str = "active", **extra: Any) -> Reply:
    return Reply(
        200, {"type": "try_again", "request_id": request_id, "queue_state": state, **extra}
    )


def held(action: Any, clock: FakeClock, seconds: float = 1.5) -> Respond:
    """``action``, answered after the service held the poll ``seconds`` (on the fake clock)."""

    def respond(_: Recorded) -> Any:
        clock.advance(seconds)
        return action

    return Respond(respond)


def decode_optim(resp: HttpResponse) -> types.OptimStepResponse:
    return _wire.structure(resp.json(), types.OptimStepResponse)


def decode_json(resp: HttpResponse) -> Any:
    return resp.json()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api(server: ScriptedServer) -> Iterator[Requestor]:
    requestor = requestor_for(server.url)
    yield requestor
    requestor.close()


@pytest.fixture
def make_poller(api: Requestor, clock: FakeClock) -> Iterator[Callable[..., Poller]]:
    made: list[Poller] = []

    def make(**kwargs: Any) -> Poller:
        options: dict[str, Any] = {
            "clock": clock,
            "sleep": clock.sleep,
            "rand": lambda: 0.0,
            "wall_clock": lambda: WALL,
        }
        options.update(kwargs)
        poller = Poller(api.retrieve_future, abort=api.abort_polls, **options)
        made.append(poller)
        return poller

    yield make
    for poller in made:
        poller.close()
        assert poller.thread_count == 0


@pytest.fixture
def poller(make_poller: Callable[..., Poller]) -> Poller:
    return make_poller()


# -- the happy path and its headers -----------------------------------------------------------


def test_try_again_repolls_at_once_with_the_golden_headers(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    # docs/protocol.rst §5.2: a try_again after a held poll (long-poll) is followed at once.
    server.on(
        "POST",
        RETRIEVE,
        held(try_again(), clock),
        held(try_again(), clock),
        held(try_again(), clock),
        Reply(200, {"metrics": {"loss:sum": 1.5}}),
    )
    future = poller.poll("req-1", "OptimStep", decode_optim, created_at=clock() - 0.25)
    assert future.result(timeout=10) == types.OptimStepResponse(metrics={"loss:sum": 1.5})
    assert future.result() is future.result()  # cached
    polls = server.requests(RETRIEVE)
    assert len(polls) == 4
    assert clock.sleeps == []
    for i, poll in enumerate(polls):
        # docs/protocol.rst §5.4: a metadata-only answer stays allowed until the service has
        # given one.
        assert poll.json() == {"request_id": "req-1", "allow_metadata_only": True}
        assert poll.body == b'{"request_id":"req-1","allow_metadata_only":true}'
        assert poll.header("X-Tinker-Request-Iteration") == str(i)
        assert poll.header("X-Tinker-Request-Type") == "OptimStep"
        assert poll.header("X-Stainless-Raw-Response") == "raw"
        assert poll.header("Accept") == "application/json"
        assert poll.header("Content-Type") == "application/json"
        assert poll.header("X-API-Key") == API_KEY
        assert poll.header("x-stainless-read-timeout") == "45"
        assert poll.header("X-Idempotency-Key")
    assert polls[0].header("X-Tinker-Create-Promise-Roundtrip-Time") == "0.25"
    assert all(p.header("X-Tinker-Create-Promise-Roundtrip-Time") is None for p in polls[1:])


def test_result_is_delivered_as_soon_as_the_long_poll_answers(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    ready = threading.Event()

    def long_poll(_: Recorded) -> Reply:
        ready.wait(10)
        return Reply(200, {"metrics": {}})

    server.on("POST", RETRIEVE, Respond(long_poll))
    future = poller.poll("req-1", "OptimStep", decode_optim, created_at=clock())
    server.wait_for(RETRIEVE, 1)
    started = time.perf_counter()
    ready.set()
    future.result(timeout=10)
    # Event-driven delivery: far below any sleep-polling interval.
    assert time.perf_counter() - started < 0.5


def test_the_sdk_method_and_accept(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    seen: list[HttpResponse] = []

    def decode(resp: HttpResponse) -> bytes:
        seen.append(resp)
        return resp.body

    server.on(
        "POST",
        RETRIEVE,
        Reply(200, body=b"\x0a\x03abc", content_type="application/x-protobuf"),
    )
    future = poller.poll(
        "req-1",
        "Sample",
        decode,
        created_at=clock(),
        accept="application/x-protobuf",
        sdk_method="SamplingClient.sample",
    )
    assert future.result(timeout=10) == b"\x0a\x03abc"
    assert seen[0].is_protobuf
    poll = server.requests(RETRIEVE)[0]
    assert poll.header("Accept") == "application/x-protobuf"
    assert poll.header("x-sdk-method") == "SamplingClient.sample"
    assert poll.header("x-sdk-version") == "0.38.0"


def test_metadata_only_answer_is_fetched_with_a_second_poll(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    server.on(
        "POST",
        RETRIEVE,
        Reply(200, {"status": "complete_metadata", "response_payload_size": 12}),
        Reply(200, {"metrics": {}}),
    )
    assert poller.poll("req-1", "OptimStep", decode_optim, created_at=clock()).result(10)
    # docs/protocol.rst §5.4 (0.38): the first poll allows the metadata-only answer, the next
    # one not.
    assert [p.json()["allow_metadata_only"] for p in server.requests(RETRIEVE)] == [True, False]


# -- queue states ---------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["active", "paused_rate_limit", "paused_capacity", "new_state"])
def test_408_with_each_queue_state_repolls_at_once(
    server: ScriptedServer, poller: Poller, clock: FakeClock, state: str
) -> None:
    server.on(
        "POST",
        RETRIEVE,
        held(Reply(408, {"queue_state": state, "queue_state_reason": "because"}), clock),
        held(Reply(408, {"queue_state": state}), clock),
        held(Reply(408, body=b"not json"), clock),
        held(try_again(state=state), clock),
        Reply(200, {"metrics": {}}),
    )
    seen: list[tuple[str, str | None]] = []
    future = poller.poll(
        "req-1",
        "ForwardBackward",
        decode_optim,
        created_at=clock(),
        on_queue_state=lambda s, r: seen.append((s, r)),
    )
    future.result(timeout=10)
    assert seen == [(state, "because"), (state, None), (state, None)]
    assert future.queue_state == state
    assert clock.sleeps == []
    assert len(server.requests(RETRIEVE)) == 5


def test_queue_state_logger_logs_paused_states_at_most_once_a_minute(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    log = QueueStateLogger("Training", "model-1", kind="training", clock=clock)
    with caplog.at_level(logging.WARNING, logger="tinker_lite.futures"):
        log("active", None)
        log("paused_rate_limit", None)
        clock.advance(30)
        log("paused_capacity", None)
        clock.advance(31)
        log("paused_capacity", "maintenance window.")
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert messages == [
        "Training for model-1 is paused. Reason: concurrent training clients rate limit hit.",
        "Training for model-1 is paused. Reason: maintenance window.",
    ]
    assert default_queue_reason("paused_rate_limit", "sampling") == (
        "concurrent sampler weights limit hit"
    )
    assert default_queue_reason("paused_capacity") == (
        "Tinker backend is running short on capacity, please wait"
    )
    assert default_queue_reason("weird") == "unknown"


def test_paused_polls_log_once_per_owner(
    server: ScriptedServer, poller: Poller, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    server.on("POST", RETRIEVE, *[Reply(408, {"queue_state": "paused_capacity"})] * 5)
    server.on("POST", RETRIEVE, Reply(200, {"metrics": {}}))
    with caplog.at_level(logging.WARNING, logger="tinker_lite.futures"):
        poller.poll("req-1", "OptimStep", decode_optim, created_at=clock()).result(10)
    paused = [r for r in caplog.records if "is paused" in r.getMessage()]
    assert len(paused) == 1
    assert "running short on capacity" in paused[0].getMessage()


# -- terminal outcomes ------------------------------------------------------------------------


def test_410_without_resubmit_raises_promise_expired(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    server.on("POST", RETRIEVE, Reply(410, {"detail": "expired"}))
    future = poller.poll("req-7", "ForwardBackward", decode_optim, created_at=clock())
    with pytest.raises(PromiseExpiredError) as info:
        future.result(timeout=10)
    err = info.value
    assert err.status_code == 410
    assert err.request_id == "req-7"
    assert err.retryable
    assert "req-7" in str(err)
    assert "ForwardBackward" in str(err)


def test_410_with_resubmit_polls_the_new_request(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    def answer(request: Recorded) -> Reply:
        if request.json()["request_id"] == "req-1":
            return Reply(410, {})
        return Reply(200, {"sequences": [{"stop_reason": "length", "tokens": [1, 2]}]})

    server.default("POST", RETRIEVE, Respond(answer))
    resubmits: list[int] = []

    def resubmit() -> str:
        resubmits.append(1)
        return "req-2"

    future = poller.poll("req-1", "Sample", decode_json, created_at=clock(), resubmit=resubmit)
    assert future.result(timeout=10)["sequences"][0]["tokens"] == [1, 2]
    assert future.request_id == "req-2"
    assert resubmits == [1]
    polls = server.requests(RETRIEVE)
    assert [p.json()["request_id"] for p in polls] == ["req-1", "req-2"]
    assert [p.header("X-Tinker-Request-Iteration") for p in polls] == ["0", "0"]


def test_a_resubmitted_request_is_polled_from_the_start(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    # docs/protocol.rst §5.4: a new request's first poll allows the metadata-only answer again.
    server.on(
        "POST",
        RETRIEVE,
        Reply(200, {"status": "complete_metadata", "response_payload_size": 12}),
        Reply(410, {}),
        Reply(200, {"sequences": []}),
    )
    future = poller.poll(
        "req-1", "Sample", decode_json, created_at=clock(), resubmit=lambda: "req-2"
    )
    assert future.result(timeout=10) == {"sequences": []}
    polls = [p.json() for p in server.requests(RETRIEVE)]
    assert [(p["request_id"], p["allow_metadata_only"]) for p in polls] == [
        ("req-1", True),
        ("req-1", False),
        ("req-2", True),
    ]


def test_resubmits_are_bounded(
    make_poller: Callable[..., Poller], server: ScriptedServer, clock: FakeClock
) -> None:
    poller = make_poller(max_resubmits=3)
    server.default("POST", RETRIEVE, Reply(410, {}))
    counter = iter(range(100))
    future = poller.poll(
        "req-0",
        "Sample",
        decode_json,
        created_at=clock(),
        resubmit=lambda: f"req-{next(counter) + 1}",
    )
    with pytest.raises(PromiseExpiredError):
        future.result(timeout=10)
    assert len(server.requests(RETRIEVE)) == 4


@pytest.mark.parametrize(
    ("category", "expected"),
    [
        ("user", RequestErrorCategory.USER),
        ("server", RequestErrorCategory.SERVER),
        ("Server", RequestErrorCategory.SERVER),
        (None, RequestErrorCategory.UNKNOWN),
        ("surprise", RequestErrorCategory.UNKNOWN),
    ],
)
def test_error_results_raise_request_failed(
    server: ScriptedServer,
    poller: Poller,
    clock: FakeClock,
    category: str | None,
    expected: RequestErrorCategory,
) -> None:
    body: dict[str, Any] = {"error": "target_tokens length mismatch"}
    if category is not None:
        body["category"] = category
    server.on("POST", RETRIEVE, Reply(200, body))
    future = poller.poll("req-3", "ForwardBackward", decode_optim, created_at=clock())
    with pytest.raises(RequestFailedError) as info:
        future.result(timeout=10)
    err = info.value
    assert err.category is expected
    assert err.request_id == "req-3"
    assert "target_tokens length mismatch" in str(err)
    assert future.exception() is err


def test_other_4xx_are_terminal(server: ScriptedServer, poller: Poller, clock: FakeClock) -> None:
    server.on("POST", RETRIEVE, Reply(400, {"detail": "bad request id"}))
    future = poller.poll("req-4", "OptimStep", decode_optim, created_at=clock())
    with pytest.raises(BadRequestError) as info:
        future.result(timeout=10)
    assert info.value.request_id == "req-4"
    assert clock.sleeps == []


def test_truncated_json_result_is_a_validation_error(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    server.on("POST", RETRIEVE, TruncatedJSON(text=b'{"metrics": {"lo'))
    future = poller.poll("req-5", "OptimStep", decode_optim, created_at=clock())
    with pytest.raises(APIResponseValidationError) as info:
        future.result(timeout=10)
    assert info.value.request_id == "req-5"


def test_result_that_does_not_decode_is_a_validation_error(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    server.on("POST", RETRIEVE, Reply(200, {"path": 3}))
    future = poller.poll(
        "req-6",
        "SaveWeights",
        lambda r: _wire.structure(r.json(), types.SaveWeightsResponse),
        created_at=clock(),
    )
    with pytest.raises(APIResponseValidationError) as info:
        future.result(timeout=10)
    assert "req-6" in str(info.value)


# -- back-off -------------------------------------------------------------------------------


def test_5xx_burst_backs_off_with_jitter(
    make_poller: Callable[..., Poller], server: ScriptedServer, clock: FakeClock
) -> None:
    poller = make_poller(rand=lambda: 0.5)
    server.on("POST", RETRIEVE, Reply(500), Reply(503), Reply(502), Reply(200, {"metrics": {}}))
    poller.poll("req-1", "OptimStep", decode_optim, created_at=clock()).result(10)
    assert clock.sleeps == [0.875, 1.75, 3.5]  # min(2**n, 30) * (1 - 0.25 * 0.5)
    assert [p.header("X-Tinker-Request-Iteration") for p in server.requests(RETRIEVE)] == [
        "0",
        "1",
        "2",
        "3",
    ]


def test_429_honours_retry_after(server: ScriptedServer, poller: Poller, clock: FakeClock) -> None:
    server.on(
        "POST",
        RETRIEVE,
        Reply(429, headers={"Retry-After": "7"}),
        Reply(429),
        Reply(200, {"metrics": {}}),
    )
    poller.poll("req-1", "OptimStep", decode_optim, created_at=clock()).result(10)
    assert clock.sleeps == [7.0, 2.0]


def test_dropped_connection_and_read_timeout_back_off(
    make_poller: Callable[..., Poller], server: ScriptedServer, clock: FakeClock
) -> None:
    poller = make_poller(poll_timeout=Timeout(connect=1.0, read=0.2))
    server.on(
        "POST",
        RETRIEVE,
        DropMidBody(),
        Hang(),
        held(try_again(), clock),
        Reply(200, {"metrics": {}}),
    )
    poller.poll("req-1", "OptimStep", decode_optim, created_at=clock()).result(10)
    assert clock.sleeps == [1.0, 2.0]
    assert len(server.requests(RETRIEVE)) == 4


def test_stall_timeout_fails_with_request_id_state_and_elapsed(
    make_poller: Callable[..., Poller], server: ScriptedServer, clock: FakeClock
) -> None:
    poller = make_poller(stall_timeout=60.0)
    server.on("POST", RETRIEVE, Reply(408, {"queue_state": "paused_capacity"}))
    server.default("POST", RETRIEVE, Reply(503))
    start = clock()
    future = poller.poll("req-9", "ForwardBackward", decode_optim, created_at=start)
    with pytest.raises(APITimeoutError) as info:
        future.result(timeout=10)
    err = info.value
    assert not isinstance(err, FutureTimeoutError)
    assert err.request_id == "req-9"
    assert err.queue_state == "paused_capacity"
    assert err.elapsed == pytest.approx(60.0)
    assert "req-9" in str(err)
    assert "paused_capacity" in str(err)
    assert "HTTP 503" in str(err)
    assert sum(clock.sleeps) == pytest.approx(60.0)


def test_caller_timeout_raises_a_rich_timeout_error(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    server.on("POST", RETRIEVE, held(Reply(408, {"queue_state": "paused_rate_limit"}), clock))
    server.default("POST", RETRIEVE, Hang())
    start = clock()
    future = poller.poll("req-2", "Sample", decode_json, created_at=start)
    server.wait_for(RETRIEVE, 2)
    clock.advance(12.5 - (clock() - start))
    with pytest.raises(FutureTimeoutError) as info:
        future.result(timeout=0.01)
    err = info.value
    assert isinstance(err, APITimeoutError)
    assert isinstance(err, concurrent.futures.TimeoutError)  # the builtin TimeoutError from 3.11
    assert err.request_id == "req-2"
    assert err.queue_state == "paused_rate_limit"
    assert err.elapsed == pytest.approx(12.5)
    assert "req-2" in str(err)
    assert "Sample" in str(err)
    with pytest.raises(FutureTimeoutError):
        future.exception(timeout=0.01)
    # In flight on the service, as the official SDK's future: pending, not running.
    assert not future.running()
    assert not future.done()


# -- threads --------------------------------------------------------------------------------


class Boom(BaseException):
    pass


def test_dead_worker_fails_its_future_and_is_replaced(
    make_poller: Callable[..., Poller], server: ScriptedServer, clock: FakeClock
) -> None:
    poller = make_poller(max_workers=1)
    server.default("POST", RETRIEVE, Respond(lambda r: Reply(200, {"id": r.json()["request_id"]})))

    def explode(resp: HttpResponse) -> Any:
        raise Boom("decoder crashed")

    doomed = poller.poll("req-1", "OptimStep", explode, created_at=clock())
    fine = poller.poll("req-2", "OptimStep", decode_json, created_at=clock())
    with pytest.raises(TinkerError) as info:
        doomed.result(timeout=10)
    assert isinstance(info.value.__cause__, Boom)
    assert "req-1" in str(info.value)
    assert fine.result(timeout=10) == {"id": "req-2"}


def test_a_thousand_futures_share_a_bounded_pool(
    make_poller: Callable[..., Poller], server: ScriptedServer, clock: FakeClock
) -> None:
    poller = make_poller(max_workers=8)
    seen: dict[str, int] = {}
    lock = threading.Lock()
    peak = [0]

    def answer(request: Recorded) -> Reply:
        rid = request.json()["request_id"]
        with lock:
            seen[rid] = seen.get(rid, 0) + 1
            count = seen[rid]
            peak[0] = max(peak[0], poller.thread_count)
        if count == 1:
            return try_again(rid)
        return Reply(200, {"id": rid})

    server.default("POST", RETRIEVE, Respond(answer))
    futures = [
        poller.poll(f"req-{i}", "Sample", decode_json, created_at=clock()) for i in range(1000)
    ]
    assert poller.thread_count <= 8
    _done, not_done = concurrent.futures.wait(futures, timeout=60)
    assert not not_done
    assert [f.result()["id"] for f in futures] == [f"req-{i}" for i in range(1000)]
    assert peak[0] <= 8
    assert len(server.requests(RETRIEVE)) == 2000


def test_close_fails_pending_futures_and_joins_threads(
    server: ScriptedServer, poller: Poller, clock: FakeClock
) -> None:
    server.default("POST", RETRIEVE, Hang())
    future = poller.poll("req-1", "OptimStep", decode_optim, created_at=clock())
    server.wait_for(RETRIEVE, 1)
    poller.close()
    assert isinstance(future.exception(timeout=5), ClientClosedError)
    assert poller.thread_count == 0
    late = poller.poll("req-2", "OptimStep", decode_optim, created_at=clock())
    assert isinstance(late.exception(timeout=1), ClientClosedError)


def test_cancel_stops_polling(server: ScriptedServer, poller: Poller, clock: FakeClock) -> None:
    release = threading.Event()
    server.on("POST", RETRIEVE, Respond(lambda r: (release.wait(10), try_again())[1]))
    server.default("POST", RETRIEVE, Reply(200, {"metrics": {}}))
    future = poller.poll("req-1", "OptimStep", decode_optim, created_at=clock())
    server.wait_for(RETRIEVE, 1)
    assert not future.running()
    assert future.cancel()
    release.set()
    assert future.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(timeout=1)
    assert not future.cancel() or future.cancelled()
    assert "pending=0" in repr(poller)


# -- APIFuture, combine, chain ---------------------------------------------------------------


def test_a_cancelled_future_is_done_for_wait_and_as_completed() -> None:
    cancelled: APIFuture[int] = APIFuture("a")
    pending: APIFuture[int] = APIFuture("b")
    assert cancelled.cancel()
    assert cancelled.cancel()  # a second cancel() is a no-op that says so
    done, not_done = concurrent.futures.wait([cancelled, pending], timeout=0)
    assert (done, not_done) == ({cancelled}, {pending})
    assert list(concurrent.futures.as_completed([cancelled], timeout=0)) == [cancelled]
    assert not cancelled.try_set_result(1)


def test_running_means_an_outcome_is_being_delivered() -> None:
    future: APIFuture[int] = APIFuture("c")
    assert not future.running()  # in flight on the service: pending, and cancellable
    assert future.set_running_or_notify_cancel()
    assert future.running()
    assert not future.cancel()  # as for an executor's call that started
    assert not future.try_set_result(1)  # another producer is delivering
    future.set_result(2)
    assert not future.running()
    assert future.result(0) == 2


def test_one_of_racing_producers_delivers() -> None:
    future: APIFuture[int] = APIFuture("d")
    barrier = threading.Barrier(8)
    won: list[int] = []

    def produce(value: int) -> None:
        barrier.wait(30)
        if future.try_set_result(value):
            won.append(value)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(won) == 1
    assert future.result(0) == won[0]


def test_completed_and_failed_helpers() -> None:
    ok = APIFuture.completed(3, request_id="r")
    assert ok.done()
    assert ok.result() == 3
    assert ok.request_id == "r"
    assert not ok.running()
    err = ValueError("x")
    bad = APIFuture.failed(err)
    assert bad.exception() is err
    with pytest.raises(ValueError, match="x"):
        bad.result()
    assert "failed" in repr(bad)
    assert "done" in repr(ok)


def test_combine_merges_in_order_and_fails_fast() -> None:
    a: APIFuture[int] = APIFuture("a")
    b: APIFuture[int] = APIFuture("b")
    merged = combine([a, b], sum)
    assert not merged.done()
    assert merged.request_id == "a"
    b.set_result(2)
    a.set_result(1)
    assert merged.result(timeout=1) == 3

    c: APIFuture[int] = APIFuture("c")
    d: APIFuture[int] = APIFuture("d")
    failing = combine([c, d], sum)
    c.set_exception(RequestFailedError("no", request_id="c"))
    with pytest.raises(RequestFailedError):
        failing.result(timeout=1)

    e: APIFuture[int] = APIFuture("e")
    broken = combine([e], lambda values: 1 // 0)
    e.set_result(1)
    assert isinstance(broken.exception(timeout=1), ZeroDivisionError)

    assert combine([], len).result() == 0


def test_combined_timeout_names_pending_requests_and_cancel_propagates() -> None:
    a: APIFuture[int] = APIFuture("a", request_type="ForwardBackward")
    b: APIFuture[int] = APIFuture("b", request_type="ForwardBackward")
    a.set_result(1)
    merged = combine([a, b], sum, request_type="ForwardBackward")
    with pytest.raises(FutureTimeoutError) as info:
        merged.result(timeout=0.001)
    assert info.value.request_id == "b"
    assert merged.cancel()
    assert b.cancelled()


def test_chain_maps_results_and_passes_errors() -> None:
    src: APIFuture[int] = APIFuture("s", request_type="Sample")
    mapped = chain(src, lambda v: v * 10)
    assert mapped.request_type == "Sample"
    assert mapped.request_id == "s"
    src.set_result(4)
    assert mapped.result(timeout=1) == 40
    src2: APIFuture[int] = APIFuture("t")
    mapped2 = chain(src2, lambda v: v)
    src2.set_exception(KeyError("k"))
    assert isinstance(mapped2.exception(timeout=1), KeyError)


def test_works_with_concurrent_futures_helpers() -> None:
    futures: list[APIFuture[int]] = [APIFuture(str(i)) for i in range(3)]
    for i, f in enumerate(futures):
        f.set_result(i)
    done, _ = concurrent.futures.wait(futures, timeout=1)
    assert len(done) == 3
    assert sorted(f.result() for f in concurrent.futures.as_completed(futures)) == [0, 1, 2]
    got: list[int] = []
    futures[0].add_done_callback(lambda f: got.append(f.result()))
    assert got == [0]
