"""The clients' requests match the official SDK 0.4.1 captures in ../shared/wire/golden/.

A fresh ServiceClient (``wire="json"``, ``sdk_version`` 0.4.1) replays the captured session's
calls, in the fixtures' ``order``, against a service-like scripted server that answers with the
same ids as the capture and has no ``client/config`` (a 0.4.1-era service, so the 0.4.1 chunk
limits apply). Each fixture is compared with the matching recorded request after the
normalisation of ``../shared/wire/README.md`` (``tests/support/golden.py``). Requests the
profile adds on purpose (``client/config``, the ``weights_info`` probe, the session finish) are
not compared; ``internal_*`` fixtures come from SDK resource methods no public call uses.
"""

from __future__ import annotations

import base64
import itertools
from typing import Any

import numpy as np
import pytest

from tests.support.clients import API_KEY, RUN, FakeTinker, service_with
from tests.support.golden import GOLDEN_DIR, assert_body_matches, golden_names, load_golden
from tests.support.scripted_server import (  # noqa: F401 - fixtures used by name
    Recorded,
    Reply,
    ScriptedServer,
    clean_env_fixture,
    server_fixture,
)
from tinker_lite import ServiceClient, types
from tinker_lite.rest_client import RestClient

pytestmark = [
    pytest.mark.skipif(not GOLDEN_DIR.is_dir(), reason="golden fixtures not present"),
    pytest.mark.usefixtures("without_torch"),  # the custom loss below is in the numpy form
]

# Requests tinker_lite sends that 0.4.1 did not (docs/protocol.rst §1.1, §8.5, §4.5).
EXTRA_PATHS = frozenset(
    {
        "/api/v1/client/config",
        "/api/v1/weights_info",
        "/api/v1/sessions/sess-0001/finish",
        "/api/v1/session_heartbeat",
        "/api/v1/telemetry",
    }
)
SKIPPED_STEPS = frozenset({"internal_healthz", "internal_unload_model"})
# docs/protocol.rst §1.1: a request 0.38 sends from another call than 0.4.1 did. step -> the step
# whose requests hold it (get_info is sent once when a TrainingClient is created; the public
# get_info() then sends nothing).
MOVED_STEPS = {"get_info": "create_lora_training_client_defaults"}
BACKGROUND_STEP = "background_heartbeat_telemetry"
RETRY_STEP = "forward_backward_retry_after_500"
# Keys docs/protocol.rst §3.1 / §5.4 add to 0.4.1's bodies (0.38's always-sent defaults): path ->
# key -> the values allowed. Each is checked, then removed before the 0.4.1 comparison.
PROFILE_KEYS: dict[str, dict[str, tuple[object, ...]]] = {
    "/api/v1/asample": {
        "topk_sample_logprobs": (0,),
        "prompt_alt_tokens_k": (0,),
        "record_stability_info": (False,),
    },
    # docs/protocol.rst §5.4: the first poll offers a metadata-only answer, later polls do not.
    "/api/v1/retrieve_future": {"allow_metadata_only": (True, False)},
}
# Headers compared by value (volatile ones only by presence).
EXACT_HEADERS = ("X-API-Key", "Content-Type", "X-Stainless-Raw-Response")


def _fixtures_by_step() -> dict[str, list[dict[str, Any]]]:
    fixtures = sorted((load_golden(name) for name in golden_names()), key=lambda f: f["order"])
    steps: dict[str, list[dict[str, Any]]] = {}
    for fixture in fixtures:
        steps.setdefault(fixture["step"], []).append(fixture)
    return steps


def _tensor(value: dict[str, Any]) -> types.TensorData:
    dtype = value["dtype"]
    data = np.asarray(value["data"], dtype=np.float32 if dtype == "float32" else np.int64)
    return types.TensorData(data=data, dtype=dtype, shape=value.get("shape"))


def _chunk(chunk: dict[str, Any]) -> types.ModelInputChunk:
    if "tokens" in chunk and isinstance(chunk["tokens"], list):
        return types.EncodedTextChunk(tokens=chunk["tokens"])
    base64.b64decode(chunk["data"])
    return types.ImageChunk(
        data=chunk["data"],
        format=chunk["format"],
        height=chunk.get("height"),
        width=chunk.get("width"),
        tokens=chunk.get("tokens"),
    )


