"""Retry tests: the pure policy, Layer A against a real loopback server, Layer B's budget."""

from __future__ import annotations

import email.utils
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests.support.holder import requests_over
from tests.support.scripted_server import (  # noqa: F401 - fixtures are used by name
    API_KEY,
    Drop,
    FakeClock,
    Hang,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite._errors import (
    APIConnectionError,
    APITimeoutError,
    BadRequestError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
)
from tinker_lite._session.sample_gate import SampleGate
from tinker_lite._transport.answers import HttpResponse
from tinker_lite._transport.http import (
    ClientClosedError,
    Timeout,
)
from tinker_lite._transport.loops import (
    RetryableStatus,
    RetryCallState,
    ServiceWait,
    at_attempt,
    download_backoff,
    http_backoff,
    operation_backoff,
    poll_backoff,
    retry_loop,
)
from tinker_lite._transport.retry import (
    DEFAULT_RETRY_POLICY,
    NO_RETRIES,
    RetryPolicy,
    StallWatch,
    is_retryable_error,
    parse_retry_after,
)

WALL = 1_700_000_000.0  # an integral epoch, so IMF-fixdates convert to exact deltas
BODY = b'{"model_id":"m","seq_id":7,"type":"optim_step"}'


@pytest.fixture
def transport(server: ScriptedServer) -> ScriptedServer:
    """The scripted server the requests of :func:`_send` go to."""
    return server


def _imf(offset: float) -> str:
    return email.utils.formatdate(WALL + offset, usegmt=True)


# -- pure decisions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (408, {}, True),
        (409, {}, True),
        (429, {}, True),
        (500, {}, True),
        (502, {}, True),
        (503, {}, True),
        (599, {}, True),
        (400, {}, False),
        (401, {}, False),
        (404, {}, False),
        (410, {}, False),
        (422, {}, False),
        (400, {"x-should-retry": "true"}, True),
        (503, {"x-should-retry": "false"}, False),
        (503, {"X-Should-Retry": "false"}, False),
        # exact lower-case compare (docs/protocol.rst §6.2)
        (503, {"x-should-retry": "False"}, True),
    ],
)
def test_should_retry(status: int, headers: Mapping[str, str], expected: bool) -> None:
    assert DEFAULT_RETRY_POLICY.should_retry(status, headers) is expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "2"}, 2.0),
        ({"Retry-After": "0.75"}, 0.75),
        ({"retry-after": _imf(30)}, 30.0),
        ({"retry-after": _imf(-30)}, -30.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: Mapping[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=WALL) == expected


def _backoffs(backoff: Any, count: int) -> list[float]:
    """The first ``count`` waits of a tenacity loop backing off with ``backoff`` (no
    Retry-After)."""
    return _waits(ServiceWait(RetryPolicy(), backoff), [HttpResponse(503, {}, b"")] * count)


def test_http_backoff_formula() -> None:
    # Retry-After and its bounds: test_every_loop_waits_what_the_service_asks and the next test.
    policy = RetryPolicy()
    assert _backoffs(http_backoff(policy, lambda: 0.0), 8) == [0.5, 1, 2, 4, 8, 10, 10, 10]
    # The jitter only shortens: by up to 25 % (docs/protocol.rst §6.2).
    assert _backoffs(http_backoff(policy, lambda: 1.0), 3)[2] == pytest.approx(1.5)


def test_operation_poll_and_download_backoffs() -> None:
    policy = RetryPolicy()
    assert _backoffs(operation_backoff(policy), 8) == [1, 2, 4, 8, 16, 30, 30, 30]
    # Polls (docs/protocol.rst §5.2): min(2**n, 30) with jitter (Retry-After: ServiceWait's).
    assert _backoffs(poll_backoff(policy, lambda: 0.0), 7) == [1, 2, 4, 8, 16, 30, 30]
    assert _backoffs(poll_backoff(policy, lambda: 0.5), 3)[2] == 3.5
    # Downloads: min(2**n, 30), counted on the loop's own failures.
    assert _backoffs(download_backoff(policy), 6) == [1, 2, 4, 8, 16, 30]
    state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]
    assert download_backoff(policy)(at_attempt(state, 10_001)) == 30.0  # no overflow


