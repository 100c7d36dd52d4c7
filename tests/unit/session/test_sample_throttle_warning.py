"""A sampler held back by 429s says so, at most once a minute (docs/protocol.rst §6.6)."""

from __future__ import annotations

import logging

import pytest

from tests.support.scripted_server import FakeClock
from tinker_lite._session.sample_gate import THROTTLE_WARNING_INTERVAL_S, SampleGate


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_continuous_429s_warn_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    gate = SampleGate(limit=4, clock=clock)
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    for _ in range(int(THROTTLE_WARNING_INTERVAL_S) - 1):
        gate.hold(1.0)
        clock.advance(1.0)
    assert _warnings(caplog) == []  # a short episode is normal backpressure: no noise
    gate.hold(1.0)
    clock.advance(1.0)
    gate.hold(1.0)
    assert len(_warnings(caplog)) == 1
    assert "429" in _warnings(caplog)[0]
    assert "60 s" in _warnings(caplog)[0]
    for _ in range(int(THROTTLE_WARNING_INTERVAL_S)):
        gate.hold(1.0)
        clock.advance(1.0)
    gate.hold(1.0)
    assert len(_warnings(caplog)) == 2


def test_an_accepted_request_ends_the_episode(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    gate = SampleGate(limit=4, clock=clock)
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    gate.hold(1.0)
    clock.advance(THROTTLE_WARNING_INTERVAL_S - 1)
    gate.note_accepted()
    clock.advance(2.0)
    gate.hold(1.0)
    assert _warnings(caplog) == []
