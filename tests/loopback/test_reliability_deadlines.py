"""Every wait has a deadline (docs/protocol.rst §5.2, §6), measured on a fake clock (no sleeps).

One row per reliability defect the scattered retry loops had:

* a request whose server refuses connections must fail within its stall timeout (+1 s);
* a frozen server (connections accepted, never answered) must fail within the stall timeout,
  the submit's own retries included;
* a server that answers ``try_again`` at once is polled 0.1 s doubling to 1 s apart, not in a
  hot loop, and an expired ``result(timeout=...)`` leaves no polling behind;
* the first retry the caller cannot see is logged at WARNING, naming what and until when;
* the sampling 429 loop ends at the stall timeout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
import urllib3.exceptions

from tests.support.holder import holder_from, requestor_for, requestor_of
from tests.support.reliability import (
    BASE_MODEL,
    LORA_RANK,
    LORA_SEED,
    VirtualClock,
    make_client,
    record,
    sft_batch,
    start_server,
)
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    FakeClock,
    Recorded,
    Reply,
    Respond,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import APIConnectionError, APITimeoutError, RateLimitError, types
from tinker_lite._api import Requestor
from tinker_lite._futures.future import APIFuture, FutureTimeoutError, combine
from tinker_lite._futures.poller import Poller
from tinker_lite._session.holder import SessionHolder
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import DEFAULT_TIMEOUT, PoolKind, Timeout, Transport
from tinker_lite.local import LocalServer
from tinker_lite.service_client import ServiceClient

RETRIEVE = "/api/v1/retrieve_future"
OPTIM = "/api/v1/optim_step"
WALL = 1_700_000_000.0
BODY = b'{"model_id":"m","seq_id":7,"type":"optim_step"}'


def _service(server: ScriptedServer) -> None:
    server.default("POST", "/api/v1/client/config", Reply(200, {"proto_write_fwdbwd": False}))
    server.default("POST", "/api/v1/create_session", Reply(200, {"session_id": "sess-1"}))
    server.default("POST", "/api/v1/session_heartbeat", Reply(200, {"type": "ok"}))
    server.default("POST", "/api/v1/sessions/sess-1/finish", Reply(204))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_holder(server: ScriptedServer, clock: FakeClock) -> Iterator[Callable[..., SessionHolder]]:
    made: list[SessionHolder] = []
    _service(server)

    def make(stall_timeout: float) -> SessionHolder:
        holder = holder_from(
            api_key=API_KEY,
            base_url=server.url,
            telemetry=False,
            stall_timeout=stall_timeout,
            sleep=clock.sleep,
            rand=lambda: 0.0,
            clock=clock,
            wall_clock=lambda: WALL,
            heartbeat_wait=lambda seconds: threading.Event().wait(30.0),
        )
        made.append(holder)
        return holder

    yield make
    for holder in made:
        holder.close(timeout=5)


@pytest.fixture
def make_poller(server: ScriptedServer, clock: FakeClock) -> Iterator[Callable[..., Poller]]:
    made: list[tuple[Poller, Requestor]] = []

    def make(base_url: str | None = None, **kwargs: Any) -> Poller:
        api = requestor_for(base_url or server.url)
        options: dict[str, Any] = {
            "clock": clock,
            "sleep": clock.sleep,
            "rand": lambda: 0.0,
            "wall_clock": lambda: WALL,
        }
        options.update(kwargs)
        poller = Poller(api.retrieve_future, abort=api.abort_polls, **options)
        made.append((poller, api))
        return poller

    yield make
    for poller, api in made:
        poller.close()
        api.close()
        assert poller.thread_count == 0


def _closed_port_url() -> str:
    """A loopback URL where nothing listens: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _decode(resp: HttpResponse) -> Any:
    return resp.json()


def _retry_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "tinker_lite.retry"
    ]


def _freeze(
    monkeypatch: pytest.MonkeyPatch, advance: Callable[[float], object], path: str
) -> list[Timeout]:
    """Make ``path`` frozen: every attempt waits out its read timeout on the fake clock."""
    real = Transport.send
    waits: list[Timeout] = []

    def send_once(self: Transport, pool: PoolKind, method: str, p: str, **kw: Any) -> Any:
        if p != path:
            return real(self, pool, method, p, **kw)
        timeout: Timeout = kw.get("timeout", DEFAULT_TIMEOUT)
        waits.append(timeout)
        advance(timeout.read)
        raise APITimeoutError(f"Request timed out: {method} {p} (read timeout {timeout.read}s)")

    monkeypatch.setattr(Transport, "send", send_once)
    return waits