def _model_input(value: dict[str, Any]) -> types.ModelInput:
    return types.ModelInput(chunks=[_chunk(c) for c in value["chunks"]])


def _data(fixture: dict[str, Any]) -> tuple[list[types.Datum], str, Any]:
    body = fixture["body"]
    fb = body.get("forward_backward_input") or body["forward_input"]
    data = [
        types.Datum(
            model_input=_model_input(d["model_input"]),
            loss_fn_inputs={k: _tensor(v) for k, v in d["loss_fn_inputs"].items()},
        )
        for d in fb["data"]
    ]
    return data, fb["loss_fn"], fb["loss_fn_config"]


class Replay:
    """The calls of the captured session, one method per step."""

    def __init__(self, client: ServiceClient, steps: dict[str, list[dict[str, Any]]]) -> None:
        self.client = client
        self.steps = steps
        self.trainer: Any = None
        self.base_sampler: Any = None
        self.path_sampler: Any = None
        self.ephemeral: Any = None
        self.state_path = ""
        self.sampler_path = ""
        self.rest = RestClient(client)

    def body(self, step: str, index: int = 0) -> Any:
        return self.steps[step][index]["body"]

    def run(self, step: str) -> None:
        getattr(self, step, lambda: self.generic(step))()

    def generic(self, step: str) -> None:
        fixture = self.steps[step][0]
        body = fixture["body"]
        if step.startswith(("forward_backward", "forward_cross")):
            data, loss_fn, config = _data(fixture)
            call = (
                self.trainer.forward if "forward_input" in body else self.trainer.forward_backward
            )
            call(data, loss_fn, config).result(timeout=30)
        elif step.startswith("sample_") or step == "compute_logprobs":
            sampler = {
                "sample_ephemeral_client": self.ephemeral,
                "sample_model_path_client": self.path_sampler,
            }.get(step, self.base_sampler)
            prompt = _model_input(body["prompt"])
            if step == "compute_logprobs":
                sampler.compute_logprobs(prompt).result(timeout=30)
                return
            sampler.sample(
                prompt,
                body["num_samples"],
                types.SamplingParams(**body["sampling_params"]),
                include_prompt_logprobs=body["prompt_logprobs"],
                topk_prompt_logprobs=body["topk_prompt_logprobs"],
            ).result(timeout=30)
        else:  # pragma: no cover - a fixture step this replay does not know
            raise AssertionError(f"no replay for step {step}")

    def service_client_init(self) -> None:
        # 0.4.1 opened the session in the constructor; tinker_lite (like 0.38) on first use.
        assert self.client.session_id is not None

    def get_server_capabilities(self) -> None:
        with pytest.warns(FutureWarning, match="deprecated"):  # as officially
            self.client.get_server_capabilities()

    def create_lora_training_client_defaults(self) -> None:
        self.trainer = self.client.create_lora_training_client("Qwen/Qwen3-8B").result()

    def create_lora_training_client_custom(self) -> None:
        body = self.body("create_lora_training_client_custom")
        lora = body["lora_config"]
        self.client.create_lora_training_client(
            body["base_model"],
            rank=lora["rank"],
            seed=lora["seed"],
            train_attn=lora["train_attn"],
            user_metadata=body["user_metadata"],
        ).result()

    def get_info(self) -> None:
        self.trainer.get_info()

    def forward_backward_large_batch(self) -> None:
        data: list[types.Datum] = []
        for fixture in self.steps["forward_backward_large_batch"]:
            data.extend(_data(fixture)[0])
        assert len(data) == 300
        self.trainer.forward_backward(data, "cross_entropy").result(timeout=30)

    def forward_backward_custom(self) -> None:
        data, _, _ = _data(self.steps["forward_backward_custom"][0])

        def loss_fn(batch: list[types.Datum], logprobs: list[Any]) -> Any:
            weights = [d.loss_fn_inputs["weights"].to_numpy() for d in batch]
            loss = -sum(float((lp * w).sum()) for lp, w in zip(logprobs, weights, strict=True))
            return loss, [-w for w in weights], {}

        self.trainer.forward_backward_custom(data, loss_fn).result(timeout=30)

    def optim_step_default(self) -> None:
        self.trainer.optim_step(types.AdamParams()).result(timeout=30)

    def optim_step_lr(self) -> None:
        self.trainer.optim_step(types.AdamParams(learning_rate=1e-4)).result(timeout=30)

    def save_state(self) -> None:
        self.state_path = self.trainer.save_state("ckpt-001").result(timeout=30).path

    def load_state(self) -> None:
        with pytest.warns(FutureWarning, match="load_state"):  # deprecated in 0.38
            self.trainer.load_state(self.state_path).result(timeout=30)

    def save_weights_for_sampler(self) -> None:
        future = self.trainer.save_weights_for_sampler("sampler-001")
        self.sampler_path = future.result(timeout=30).path

    def save_weights_and_get_sampling_client(self) -> None:
        self.ephemeral = self.trainer.save_weights_and_get_sampling_client().result()

    def create_sampling_client_base_model(self) -> None:
        self.base_sampler = self.client.create_sampling_client(base_model="Qwen/Qwen3-8B").result()

    def create_sampling_client_model_path(self) -> None:
        self.path_sampler = self.client.create_sampling_client(
            model_path=self.sampler_path
        ).result()

    def forward_backward_retry_after_500(self) -> None:
        self.generic(RETRY_STEP)

    # 0.4.1 predates access_scope (docs/protocol.rst §4.5, 0.15.0): ``None`` leaves the query
    # parameter out, as 0.4.1 did; the README's normalisation compares queries exactly.
    def rest_get_training_run(self) -> None:
        self.rest.get_training_run(RUN, access_scope=None).result(timeout=30)

    def rest_list_training_runs_default(self) -> None:
        self.rest.list_training_runs(access_scope=None).result(timeout=30)

    def rest_list_checkpoints(self) -> None:
        self.rest.list_checkpoints(RUN).result(timeout=30)

    def rest_list_user_checkpoints_default(self) -> None:
        self.rest.list_user_checkpoints().result(timeout=30)

    def rest_get_checkpoint_archive_url(self) -> None:
        self.rest.get_checkpoint_archive_url(RUN, "weights/ckpt-001").result(timeout=30)

    def rest_publish_checkpoint(self) -> None:
        self.rest.publish_checkpoint_from_tinker_path(self.state_path).result(timeout=30)

    def rest_unpublish_checkpoint(self) -> None:
        self.rest.unpublish_checkpoint_from_tinker_path(self.state_path).result(timeout=30)

    def create_training_client_from_state(self) -> None:
        self.client.create_training_client_from_state(self.state_path).result()

    def rest_delete_checkpoint(self) -> None:
        self.rest.delete_checkpoint(RUN, "weights/ckpt-001").result(timeout=30)


