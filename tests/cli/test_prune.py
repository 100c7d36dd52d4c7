"""`checkpoint prune`: the keep-last plan, full pagination, and refusing partial listings."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
from typing import Any

import pytest

from tinker_lite import cli, types
from tinker_lite._errors import InternalServerError
from tinker_lite.cli import main, plan_prune
from tinker_lite.rest_client import CheckpointListing, RestClient

BASE = dt.datetime(2025, 11, 1, tzinfo=dt.timezone.utc)


def ckpt(run: str, kind: str, name: str, hour: int, public: bool = False) -> types.Checkpoint:
    prefix = "weights" if kind == "training" else "sampler_weights"
    return types.Checkpoint(
        checkpoint_id=f"{prefix}/{name}",
        checkpoint_type=kind,
        time=BASE + dt.timedelta(hours=hour),
        tinker_path=f"tinker://{run}/{prefix}/{name}",
        size_bytes=100,
        public=public,
    )


def done(value: Any) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(value)
    return future


def failed(exc: BaseException) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_exception(exc)
    return future


class FakeRest:
    """The RestClient calls prune makes, over an in-memory list; pages can be tampered with."""

    def __init__(self, checkpoints: list[types.Checkpoint]) -> None:
        self.checkpoints = checkpoints
        self.deleted: list[str] = []
        self.page_calls: list[tuple[int, int]] = []
        self.total_override: int | None = None
        self.no_cursor = False
        self.fail_delete: set[str] = set()
        self.page_size = 100

    def list_all_checkpoints(
        self,
        training_run_id: str | None = None,
        *,
        page_size: int = 100,
        page_timeout: float | None = None,
    ) -> CheckpointListing:
        """RestClient's own paging over this fake's pages (``self.page_size`` per page)."""
        return RestClient.list_all_checkpoints(
            self,  # type: ignore[arg-type]
            training_run_id,
            page_size=self.page_size,
            page_timeout=page_timeout,
        )

    def list_checkpoints(self, run_id: str) -> concurrent.futures.Future[Any]:
        items = [c for c in self.checkpoints if c.tinker_path.split("/")[2] == run_id]
        return done(types.CheckpointsListResponse(checkpoints=items))

    def list_user_checkpoints(
        self, limit: int = 100, offset: int = 0
    ) -> concurrent.futures.Future[Any]:
        self.page_calls.append((limit, offset))
        ordered = sorted(self.checkpoints, key=lambda c: c.time, reverse=True)
        page = ordered[offset : offset + limit]
        total = len(ordered) if self.total_override is None else self.total_override
        cursor = (
            None if self.no_cursor else types.Cursor(offset=offset, limit=limit, total_count=total)
        )
        return done(types.CheckpointsListResponse(checkpoints=page, cursor=cursor))

    def delete_checkpoint_from_tinker_path(self, path: str) -> concurrent.futures.Future[Any]:
        if path in self.fail_delete:
            return failed(InternalServerError("down", status_code=503))
        self.deleted.append(path)
        self.checkpoints = [c for c in self.checkpoints if c.tinker_path != path]
        return done(None)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRest:
    rest = FakeRest(
        [ckpt("run-a", "training", f"s{i}", i) for i in range(5)]
        + [ckpt("run-a", "sampler", f"p{i}", i) for i in range(3)]
        + [ckpt("run-b", "training", f"s{i}", 10 + i) for i in range(2)]
        + [ckpt("run-a", "training", "pub", 0, public=True)]
    )
    monkeypatch.setattr(cli.Context, "rest", lambda self: rest)
    return rest


def test_plan_keeps_newest_per_run_and_type() -> None:
    checkpoints = [ckpt("r", "training", f"s{i}", i) for i in (3, 1, 4, 0, 2)]
    checkpoints += [ckpt("r", "sampler", "p0", 0), ckpt("q", "training", "x", 9)]
    delete, keep, public = plan_prune(checkpoints, 2)
    assert sorted(c.checkpoint_id for c in delete) == ["weights/s0", "weights/s1", "weights/s2"]
    assert {c.tinker_path for c in keep} == {
        "tinker://r/weights/s4",
        "tinker://r/weights/s3",
        "tinker://r/sampler_weights/p0",
        "tinker://q/weights/x",
    }
    assert public == []


def test_plan_never_deletes_public_and_filters_type() -> None:
    checkpoints = [ckpt("r", "training", f"s{i}", i) for i in range(3)]
    checkpoints += [ckpt("r", "training", "old-public", -5, public=True)]
    checkpoints += [ckpt("r", "sampler", f"p{i}", i) for i in range(3)]
    delete, _, public = plan_prune(checkpoints, 1, checkpoint_type="sampler")
    assert [c.checkpoint_id for c in delete] == ["sampler_weights/p1", "sampler_weights/p0"]
    assert public == []
    delete, _, public = plan_prune(checkpoints, 1, checkpoint_type="training")
    assert [c.checkpoint_id for c in public] == ["weights/old-public"]
    assert "weights/old-public" not in {c.checkpoint_id for c in delete}


def test_dry_run_deletes_nothing_and_lists_plan(
    fake: FakeRest, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["checkpoint", "prune", "--keep-last", "2", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert fake.deleted == []
    assert "would delete tinker://run-a/weights/s0" in out
    assert out.splitlines()[-1].startswith("dry run: would delete 4 of 11 checkpoints in 2 run(s)")
    assert "+1 public, never pruned" in out


def test_prune_all_runs_paginates_and_deletes(
    fake: FakeRest, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.page_size = 3
    code = main(["checkpoint", "prune", "--keep-last", "1", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert fake.page_calls == [(3, 0), (3, 3), (3, 6), (3, 9)]
    assert sorted(doc["deleted"]) == sorted(fake.deleted)
    assert len(fake.deleted) == 7  # run-a: 4 training + 2 sampler; run-b: 1
    assert doc["public_kept"] == ["tinker://run-a/weights/pub"]
    assert sorted(doc["kept"]) == [
        "tinker://run-a/sampler_weights/p2",
        "tinker://run-a/weights/s4",
        "tinker://run-b/weights/s1",
    ]


def test_prune_one_run(fake: FakeRest, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["checkpoint", "prune", "--keep-last", "1", "--run", "run-b", "--type", "training"])
    out = capsys.readouterr().out
    assert code == 0
    assert fake.deleted == ["tinker://run-b/weights/s0"]
    assert fake.page_calls == []
    assert out.splitlines()[-1].startswith("deleted 1 of 2 checkpoints in 1 run(s); kept 1")


def test_listing_that_changed_while_paging_deletes_nothing(
    fake: FakeRest, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.total_override = 50  # the service counts more than it returns
    code = main(["checkpoint", "prune", "--keep-last", "1"])
    captured = capsys.readouterr()
    assert code == 7
    assert fake.deleted == []
    assert captured.err.startswith("tinker-lite: error: refusing to prune")
    assert "nothing was deleted" in captured.err


def test_full_page_without_cursor_deletes_nothing(
    fake: FakeRest, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.no_cursor = True
    fake.page_size = 3
    code = main(["checkpoint", "prune", "--keep-last", "1"])
    assert code == 7
    assert fake.deleted == []
    assert "without a cursor" in capsys.readouterr().err


def test_failed_listing_deletes_nothing(
    fake: FakeRest, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        fake,
        "list_user_checkpoints",
        lambda limit=100, offset=0: failed(InternalServerError("down", status_code=500)),
    )
    code = main(["checkpoint", "prune", "--keep-last", "1"])
    assert code == 7
    assert fake.deleted == []
    assert "Traceback" not in capsys.readouterr().err


def test_failed_delete_continues_and_sets_exit_code(
    fake: FakeRest, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.fail_delete = {"tinker://run-a/weights/s1"}
    code = main(["checkpoint", "prune", "--keep-last", "3", "--run", "run-a"])
    captured = capsys.readouterr()
    assert code == 7
    assert fake.deleted == ["tinker://run-a/weights/s0"]
    assert "tinker-lite: error: tinker://run-a/weights/s1:" in captured.err
    assert captured.out.splitlines()[-1].endswith("1 failed")