@contextlib.contextmanager
def _local_service(
    stall_timeout: float,
) -> Iterator[tuple[LocalServer, ServiceClient, VirtualClock]]:
    """A client of a fresh local server whose retry waits run on a virtual clock."""
    clock = VirtualClock()
    server = start_server()
    try:
        with make_client(
            server.base_url, stall_timeout=stall_timeout, sleep=clock.sleep, clock=clock
        ) as service:
            yield server, service, clock
    finally:
        server.stop()


def _trainer(service: ServiceClient) -> Any:
    return service.create_lora_training_client(BASE_MODEL, rank=LORA_RANK, seed=LORA_SEED).result()


# -- connection refused: the stall timeout bounds the submit and the poll ---------------------


def test_refused_submit_fails_within_the_stall_timeout(
    server: ScriptedServer,
    make_holder: Callable[..., SessionHolder],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    holder = make_holder(stall_timeout=3.0)
    server.close()  # from now on every connection is refused
    start = clock()
    with pytest.raises(APIConnectionError) as caught:
        requestor_of(holder).call("POST", OPTIM, body=BODY)
    elapsed = clock() - start
    # Before: the 5-minute operation budget ran regardless of the stall timeout (300 s).
    assert 3.0 <= elapsed <= 4.0, elapsed
    assert "Connection refused" in str(caught.value)
    assert "POST /api/v1/optim_step" in str(caught.value)
    # docs/protocol.rst §6.6: the first invisible retry is logged at WARNING, once per request.
    warnings = _retry_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "POST /api/v1/optim_step" in warnings[0]
    assert "Connection refused" in warnings[0]
    assert "for up to 3 s more, until" in warnings[0]
    record(
        "d1",
        fault="connection refused on submit, stall_timeout=3",
        workload="submit",
        result=type(caught.value).__name__,
        seconds=elapsed,
    )


def test_refused_polls_fail_within_the_stall_timeout(
    make_poller: Callable[..., Poller], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    poller = make_poller(_closed_port_url(), stall_timeout=3.0)
    start = clock()
    future = poller.poll("req-1", "OptimStep", _decode, created_at=start)
    with pytest.raises(APITimeoutError) as caught:
        future.result(timeout=30)
    elapsed = clock() - start
    assert 3.0 <= elapsed <= 4.0, elapsed
    assert "stall timeout 3s" in str(caught.value)
    assert "Connection refused" in str(caught.value)
    warnings = _retry_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "Polling request req-1 (OptimStep)" in warnings[0]
    assert "until" in warnings[0]


def test_refused_training_future_fails_within_the_stall_timeout() -> None:
    """End to end: the server goes away mid-run; stall_timeout=3 ends the next future at ~3 s."""
    with _local_service(stall_timeout=3.0) as (server, service, clock):
        trainer = _trainer(service)
        trainer.forward_backward(sft_batch(0), "cross_entropy").result(timeout=10)
        server.pause_listening()
        start = clock()
        optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
        with pytest.raises(APIConnectionError) as caught:
            optim.result(timeout=30)
        elapsed = clock() - start
    # Before: 265-301 s (the 5-minute submit budget); now the stall timeout plus at most 1 s.
    assert 3.0 <= elapsed <= 4.0, elapsed
    assert "POST /api/v1/optim_step" in str(caught.value)


# -- a frozen server ----------------------------------------------------------------------------


def test_frozen_submit_fails_within_the_stall_timeout(
    make_holder: Callable[..., SessionHolder],
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder = make_holder(stall_timeout=5.0)
    waits = _freeze(monkeypatch, clock.advance, OPTIM)
    start = clock()
    with pytest.raises(APITimeoutError) as caught:
        requestor_of(holder).call("POST", OPTIM, body=BODY)
    elapsed = clock() - start
    # Before: each attempt waited its full read timeout for 5 minutes (300+ s).
    assert 5.0 <= elapsed <= 6.0, elapsed
    assert all(w.read <= 5.0 for w in waits)
    assert "POST /api/v1/optim_step" in str(caught.value)
    record(
        "d2",
        fault="frozen server on submit, stall_timeout=5",
        workload="submit",
        result=type(caught.value).__name__,
        seconds=elapsed,
    )


def test_frozen_server_ends_a_training_future_within_the_stall_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end: optim_step is never answered; stall_timeout=5 ends the future at ~5 s."""
    with _local_service(stall_timeout=5.0) as (_, service, clock):
        trainer = _trainer(service)
        _freeze(monkeypatch, clock.sleep, OPTIM)
        start = clock()
        optim = trainer.optim_step(types.AdamParams(learning_rate=1e-2))
        with pytest.raises(APITimeoutError) as caught:
            optim.result(timeout=60)  # a real-time guard only: the fake clock runs out first
        elapsed = clock() - start
    # Before: 300 s (the submit's own retries ignored the stall bound).
    assert 5.0 <= elapsed <= 6.0, elapsed
    assert "POST /api/v1/optim_step" in str(caught.value)


def test_frozen_polls_fail_within_the_stall_timeout(
    make_poller: Callable[..., Poller], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _freeze(monkeypatch, clock.advance, RETRIEVE)
    poller = make_poller(stall_timeout=5.0)
    start = clock()
    future = poller.poll("req-1", "OptimStep", _decode, created_at=start)
    with pytest.raises(APITimeoutError) as caught:
        future.result(timeout=30)
    elapsed = clock() - start
    assert 5.0 <= elapsed <= 6.0, elapsed
    assert "stall timeout 5s" in str(caught.value)


# -- try_again at once: paced, and parked when nobody waits ----------------------------------


def _try_again(request_id: str) -> Reply:
    return Reply(200, {"type": "try_again", "request_id": request_id, "queue_state": "active"})


def test_try_again_answered_at_once_is_paced(
    server: ScriptedServer, make_poller: Callable[..., Poller], clock: FakeClock
) -> None:
    server.on("POST", RETRIEVE, *[_try_again("req-1") for _ in range(8)])
    server.on("POST", RETRIEVE, Reply(200, {"metrics": {}}))
    poller = make_poller()
    start = clock()
    poller.poll("req-1", "OptimStep", _decode, created_at=start).result(timeout=10)
    # docs/protocol.rst §5.2: 0.1 s doubling to 1 s. Before: no pause at all (~900 polls a second).
    assert clock.sleeps == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    polls = len(server.requests(RETRIEVE))
    assert polls == 9
    record(
        "d3",
        fault="try_again answered at once",
        workload="poll",
        result="paced",
        seconds=clock() - start,
        polls_per_second=round(polls / (clock() - start), 2),
    )


def test_a_held_poll_resets_the_pacing(
    server: ScriptedServer, make_poller: Callable[..., Poller], clock: FakeClock
) -> None:
    def held(_: Recorded) -> Reply:
        clock.advance(1.5)
        return _try_again("req-1")

    server.on("POST", RETRIEVE, _try_again("req-1"), _try_again("req-1"), Respond(held))
    server.on("POST", RETRIEVE, _try_again("req-1"), Reply(200, {"metrics": {}}))
    make_poller().poll("req-1", "OptimStep", _decode, created_at=clock()).result(timeout=10)
    assert clock.sleeps == [0.1, 0.2, 0.1]


def _by_request(answers: dict[str, Callable[[], Reply]]) -> Respond:
    def respond(recorded: Recorded) -> Reply:
        return answers[json.loads(recorded.body)["request_id"]]()

    return Respond(respond)


def test_an_expired_wait_leaves_no_hot_poll_behind(
    server: ScriptedServer, make_poller: Callable[..., Poller], clock: FakeClock
) -> None:
    answers: dict[str, Callable[[], Reply]] = {
        "req-1": lambda: _try_again("req-1"),
        "req-2": lambda: Reply(200, {"metrics": {"n": 2}}),
    }
    server.default("POST", RETRIEVE, _by_request(answers))
    poller = make_poller(max_workers=2)
    future = poller.poll("req-1", "OptimStep", _decode, created_at=clock())
    with pytest.raises(FutureTimeoutError):
        future.result(timeout=0.05)
    # Before: the poll went on in a hot loop after the caller gave up.
    assert poller.wait_parked(1, timeout=10)
    polls = len([r for r in server.requests(RETRIEVE) if r.json()["request_id"] == "req-1"])
    # The pool keeps working for others while req-1 is parked ...
    other = poller.poll("req-2", "OptimStep", _decode, created_at=clock())
    assert other.result(timeout=10) == {"metrics": {"n": 2}}
    # ... and has not polled req-1 once more.
    assert len([r for r in server.requests(RETRIEVE) if r.json()["request_id"] == "req-1"]) == (
        polls
    )
    assert not future.done()
    # Waiting again resumes the polls; the parked time does not count as a stall.
    answers["req-1"] = lambda: Reply(200, {"metrics": {"n": 1}})
    clock.advance(10_000.0)
    assert future.result(timeout=10) == {"metrics": {"n": 1}}
    assert poller.parked_count == 0


def test_an_expired_wait_on_a_forwarding_future_parks_its_source(
    server: ScriptedServer, make_poller: Callable[..., Poller], clock: FakeClock
) -> None:
    server.default("POST", RETRIEVE, _try_again("req-1"))
    poller = make_poller()
    out: APIFuture[Any] = APIFuture(request_type="OptimStep")
    out.forward_from(poller.poll("req-1", "OptimStep", _decode, created_at=clock()))
    with pytest.raises(FutureTimeoutError):
        out.result(timeout=0.05)
    assert poller.wait_parked(1, timeout=10)
    server.default("POST", RETRIEVE, Reply(200, {"metrics": {}}))
    assert out.result(timeout=10) == {"metrics": {}}


def test_an_expired_wait_on_a_combined_future_parks_every_source(
    server: ScriptedServer, make_poller: Callable[..., Poller], clock: FakeClock
) -> None:
    answers: dict[str, Callable[[], Reply]] = {
        "req-1": lambda: _try_again("req-1"),
        "req-2": lambda: _try_again("req-2"),
    }
    server.default("POST", RETRIEVE, _by_request(answers))
    poller = make_poller()
    chunks = [poller.poll(rid, "Forward", _decode, created_at=clock()) for rid in answers]
    merged = combine(chunks, lambda values: [v["n"] for v in values])
    with pytest.raises(FutureTimeoutError):
        merged.result(timeout=0.05)
    assert poller.wait_parked(2, timeout=10)
    answers["req-1"] = lambda: Reply(200, {"n": 1})
    answers["req-2"] = lambda: Reply(200, {"n": 2})
    assert merged.result(timeout=10) == [1, 2]


def test_a_long_polled_future_resolves_after_an_expired_wait(
    server: ScriptedServer, make_poller: Callable[..., Poller], clock: FakeClock
) -> None:
    release = threading.Event()

    def held(_: Recorded) -> Reply:
        release.wait(10)
        clock.advance(1.5)
        return Reply(200, {"metrics": {}})

    server.on("POST", RETRIEVE, Respond(held))
    future = make_poller().poll("req-1", "OptimStep", _decode, created_at=clock())
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    with pytest.raises(FutureTimeoutError):
        future.result(timeout=0.01)
    release.set()
    assert done.wait(10)  # nobody waits, yet the held poll still delivers the result
    assert future.result(0) == {"metrics": {}}


# -- docs/protocol.rst §6.6: the first invisible retry says so -------------------------------------


def test_first_5xx_poll_retry_is_a_warning_and_later_ones_are_not(
    server: ScriptedServer,
    make_poller: Callable[..., Poller],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.on("POST", RETRIEVE, Reply(503), Reply(502), Reply(500), Reply(200, {"metrics": {}}))
    make_poller(stall_timeout=60.0).poll("req-1", "OptimStep", _decode, created_at=clock()).result(
        timeout=10
    )
    warnings = _retry_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "HTTP 503" in warnings[0]
    assert "for up to 60 s more, until" in warnings[0]


def test_429_polls_are_not_warned_about(
    server: ScriptedServer,
    make_poller: Callable[..., Poller],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.on("POST", RETRIEVE, Reply(429), Reply(200, {"metrics": {}}))
    make_poller().poll("req-1", "OptimStep", _decode, created_at=clock()).result(timeout=10)
    assert _retry_warnings(caplog) == []


# -- the sampling 429 loop has a deadline -------------------------------------------------------


def test_sampling_429s_forever_end_at_the_stall_timeout() -> None:
    with _local_service(stall_timeout=5.0) as (server, service, clock):
        sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
        server.set_faults("path=/api/v1/asample,status=429")
        start = clock()
        future = sampler.sample(
            types.ModelInput.from_ints([1, 2, 3]), 1, types.SamplingParams(max_tokens=2)
        )
        # Before: the 429 loop had no deadline (FutureTimeoutError here, and a loop forever).
        with pytest.raises(RateLimitError) as caught:
            future.result(timeout=30)
        elapsed = clock() - start
    # It gives up as soon as the next 1 s window would end past the stall timeout.
    assert 4.0 <= elapsed <= 6.0, elapsed
    assert "stall timeout 5 s" in str(caught.value)
    assert "/api/v1/asample" in str(caught.value)


# -- the tests themselves cannot reach the network ---------------------------------------------


def test_tests_cannot_reach_beyond_loopback() -> None:
    with pytest.raises(OSError, match="beyond loopback"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("example.com", 443)
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        urllib3.request("GET", "http://example.com/", timeout=1, retries=False)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(("localhost", listener.getsockname()[1]), timeout=1):
            pass
