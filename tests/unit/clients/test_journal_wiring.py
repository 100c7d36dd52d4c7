"""The run journal wired into the clients: one line per completed operation, in seq_id order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import API_KEY, FakeTinker, ce_datum
from tests.support.journal import read_journal
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    Reply,
    Respond,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import BadRequestError, ServiceClient, types
from tinker_lite._session.journal import JOURNAL_KEYS, Journal, SeqOrder


@pytest.fixture
def fake(server: ScriptedServer) -> FakeTinker:
    # Chunks of at most 2 datums (the service's client config), JSON on the wire.
    return FakeTinker(server, client_config={"fwdbwd_max_chunk_len": 2})


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "run.jsonl"


@pytest.fixture
def service(fake: FakeTinker, journal_path: Path) -> Iterator[ServiceClient]:
    with ServiceClient(
        base_url=fake.server.url,
        api_key=API_KEY,
        telemetry=False,
        wire="json",
        journal=journal_path,
    ) as client:
        yield client


def _kinds(path: Path) -> list[tuple[str, int | None]]:
    return [(e["kind"], e["seq_id"]) for e in read_journal(path)]


def test_every_training_operation_is_journaled_with_its_seq_id_and_tokens(
    service: ServiceClient, journal_path: Path
) -> None:
    trainer = service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
    # 5 datums with inputs of 3, 4, 5, 6, 7 tokens: chunks of 2 + 2 + 1 datums.
    data = [ce_datum(list(range(1, n + 2))) for n in (3, 4, 5, 6, 7)]
    trainer.forward(data[:1], "cross_entropy").result(timeout=30)
    trainer.forward_backward(data, "cross_entropy").result(timeout=30)
    trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result(timeout=30)
    trainer.save_state("ckpt").result(timeout=30)
    with pytest.warns(FutureWarning, match="load_state"):
        loaded = trainer.load_state("tinker://run-0001/weights/ckpt")
    loaded.result(timeout=30)
    with pytest.warns(FutureWarning, match="load_state"):
        loaded = trainer.load_state_with_optimizer("tinker://run-0001/weights/ckpt")
    loaded.result(timeout=30)
    trainer.save_weights_for_sampler("s1").result(timeout=30)

    entries = read_journal(journal_path)
    assert [(e["kind"], e["seq_id"], e["tokens"]) for e in entries] == [
        ("create_model", 0, None),
        ("forward", 1, 3),
        ("forward_backward", 2, 3 + 4),
        ("forward_backward", 3, 5 + 6),
        ("forward_backward", 4, 7),
        ("optim_step", 5, None),
        ("save_state", 6, None),
        ("load_state", 7, None),
        ("load_state_with_optimizer", 8, None),
        ("save_weights_for_sampler", 9, None),
    ]
    for entry in entries:
        assert tuple(entry)[: len(JOURNAL_KEYS)] == JOURNAL_KEYS
        assert entry["status"] == "ok"
        assert entry["request_id"].startswith("req-")
        assert entry["duration_s"] >= 0
    assert {e.get("model_id") for e in entries[1:]} == {trainer.model_id}


def test_sample_lines_count_prompt_and_generated_tokens(
    service: ServiceClient, journal_path: Path
) -> None:
    sampler = service.create_sampling_client(base_model="Qwen/Qwen3-8B").result()
    prompt = types.ModelInput.from_ints([5, 6, 7])
    result = sampler.sample(prompt, 2, types.SamplingParams(max_tokens=2)).result(timeout=30)
    generated = sum(len(seq.tokens) for seq in result.sequences)
    (entry,) = read_journal(journal_path)  # written before the future completed
    assert entry["kind"] == "sample"
    assert entry["status"] == "ok"
    assert entry["tokens"] == 3 + generated
    assert entry["seq_id"] is None


def test_a_failed_operation_is_journaled_as_an_error(
    fake: FakeTinker, service: ServiceClient, journal_path: Path
) -> None:
    trainer = service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
    fake.server.on("POST", "/api/v1/optim_step", Reply(400, {"detail": "bad adam"}))
    with pytest.raises(BadRequestError):
        trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result(timeout=30)
    last = read_journal(journal_path)[-1]
    assert last["kind"] == "optim_step"
    assert last["status"] == "error"
    assert last["request_id"] is None  # the service never accepted it
    assert last["error"].startswith("BadRequestError")
    assert API_KEY not in journal_path.read_text()


def test_lines_follow_seq_id_order_when_results_arrive_out_of_order(
    fake: FakeTinker, service: ServiceClient, journal_path: Path
) -> None:
    trainer = service.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
    held: set[str] = set()
    release = threading.Event()

    def forward_backward(r: Recorded) -> Reply:
        reply = fake.handle(r)
        held.add(reply.json_body["request_id"])
        return reply

    def retrieve(r: Recorded) -> Reply:
        if r.json()["request_id"] in held:
            assert release.wait(30), "the test never released the forward_backward result"
        return fake.handle(r)

    fake.server.on("POST", "/api/v1/forward_backward", Respond(forward_backward))
    fake.server.default("POST", "/api/v1/retrieve_future", Respond(retrieve))
    try:
        fb = trainer.forward_backward([ce_datum([1, 2, 3])], "cross_entropy")
        step = trainer.optim_step(types.AdamParams(learning_rate=1e-3))
        step.result(timeout=30)  # seq_id 2 completes while seq_id 1 is still pending
        assert _kinds(journal_path) == [("create_model", 0)]
    finally:
        release.set()
    fb.result(timeout=30)
    assert _kinds(journal_path) == [
        ("create_model", 0),
        ("forward_backward", 1),
        ("optim_step", 2),
    ]


def test_environment_variable_turns_the_journal_on(
    fake: FakeTinker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "env.jsonl"
    monkeypatch.setenv("TINKER_LITE_JOURNAL", str(path))
    with ServiceClient(base_url=fake.server.url, api_key=API_KEY, telemetry=False) as client:
        assert client.journal is not None
        assert client.journal.path == path
        client.create_lora_training_client("Qwen/Qwen3-8B", rank=8).result()
    assert _kinds(path) == [("create_model", 0)]
    monkeypatch.delenv("TINKER_LITE_JOURNAL")
    given = Journal(tmp_path / "given.jsonl")
    with ServiceClient(
        base_url=fake.server.url, api_key=API_KEY, telemetry=False, journal=given
    ) as client:
        assert client.journal is given
    with ServiceClient(base_url=fake.server.url, api_key=API_KEY, telemetry=False) as client:
        assert client.journal is None


def test_seq_order_releases_writes_in_order() -> None:
    order = SeqOrder(first=1)
    written: list[int] = []

    def write(n: int) -> Any:
        return lambda: written.append(n)

    order.slot(3)(write(3))
    order.slot(2)(write(2))
    assert written == []
    assert order.waiting == 2
    order.slot(1)(write(1))
    assert written == [1, 2, 3]
    assert order.waiting == 0