def test_try_again_pacing_and_the_429_window() -> None:
    policy = RetryPolicy()
    # docs/protocol.rst §5.2: a held poll (long-poll) is followed at once; fast answers are paced.
    assert policy.pace_delay(answered_in=1.0, fast_answers=0) == 0.0
    assert policy.pace_delay(answered_in=30.0, fast_answers=3) == 0.0
    assert [policy.pace_delay(0.002, n) for n in range(1, 8)] == [
        0.1,
        0.2,
        0.4,
        0.8,
        1.0,
        1.0,
        1.0,
    ]
    # docs/protocol.rst §6.4: Retry-After when 0 < delay <= 60 s, else 1 s.
    assert policy.honoured_retry_after({"Retry-After": "2.5"}, now=WALL) == 2.5
    assert policy.honoured_retry_after({"Retry-After": "61"}, now=WALL) is None
    assert policy.throttle_default == 1.0


def test_stall_watch_measures_silence_and_leaves_out_parked_time() -> None:
    clock = FakeClock()
    watch = StallWatch(10.0, clock)
    clock.advance(4.0)
    assert watch.remaining() == 6.0
    watch.park()
    clock.advance(100.0)
    watch.unpark()
    assert watch.silent_for() == 4.0
    watch.answered()
    assert watch.remaining() == 10.0
    clock.advance(10.0)
    assert watch.expired()


def _waits(
    wait: ServiceWait, answers: list[HttpResponse], clock: FakeClock | None = None
) -> list[float]:
    """The sleeps of a tenacity loop using ``wait`` whose attempts meet ``answers`` in turn."""
    clock = clock if clock is not None else FakeClock()
    start = len(clock.sleeps)
    left = list(answers)

    def attempt() -> str:
        if left:
            raise RetryableStatus(left.pop(0))
        return "done"

    loop = retry_loop(
        wait=wait,
        stop=lambda state: False,
        retry_on=lambda e: isinstance(e, RetryableStatus),
        sleep=clock.sleep,
    )
    assert loop(attempt) == "done"
    return clock.sleeps[start:]


RETRY_AFTER_FORMS = [
    ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # milliseconds win
    ({"Retry-After": "3"}, 3.0),
    ({"Retry-After": "0.25"}, 0.25),
    ({"Retry-After": _imf(20)}, 20.0),
    ({"Retry-After": "60"}, 60.0),
]
NOT_HONOURED = [{"Retry-After": _imf(-20)}, {"Retry-After": "120"}, {"Retry-After": "0"}, {}]
LOOPS: dict[str, tuple[Callable[[RetryCallState], float], list[float]]] = {
    "http": (http_backoff(RetryPolicy(), lambda: 0.0), [0.5, 1.0, 2.0]),
    "operation": (operation_backoff(RetryPolicy()), [1.0, 2.0, 4.0]),
    "poll": (poll_backoff(RetryPolicy(), lambda: 0.0), [1.0, 2.0, 4.0]),
    "throttle": (lambda state: RetryPolicy().throttle_default, [1.0, 1.0, 1.0]),
    "download": (download_backoff(RetryPolicy()), [1.0, 2.0, 4.0]),
}


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize(("headers", "expected"), RETRY_AFTER_FORMS)
def test_every_loop_waits_what_the_service_asks(
    loop: str, headers: dict[str, str], expected: float
) -> None:
    backoff, _ = LOOPS[loop]
    wait = ServiceWait(RetryPolicy(), backoff, wall_clock=lambda: WALL)
    assert _waits(wait, [HttpResponse(429, headers, b"")]) == [expected]


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize("headers", NOT_HONOURED)
def test_outside_0_to_60_seconds_every_loop_backs_off_its_own_way(
    loop: str, headers: dict[str, str]
) -> None:
    backoff, expected = LOOPS[loop]
    wait = ServiceWait(RetryPolicy(), backoff, wall_clock=lambda: WALL)
    assert _waits(wait, [HttpResponse(503, headers, b"")] * 3) == expected


def test_a_shared_window_holds_every_loop_that_shares_it() -> None:
    clock = FakeClock()
    gate = SampleGate(4, clock=clock)
    policy = RetryPolicy()
    throttled = ServiceWait(
        policy, lambda state: policy.throttle_default, wall_clock=lambda: WALL, window=gate
    )
    # A 429 asking for 2.5 s opens the window for everyone (this loop's sleep is not counted
    # on the gate's clock) ...
    assert _waits(throttled, [HttpResponse(429, {"Retry-After": "2.5"}, b"")]) == [2.5]
    # ... so a loop that finds it open (nothing sent, no wait of its own) waits it out too.
    waiting = ServiceWait(policy, fallback=lambda state: 0.0, window=gate)
    clock.advance(1.0)
    assert _waits(waiting, [HttpResponse(0, {}, b"")], clock) == [1.5]
    assert gate.backoff_remaining() == 0
    # A 429 without Retry-After holds the window for the policy's 1 s; a cap cuts the wait.
    assert _waits(throttled, [HttpResponse(429, {}, b"")], clock) == [1.0]
    capped = ServiceWait(
        policy, lambda state: policy.throttle_default, window=gate, at_most=lambda s: 0.25
    )
    assert _waits(capped, [HttpResponse(429, {"Retry-After": "5"}, b"")], clock) == [0.25]