def _compare(fixture: dict[str, Any], recorded: Recorded) -> None:
    name = fixture["name"]
    assert (recorded.method, recorded.path) == (fixture["method"], fixture["path"]), name
    assert recorded.query == fixture["query"], name
    ours: Any = recorded.json() if recorded.body else None
    if isinstance(ours, dict):
        for key, allowed in PROFILE_KEYS.get(fixture["path"], {}).items():
            assert key in ours, f"{name}: {key} (docs/protocol.rst §3.1) not sent"
            value = ours.pop(key)
            assert any(value is v or (value == v and type(value) is type(v)) for v in allowed), (
                f"{name}: {key}={value!r}"
            )
    try:
        assert_body_matches(fixture, ours)
    except AssertionError as e:
        raise AssertionError(f"{name}: {e}") from None
    expected = fixture["headers"]
    for header in EXACT_HEADERS:
        assert recorded.header(header) == expected.get(header), f"{name}: header {header}"
    # Several Accept lines (0.4.1's archive request) mean the same as one listing them all.
    assert _accepted(recorded.raw_headers) == _accepted(expected.items()), name
    # Compared as numbers: 0.4.1 wrote str(5.0) = "5.0" where tinker_lite writes "5".
    timeout = recorded.header("x-stainless-read-timeout")
    assert timeout is not None, name
    assert float(timeout) == float(expected["x-stainless-read-timeout"]), name
    for header, value in expected.items():
        if header.startswith("X-Tinker-"):
            got = recorded.header(header)
            assert got is not None, f"{name}: missing {header}"
            if header not in fixture["volatile_headers"]:
                assert got == value, f"{name}: header {header}"
    for header in recorded.headers:
        if header.lower().startswith("x-tinker-"):
            assert any(h.lower() == header.lower() for h in expected), f"{name}: extra {header}"
    assert (recorded.header("X-Idempotency-Key") is None) == (
        "X-Idempotency-Key" not in expected
    ), name
    retry_count = recorded.header("x-stainless-retry-count")
    if retry_count is not None:
        assert retry_count == expected["x-stainless-retry-count"], name


