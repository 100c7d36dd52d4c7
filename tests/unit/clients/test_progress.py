"""The progress reporter: modes, environment switch, rendering and future fan-outs."""

from __future__ import annotations

import io
import operator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tinker_lite._progress import Progress, ProgressMode, format_bytes, gather, progress_mode


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("tty", "env", "non_tty", "expected"),
    [
        (True, {}, "off", "bar"),
        (False, {}, "off", "off"),
        (False, {}, "lines", "lines"),
        (True, {"TINKER_LITE_PROGRESS": "0"}, "lines", "off"),
        (False, {"TINKER_LITE_PROGRESS": "off"}, "lines", "off"),
        (False, {"TINKER_LITE_PROGRESS": "1"}, "off", "lines"),
        (True, {"TINKER_LITE_PROGRESS": "yes"}, "off", "bar"),
    ],
)
def test_mode_follows_tty_and_environment(
    tty: bool, env: dict[str, str], non_tty: ProgressMode, expected: str
) -> None:
    stream = FakeTTY() if tty else io.StringIO()
    assert progress_mode(stream, non_tty=non_tty, environ=env) == expected


def test_off_writes_nothing() -> None:
    out = io.StringIO()
    with Progress(10, stream=out) as progress:
        progress.update(5)
    assert progress.mode == "off"
    assert out.getvalue() == ""


def test_lines_mode_writes_at_most_every_interval_and_at_close() -> None:
    out = io.StringIO()
    clock = Clock()
    progress = Progress(100, desc="work", stream=out, mode="lines", interval_s=5.0, clock=clock)
    progress.update(10)  # first update reports at once
    clock.now = 2.0
    progress.update(10)  # too early
    clock.now = 6.0
    progress.update(10)
    progress.close()
    progress.close()  # idempotent
    assert out.getvalue().splitlines() == [
        "work: 10/100 (10%)",
        "work: 30/100 (30%)",
        "work: 30/100 (30%)",
    ]


def test_bar_mode_redraws_one_line() -> None:
    out = FakeTTY()
    clock = Clock()
    with Progress(4, desc="s", stream=out, clock=clock) as progress:
        for _ in range(4):
            clock.now += 1.0
            progress.update()
    text = out.getvalue()
    assert text.endswith("\n")
    assert text.count("\n") == 1
    assert "[" + "#" * 30 + "] s: 4/4 (100%)" in text.splitlines()[-1].split("\r")[-1]


def test_bytes_unit_and_unknown_total() -> None:
    out = io.StringIO()
    clock = Clock()
    progress = Progress(desc="dl", unit="bytes", stream=out, mode="lines", clock=clock)
    clock.now = 2.0
    progress.update(3 * 1024 * 1024)
    progress.close()
    assert out.getvalue().splitlines()[0] == "dl: 3.0 MiB 1.5 MiB/s"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"


def test_broken_stream_turns_reporting_off() -> None:
    out = io.StringIO()
    out.close()
    progress = Progress(3, stream=out, mode="lines")
    progress.update()
    assert progress.mode == "off"


def test_gather_returns_results_in_order_and_counts() -> None:
    out = io.StringIO()
    progress = Progress(stream=out, mode="lines", interval_s=0.0)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(operator.mul, i, i) for i in range(8)]
        results = gather(futures, progress=progress)
    progress.close()
    assert results == [i * i for i in range(8)]
    assert progress.count == 8
    assert progress.total == 8
    assert out.getvalue().splitlines()[-1] == "8/8 (100%)"


def test_gather_raises_first_error_after_waiting_for_all() -> None:
    ok: Future[int] = Future()
    bad: Future[int] = Future()
    later: Future[int] = Future()
    ok.set_result(1)
    bad.set_exception(ValueError("boom"))
    later.set_result(3)
    with pytest.raises(ValueError, match="boom"):
        gather([ok, bad, later])