def test_retryable_errors() -> None:
    assert is_retryable_error(APIConnectionError())
    assert is_retryable_error(APITimeoutError())
    assert not is_retryable_error(ClientClosedError())
    assert is_retryable_error(RateLimitError("x", status_code=429))
    assert is_retryable_error(InternalServerError("x", status_code=503))
    assert not is_retryable_error(BadRequestError("x", status_code=400))
    assert not is_retryable_error(ValueError())


# -- Layer A over HTTP ------------------------------------------------------------------------


def _send(
    transport: ScriptedServer,
    clock: FakeClock,
    *,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    operation_retries: bool = False,
    **kw: Any,
) -> Any:
    """POST optim_step through the requestor's one send (the HTTP layer; the operation layer
    too with ``operation_retries``)."""
    with requests_over(
        transport.url,
        retry_policy=policy,
        sleep=clock.sleep,
        clock=clock,
        rand=lambda: 0.0,
        wall_clock=lambda: WALL,
    ) as api:
        return api.call(
            "POST",
            "/api/v1/optim_step",
            body=BODY,
            operation_retries=operation_retries,
            **kw,
        )


def _assert_same_request_resent(server: ScriptedServer, count: int) -> None:
    sent = server.requests("/api/v1/optim_step")
    assert len(sent) == count
    keys = {r.header("X-Idempotency-Key") for r in sent}
    assert len(keys) == 1
    assert None not in keys
    assert [r.header("x-stainless-retry-count") for r in sent] == [str(i) for i in range(count)]
    assert all(r.body == BODY for r in sent)


@pytest.mark.parametrize(
    ("headers", "expected_sleep"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"Retry-After": _imf(20)}, 20.0),
        ({"Retry-After": _imf(-20)}, 0.5),  # a date in the past: formula
        ({"Retry-After": "120"}, 0.5),  # more than 60 s: formula
    ],
)
def test_429_honours_each_retry_after_form(
    server: ScriptedServer,
    transport: ScriptedServer,
    headers: dict[str, str],
    expected_sleep: float,
) -> None:
    server.on(
        "POST",
        "/api/v1/optim_step",
        Reply(429, {"detail": "slow down"}, headers=headers),
        Reply(200, {"request_id": "req-1"}),
    )
    clock = FakeClock()
    resp = _send(transport, clock)
    assert resp.status == 200
    assert clock.sleeps == [expected_sleep]
    _assert_same_request_resent(server, 2)


def test_5xx_burst_is_retried_with_the_same_idempotency_key(
    server: ScriptedServer, transport: ScriptedServer
) -> None:
    server.on("POST", "/api/v1/optim_step", Reply(500), Reply(502), Reply(503), Reply(200, {}))
    clock = FakeClock()
    _send(transport, clock)
    assert clock.sleeps == [0.5, 1.0, 2.0]
    _assert_same_request_resent(server, 4)


def test_gives_up_after_ten_retries(server: ScriptedServer, transport: ScriptedServer) -> None:
    server.default("POST", "/api/v1/optim_step", Reply(503, {"detail": "down"}))
    clock = FakeClock()
    with pytest.raises(InternalServerError) as info:
        _send(transport, clock)
    assert info.value.status_code == 503
    assert clock.sleeps == [0.5, 1, 2, 4, 8, 10, 10, 10, 10, 10]
    _assert_same_request_resent(server, 11)


def test_x_should_retry_is_obeyed(server: ScriptedServer, transport: ScriptedServer) -> None:
    server.on("POST", "/api/v1/optim_step", Reply(503, headers={"x-should-retry": "false"}))
    clock = FakeClock()
    with pytest.raises(InternalServerError):
        _send(transport, clock)
    _assert_same_request_resent(server, 1)

    server.on(
        "POST",
        "/api/v1/optim_step",
        Reply(400, headers={"x-should-retry": "true"}),
        Reply(200, {}),
    )
    _send(transport, clock)
    assert len(server.requests("/api/v1/optim_step")) == 3


