"""The run journal: line format, environment switch, future watching, torn lines."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.support.journal import read_journal
from tinker_lite._session.journal import JOURNAL_KEYS, Journal
from tinker_lite._session.settings import resolve_settings


def test_record_writes_one_json_line_with_documented_keys(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "run.jsonl"
    journal = Journal(path, clock=lambda: 1_700_000_000.25)
    journal.record("optim_step", "req-1", 7, 0.5, None, "ok")
    journal.record("sample", "req-2", None, 1.25, 42, "error", error="RateLimitError: slow down")
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert tuple(first) == JOURNAL_KEYS
    assert first == {
        "ts": "2023-11-14T22:13:20.250Z",
        "kind": "optim_step",
        "status": "ok",
        "request_id": "req-1",
        "seq_id": 7,
        "duration_s": 0.5,
        "tokens": None,
    }
    second = json.loads(lines[1])
    assert second["tokens"] == 42
    assert second["error"] == "RateLimitError: slow down"
    assert read_journal(journal.path) == [first, second]


def test_resolve_prefers_argument_then_environment(tmp_path: Path) -> None:
    def resolve(journal: str | Path | Journal | None, environ: dict[str, str]) -> object:
        settings = resolve_settings(
            api_key="tml-k", base_url="http://127.0.0.1:1", journal=journal, environ=environ
        )
        return settings.journal

    assert resolve(None, {}) is None
    assert resolve(None, {"TINKER_LITE_JOURNAL": " "}) is None
    assert resolve(None, {"TINKER_LITE_JOURNAL": str(tmp_path / "e.jsonl")}) == str(
        tmp_path / "e.jsonl"
    )
    assert resolve(tmp_path / "a.jsonl", {"TINKER_LITE_JOURNAL": "x"}) == tmp_path / "a.jsonl"
    explicit = Journal(tmp_path / "a.jsonl")
    assert resolve(explicit, {}) is explicit


def test_watch_records_outcome_and_duration(tmp_path: Path) -> None:
    ticks = iter([10.0, 12.5, 20.0, 21.0, 30.0, 30.5])
    journal = Journal(tmp_path / "j.jsonl", monotonic=lambda: next(ticks))

    done: Future[list[int]] = Future()
    done.request_id = "r1"  # type: ignore[attr-defined]
    journal.watch(done, "sample", tokens=len)
    done.set_result([1, 2, 3])

    failed: Future[int] = Future()
    failed.request_id = "r2"  # type: ignore[attr-defined]
    journal.watch(failed, "forward_backward", seq_id=3, tokens=9, model_id="m")
    failed.set_exception(RuntimeError("bad input\nsecond line"))

    cancelled: Future[int] = Future()
    journal.watch(cancelled, "optim_step", seq_id=4)
    cancelled.cancel()

    entries = read_journal(journal.path)
    assert [(e["kind"], e["status"], e["request_id"]) for e in entries] == [
        ("sample", "ok", "r1"),
        ("forward_backward", "error", "r2"),
        ("optim_step", "cancelled", None),
    ]
    assert entries[0]["tokens"] == 3
    assert entries[0]["duration_s"] == 2.5
    assert entries[1]["error"] == "RuntimeError: bad input"
    assert entries[1]["tokens"] == 9
    assert entries[1]["model_id"] == "m"
    assert entries[2]["duration_s"] == 0.5


def test_concurrent_records_never_interleave(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")

    def work(worker: int) -> None:
        for i in range(50):
            journal.record("sample", f"w{worker}-{i}" + "x" * 200, i, 0.0, i, "ok")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = read_journal(tmp_path / "j.jsonl")
    assert len(entries) == 200


def test_read_skips_torn_last_line_and_garbage(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"kind": "a"}\nnot json\n[1]\n\n{"kind": "b"}\n{"kind": "c", "sta')
    assert read_journal(path) == [{"kind": "a"}, {"kind": "b"}]
    assert read_journal(tmp_path / "missing.jsonl") == []


def test_unwritable_journal_warns_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    journal = Journal(blocker / "j.jsonl")  # parent is a file: cannot be created
    journal.record("x", None, None, 0.0, None, "ok")
    journal.record("x", None, None, 0.0, None, "ok")
    warnings = [r for r in caplog.records if "cannot write the journal" in r.getMessage()]
    assert len(warnings) == 1