def _accepted(headers: Any) -> list[str]:
    return [
        value.strip()
        for name, line in headers
        if name.lower() == "accept"
        for value in line.split(",")
    ]


@pytest.fixture
def replayed(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Recorded]]]:
    monkeypatch.setenv("TINKER_LITE_SDK_VERSION", "0.4.1")
    FakeTinker(server)
    steps = _fixtures_by_step()
    failing = Reply(500, {"detail": "injected"}, headers={"retry-after-ms": "1"})
    sent: dict[str, list[Recorded]] = {}
    client = service_with(
        {"heartbeat_interval": 0.2, "telemetry_flush_interval": 0.2},
        base_url=server.url,
        api_key=API_KEY,
        wire="json",
        telemetry=True,
    )
    try:
        replay = Replay(client, steps)
        before = 0
        for step in steps:
            if step in SKIPPED_STEPS or step == BACKGROUND_STEP:
                continue
            if step == RETRY_STEP:
                server.on("POST", "/api/v1/forward_backward", failing)
            replay.run(step)
            recorded = server.requests()
            sent[step] = [r for r in recorded[before:] if r.path not in EXTRA_PATHS]
            before = len(recorded)
        server.wait_for("/api/v1/telemetry", 1)
        server.wait_for("/api/v1/session_heartbeat", 1)
    finally:
        client.close()
    sent[BACKGROUND_STEP] = [
        server.requests("/api/v1/session_heartbeat")[0],
        server.requests("/api/v1/telemetry")[0],
    ]
    return steps, sent


def test_every_golden_call_matches(
    replayed: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Recorded]]],
) -> None:
    steps, sent = replayed
    compared = 0
    for step, fixtures in steps.items():
        if step in SKIPPED_STEPS:
            continue
        recorded = iter(sent[MOVED_STEPS.get(step, step)])
        if step in MOVED_STEPS:
            assert sent[step] == [], f"{step}: sent {[r.path for r in sent[step]]}"
        if step == RETRY_STEP:
            first, retry = (r for r in sent[step] if r.path == "/api/v1/forward_backward")
            assert first.body == retry.body
            assert first.header("X-Idempotency-Key") == retry.header("X-Idempotency-Key")
            recorded = iter([retry])
        for fixture in fixtures:
            match = next(
                (r for r in recorded if (r.method, r.path) == (fixture["method"], fixture["path"])),
                None,
            )
            assert match is not None, f"{fixture['name']}: no matching request was sent"
            _compare(fixture, match)
            compared += 1
    skipped = sum(len(steps[s]) for s in SKIPPED_STEPS if s in steps)
    assert compared + skipped == len(golden_names())


def test_counters_follow_the_captured_session(
    replayed: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Recorded]]],
) -> None:
    steps, sent = replayed
    all_sent = list(itertools.chain.from_iterable(sent.values()))
    training = [
        r.json()["seq_id"]
        for r in all_sent
        if r.path.rsplit("/", 1)[1]
        in (
            "forward",
            "forward_backward",
            "optim_step",
            "save_weights",
            "load_weights",
            "save_weights_for_sampler",
        )
        and r.json().get("model_id") == RUN
    ]
    # seq_ids of the default training client: 1..18, each once (the 500 retry re-sends 18).
    assert sorted(set(training)) == list(range(1, 19))
    expected = [
        f["body"]["seq_id"]
        for fs in steps.values()
        for f in fs
        if "seq_id" in f["order_dependent_body_keys"] and f["body"].get("model_id") == RUN
    ]
    assert set(expected) <= set(training)