def test_first_invisible_retry_is_a_warning_naming_what_and_until_when(
    server: ScriptedServer, transport: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.on("POST", "/api/v1/optim_step", Reply(503), Reply(502), Reply(200, {}))
    clock = FakeClock()
    with caplog.at_level(logging.DEBUG, logger="tinker_lite.retry"):
        _send(transport, clock)
    records = [r for r in caplog.records if r.name == "tinker_lite.retry"]
    assert [r.levelno for r in records] == [logging.WARNING, logging.DEBUG]
    first = records[0].getMessage()
    assert "POST /api/v1/optim_step failed (HTTP 503)" in first
    assert "retrying in 0.5 s, for up to 66 s more, until" in first


def test_429_retries_are_not_warnings(
    server: ScriptedServer, transport: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.on("POST", "/api/v1/optim_step", Reply(429), Reply(200, {}))
    with caplog.at_level(logging.DEBUG, logger="tinker_lite.retry"):
        _send(transport, FakeClock())
    assert [r.levelno for r in caplog.records if r.name == "tinker_lite.retry"] == [logging.DEBUG]


def test_client_errors_are_not_retried(server: ScriptedServer, transport: ScriptedServer) -> None:
    server.on("POST", "/api/v1/optim_step", Reply(404, {"detail": "no model"}))
    clock = FakeClock()
    with pytest.raises(NotFoundError):
        _send(transport, clock)
    assert clock.sleeps == []


def test_connection_drop_and_read_timeout_are_retried(
    server: ScriptedServer, transport: ScriptedServer
) -> None:
    server.on("POST", "/api/v1/optim_step", Drop(), Hang(), Reply(200, {"ok": 1}))
    clock = FakeClock()
    resp = _send(transport, clock, timeout=Timeout(connect=1.0, read=0.2))
    assert resp.json() == {"ok": 1}
    assert clock.sleeps == [0.5, 1.0]
    _assert_same_request_resent(server, 3)


def test_connection_errors_surface_after_the_last_retry(
    server: ScriptedServer, transport: ScriptedServer
) -> None:
    server.default("POST", "/api/v1/optim_step", Drop())
    clock = FakeClock()
    with pytest.raises(APIConnectionError):
        _send(transport, clock, policy=RetryPolicy(max_retries=2))
    _assert_same_request_resent(server, 3)


def test_accept_status_returns_a_redirect(
    server: ScriptedServer, transport: ScriptedServer
) -> None:
    server.on("GET", "/archive", Reply(302, headers={"Location": "https://x/y", "Expires": "z"}))
    with requests_over(server.url) as api:
        resp = api.call(
            "GET",
            "/archive",
            allow_redirects=False,
            accept_status=(302,),
            operation_retries=False,
        )
    assert resp.status == 302
    assert resp.headers["location"] == "https://x/y"
    assert server.requests("/archive")[0].header("X-Idempotency-Key") is None


# -- Layer B --------------------------------------------------------------------------------


def test_operation_layer_resends_the_same_seq_id_with_new_keys(
    server: ScriptedServer, transport: ScriptedServer
) -> None:
    server.on("POST", "/api/v1/optim_step", Reply(503), Reply(429), Reply(200, {"request_id": "r"}))
    clock = FakeClock()
    resp = _send(transport, clock, policy=NO_RETRIES, operation_retries=True)
    assert resp.json() == {"request_id": "r"}
    assert clock.sleeps == [1.0, 2.0]
    sent = server.requests("/api/v1/optim_step")
    assert len(sent) == 3
    assert all(r.json()["seq_id"] == 7 for r in sent)
    assert len({r.header("X-Idempotency-Key") for r in sent}) == 3


def test_operation_layer_stops_after_five_minutes(
    server: ScriptedServer, transport: ScriptedServer
) -> None:
    server.default("POST", "/api/v1/optim_step", Reply(500))
    clock = FakeClock()
    start = clock()
    with pytest.raises(InternalServerError):
        _send(transport, clock, policy=NO_RETRIES, operation_retries=True)
    assert clock() - start == pytest.approx(300.0)
    assert clock.sleeps[:7] == [1, 2, 4, 8, 16, 30, 30]
    assert max(clock.sleeps) == 30
    assert len(server.requests("/api/v1/optim_step")) == len(clock.sleeps) + 1


def test_operation_layer_raises_non_retryable_errors_at_once(
    server: ScriptedServer, transport: ScriptedServer
) -> None:
    server.on("POST", "/api/v1/optim_step", Reply(400, {"detail": "bad"}))
    clock = FakeClock()
    with pytest.raises(BadRequestError):
        _send(transport, clock, policy=NO_RETRIES, operation_retries=True)
    assert clock.sleeps == []
