"""The local server speaks today's protocol: what the official SDK 0.38 needs, over loopback.

Raw HTTP (requests) where tinker_lite's client does not offer the call or would refuse the input
before sending it; tinker_lite's own client elsewhere.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pytest

from tests.support.local_server import Api, datum, fb_body
from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite._codec import protowire as _protowire
from tinker_lite._codec import zstd as _zstd_codec
from tinker_lite.local import LocalServer

TOKENS = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100]
PROTO = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with LocalServer(long_poll_s=0.2) as url:
        yield url


@pytest.fixture
def api(base_url: str) -> Iterator[Api]:
    client = Api(base_url)
    yield client
    client.close()


def _optim(api: Api, model_id: str, seq_id: int) -> dict[str, object]:
    body = {"model_id": model_id, "seq_id": seq_id, "adam_params": {"learning_rate": 0.01}}
    return dict(api.run("/api/v1/optim_step", body))


# -- a refused request consumes its seq_id ------------------------------------------------------


def test_refused_json_request_consumes_its_seq_id(api: Api) -> None:
    model_id = api.model(api.session())
    bad = fb_body(model_id, 1, [datum(TOKENS)], "forward_backward_input")
    bad["forward_backward_input"]["unexpected"] = 1
    refused = api.post("/api/v1/forward_backward", bad)
    assert refused.status_code == 422, refused.text
    # the next request of the model runs instead of waiting for seq_id 1 forever
    response = api.post(
        "/api/v1/optim_step",
        {"model_id": model_id, "seq_id": 2, "adam_params": {"learning_rate": 0.01}},
    )
    assert response.status_code == 200, response.text
    answer = api.poll(response.json()["request_id"], deadline=10.0)
    assert answer.status_code == 200
    assert answer.json().get("type") != "try_again"
    # a resend of the refused seq_id gets the same refusal, never a second application
    again = api.post("/api/v1/forward_backward", bad)
    assert again.status_code == 422


def test_refused_protobuf_request_consumes_its_seq_id(api: Api) -> None:
    model_id = api.model(api.session())
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints(TOKENS[:-1]),
            loss_fn_inputs={
                "target_tokens": np.array(TOKENS[1:], dtype=np.int64),
                "weights": np.ones(len(TOKENS) - 1, dtype=np.float32),
            },
        )
    ]
    body = _proto.encode_forward_backward_request(
        model_id=model_id,
        seq_id=1,
        data=data,
        loss_fn="no_such_loss",
        loss_fn_config=None,
        forward_only=False,
    )
    refused = api.http.post(
        api.base_url + "/api/v1/forward_backward", data=body, headers=PROTO, timeout=30
    )
    assert refused.status_code == 422, refused.text
    _optim(api, model_id, 2)


def test_refused_save_consumes_its_seq_id(api: Api) -> None:
    model_id = api.model(api.session())
    refused = api.post(
        "/api/v1/save_weights",
        {"model_id": model_id, "seq_id": 1, "path": "x", "ttl_seconds": "soon"},
    )
    assert refused.status_code == 422, refused.text
    _optim(api, model_id, 2)


# -- helpers ------------------------------------------------------------------------------------


def _trained_model(api: Api, session_id: str | None = None) -> tuple[str, str]:
    session_id = session_id or api.session()
    model_id = api.model(session_id)
    api.run(
        "/api/v1/forward_backward",
        fb_body(model_id, 1, [datum(TOKENS)], "forward_backward_input"),
    )
    return session_id, model_id


def _sampler(api: Api, session_id: str, seq: int = 0) -> str:
    body = {
        "session_id": session_id,
        "sampling_session_seq_id": seq,
        "base_model": "tinker-lite/tiny-64",
        "type": "create_sampling_session",
    }
    sampler_id: str = api.ok("/api/v1/create_sampling_session", body)["sampling_session_id"]
    return sampler_id


def _sample_body(sampler_id: str, seq_id: int, **options: object) -> dict[str, object]:
    return {
        "sampling_session_id": sampler_id,
        "seq_id": seq_id,
        "num_samples": 2,
        "prompt": {"chunks": [{"tokens": TOKENS[:6], "type": "encoded_text"}]},
        "sampling_params": {"max_tokens": 4, "seed": 5, "temperature": 1.0},
        "type": "sample",
        **options,
    }


# -- sampling options ----------------------------------------------------------------------------


def test_sampling_options_are_answered_in_json_and_protobuf(api: Api) -> None:
    sampler_id = _sampler(api, api.session())
    targets = [[TOKENS[i + 1], 7, -1] for i in range(5)]
    body = _sample_body(
        sampler_id,
        1,
        prompt_logprobs=True,
        topk_sample_logprobs=3,
        prompt_logprobs_last_n=2,
        prompt_alt_tokens_k=4,
        target_prompt_logprobs={
            "data": [t for row in targets for t in row],
            "dtype": "int64",
            "shape": [5, 3],
        },
    )
    request_id = api.ok("/api/v1/asample", body)["request_id"]
    answer = api.result(request_id)
    sequence = answer["sequences"][0]
    assert len(sequence["topk_logprobs"]) == 4
    for row, token, logprob in zip(
        sequence["topk_logprobs"], sequence["tokens"], sequence["logprobs"], strict=True
    ):
        assert len(row) == 3
        assert [lp for _, lp in row] == sorted((lp for _, lp in row), reverse=True)
        # the sampled token's logprob never beats the most likely one
        assert logprob <= row[0][1] + 1e-9
        if token == row[0][0]:
            assert logprob == pytest.approx(row[0][1])
    assert sequence["sequence_id"] == f"{request_id}:0"
    prompt_lps = answer["prompt_logprobs"]
    assert prompt_lps[:4] == [None] * 4
    assert all(v is not None for v in prompt_lps[4:])
    target = answer["target_prompt_logprobs"]
    assert target["shape"] == [5, 3]
    values = np.asarray(target["data"]).reshape(5, 3)
    np.testing.assert_allclose(values[4:, 0], prompt_lps[5:], rtol=1e-5)
    assert (values[:, 2] == 0.0).all()
    alt = answer["prompt_alt_tokens"]
    assert alt["tokens"]["shape"] == [5, 4]
    assert alt["logprobs"]["shape"] == [5, 4]
    assert all(lp < 0 for lp in alt["logprobs"]["data"])

    proto = api.poll(request_id, accept="application/x-protobuf")
    assert proto.headers["Content-Type"] == "application/x-protobuf"
    fields = {
        field for field, _, _, _ in _protowire.iter_fields(proto.content, 0, len(proto.content))
    }
    assert {1, 2, 5, 6} <= fields  # sequences, prompt_logprobs, target, alt tokens
    first_seq = next(
        (a, b)
        for field, _, a, b in _protowire.iter_fields(proto.content, 0, len(proto.content))
        if field == 1
    )
    seq_fields = {f for f, _, _, _ in _protowire.iter_fields(proto.content, *first_seq)}
    assert 4 in seq_fields  # topk_sampled_logprobs


def test_bad_sampling_options_fail_the_sample_as_user_errors(api: Api) -> None:
    sampler_id = _sampler(api, api.session())
    request_id = api.ok(
        "/api/v1/asample",
        _sample_body(sampler_id, 1, prompt_logprobs=True, prompt_logprobs_last_n=9),
    )["request_id"]
    failed = api.result(request_id)
    assert failed["category"] == "user"
    assert "prompt_logprobs_last_n" in failed["error"]


# -- retrieve_futures, join_sampling_session ---------------------------------------------------


def test_join_allocates_client_counters_and_retrieve_futures_reports_completions(
    api: Api,
) -> None:
    sampler_id = _sampler(api, api.session())
    join = {"sampling_session_id": sampler_id, "type": "join_sampling_session"}
    first = api.ok("/api/v1/join_sampling_session", join)
    second = api.ok("/api/v1/join_sampling_session", join)
    assert (first["client_counter"], second["client_counter"]) == (1, 2)
    clone_seq = 2 * 1_000_000_000 + 1
    own = api.ok("/api/v1/asample", _sample_body(sampler_id, 1))["request_id"]
    cloned = api.ok("/api/v1/asample", _sample_body(sampler_id, clone_seq))["request_id"]
    poll: dict[str, Any] = {
        "target": {"type": "sampling_session", "sampling_session_id": sampler_id},
        "prev_cursor": 0,
        "retrieved_request_ids": [],
    }
    answer = api.ok("/api/v1/retrieve_futures", poll)
    assert [c["request_id"] for c in answer["completions"]] == [own]
    assert answer["completions"][0]["state"] == "finished"
    assert answer["cursor"] > 0
    clone_poll = {**poll, "target": {**poll["target"], "cloned_sampler_id": 2}}
    assert [
        c["request_id"] for c in api.ok("/api/v1/retrieve_futures", clone_poll)["completions"]
    ] == [cloned]
    # past the cursor nothing is left; timeout 0 answers at once
    empty = api.ok(
        "/api/v1/retrieve_futures", {**poll, "prev_cursor": answer["cursor"], "timeout": 0}
    )
    assert empty == {"completions": [], "cursor": answer["cursor"]}
    unknown = api.post(
        "/api/v1/retrieve_futures",
        {**poll, "target": {"type": "sampling_session", "sampling_session_id": "nope"}},
    )
    assert unknown.status_code == 404


# -- sessions --------------------------------------------------------------------------------------


def test_finished_session_heartbeat_is_410_and_get_session_has_metadata(api: Api) -> None:
    body = {
        "tags": [],
        "user_metadata": {"team": "a"},
        "sdk_version": "0.38.0",
        "display_name": "nightly run",
        "type": "create_session",
    }
    session_id = api.ok("/api/v1/create_session", body)["session_id"]
    beat = {"session_id": session_id, "type": "session_heartbeat"}
    assert api.post("/api/v1/session_heartbeat", beat).status_code == 200
    detail = api.get(f"/api/v1/sessions/{session_id}").json()
    assert detail["user_metadata"] == {"team": "a"}
    assert detail["display_name"] == "nightly run"
    finish = api.post(f"/api/v1/sessions/{session_id}/finish", {"reason": {"type": "success"}})
    assert finish.status_code in (200, 204)
    assert api.post("/api/v1/session_heartbeat", beat).status_code == 410


def test_tinker_lite_client_close_finishes_the_session(base_url: str) -> None:
    import tinker_lite

    service = tinker_lite.ServiceClient(base_url=base_url, api_key="k")
    tinker_lite.RestClient(service).get_server_capabilities().result(timeout=60)
    service.create_lora_training_client("tinker-lite/tiny-64", rank=2).result()
    session_id = str(service.session_id)
    service.close()
    api = Api(base_url)
    beat = {"session_id": session_id, "type": "session_heartbeat"}
    assert api.post("/api/v1/session_heartbeat", beat).status_code == 410
    api.close()


# -- fields ----------------------------------------------------------------------------------------


def test_user_metadata_on_saves_is_listed_and_optimizer_config_on_load_accepted(api: Api) -> None:
    _, model_id = _trained_model(api)
    save = {
        "model_id": model_id,
        "seq_id": 2,
        "path": "meta-1",
        "overwrite": False,
        "user_metadata": {"step": "2"},
        "type": "save_weights",
    }
    path = api.run("/api/v1/save_weights", save)["path"]
    sampler_save = {
        "model_id": model_id,
        "seq_id": 3,
        "path": "meta-s",
        "kind": "snapshot",
        "user_metadata": {"kind": "eval"},
        "type": "save_weights_for_sampler",
    }
    api.run("/api/v1/save_weights_for_sampler", sampler_save)
    listed = api.get(f"/api/v1/training_runs/{model_id}/checkpoints").json()["checkpoints"]
    metadata = {c["checkpoint_id"]: c["user_metadata"] for c in listed}
    assert metadata == {"weights/meta-1": {"step": "2"}, "sampler_weights/meta-s": {"kind": "eval"}}
    everywhere = api.get("/api/v1/checkpoints").json()["checkpoints"]
    assert {"step": "2"} in [c["user_metadata"] for c in everywhere]
    load = {
        "model_id": model_id,
        "seq_id": 4,
        "path": path,
        "optimizer": True,
        "optimizer_config": {"type": "adamw"},
        "type": "load_weights",
    }
    assert api.run("/api/v1/load_weights", load)["path"] == path
    bad = api.post(
        "/api/v1/load_weights", {**load, "seq_id": 5, "optimizer_config": {"type": "sgd"}}
    )
    assert bad.status_code == 400
    assert "adamw" in bad.text
    _optim(api, model_id, 6)  # the refused load consumed seq_id 5


# -- JWT ---------------------------------------------------------------------------------------


def test_jwt_carries_the_org_id_claim() -> None:
    with LocalServer(api_key="key", jwt=True) as url:
        api = Api(url, api_key="key")
        token = api.ok("/api/v1/auth/token", {})["jwt"]
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert claims["org_id"]
        assert claims["sub"].startswith("tml:organization_user:")
        api.close()


# -- zstd advertisement ------------------------------------------------------------------------


def test_zstd_is_advertised_only_when_the_server_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    overrides = {"proto_compress_fwdbwd": True}
    config = {"sdk_version": "0.38.0"}
    if _zstd_codec.zstd_available():
        with LocalServer(config_overrides=overrides) as url:
            assert Api(url).ok("/api/v1/client/config", config)["proto_compress_fwdbwd"] is True
    monkeypatch.setattr(_zstd_codec, "_zstd", lambda: None)
    with LocalServer(config_overrides=overrides) as url:
        assert Api(url).ok("/api/v1/client/config", config)["proto_compress_fwdbwd"] is False


# -- models ------------------------------------------------------------------------------------


def test_unknown_base_model_lists_the_supported_ones_and_aliases_register(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TINKER_LITE_LOCAL_MODELS", "acme/from-env")
    with LocalServer(models=["acme/custom-7b"]) as url:
        api = Api(url)
        session_id = api.session()
        body = {"session_id": session_id, "model_seq_id": 0, "lora_config": {"rank": 4}}
        refused = api.post("/api/v1/create_model", {**body, "base_model": "Qwen/Qwen3-8b"})
        assert refused.status_code == 400
        assert "Qwen/Qwen3-8B" in refused.json()["detail"]
        for seq, name in enumerate(["acme/custom-7b", "acme/from-env"], start=1):
            accepted = api.ok(
                "/api/v1/create_model", {**body, "model_seq_id": seq, "base_model": name}
            )
            assert api.result(accepted["request_id"])["model_id"].endswith(f":train:{seq}")
        listed = api.get("/api/v1/get_server_capabilities").json()["supported_models"]
        names = [m["model_name"] for m in listed]
        assert "acme/custom-7b" in names
        assert "acme/from-env" in names
        sample = api.post(
            "/api/v1/asample",
            {**_sample_body("x", 0), "sampling_session_id": None, "base_model": "nope/x"},
        )
        assert sample.status_code == 400
        api.close()


# -- today's REST surface ------------------------------------------------------------------------


def test_rest_surface_answers_from_the_servers_own_state(api: Api) -> None:
    session_id, model_id = _trained_model(api)
    save = {"model_id": model_id, "seq_id": 2, "path": "r1", "type": "save_weights"}
    path = api.run("/api/v1/save_weights", save)["path"]
    external = {"model_id": model_id, "seq_id": 3, "path": "ext", "type": "save_weights_external"}
    ext_path = api.run("/api/v1/save_weights_external", external)["path"]
    assert ext_path == f"tinker://{model_id}/external_weights/ext"
    urls = api.get(
        f"/api/v1/training_runs/{model_id}/checkpoints/external_weights/ext/external_weights_urls"
    ).json()
    assert "adapter_model.safetensors" in urls["urls"]
    downloaded = api.http.get(urls["urls"]["adapter_config.json"], timeout=30)
    assert downloaded.status_code == 200
    assert json.loads(downloaded.content)["r"] == 8
    assert api.post(
        f"/api/v1/training_runs/{model_id}/checkpoints/weights/r1/publish"
    ).status_code in (200, 204)

    key = {"X-Idempotency-Key": "copy-1"}
    copy = {"source_path": path, "destination_project_id": "proj-b"}
    copied = api.post("/api/v1/copy_weights", copy, headers=key).json()["tinker_path"]
    assert copied.endswith("/weights/r1")
    assert copied != path
    assert api.post("/api/v1/copy_weights", copy, headers=key).json()["tinker_path"] == copied

    put = api.http.put(
        f"{api.base_url}/api/v1/sessions/{session_id}/project",
        json={"project_id": "proj-a"},
        timeout=30,
    )
    assert put.status_code in (200, 204)
    found = api.post("/api/v1/sessions/search", {"session_id": session_id}).json()["sessions"]
    assert [s["project_id"] for s in found] == ["proj-a"]
    assert found[0]["checkpoints_count"] == 2
    assert api.post("/api/v1/sessions/search", {"project_ids": ["none"]}).json()["sessions"] == []

    trace = api.get(f"/api/v1/sessions/{session_id}/trace_export").json()
    assert trace["status"] == "ready"
    events = json.loads(api.http.get(trace["url"], timeout=30).content)["traceEvents"]
    assert {"create_model", "forward_backward", "save_weights"} <= {e["name"] for e in events}

    audit = api.get("/api/v1/audit", params={"event_type": "checkpoints"}).json()["entries"]
    kinds = [(e["event"], e.get("tinker_path")) for e in audit]
    assert ("checkpoint.created", path) in kinds
    assert ("checkpoint.published", path) in kinds
    projects = api.get("/api/v1/audit", params={"event_type": "projects"}).json()["entries"]
    assert any(e["event_details"].get("project_id") == "proj-a" for e in projects)

    usage = api.get(
        "/api/v1/billing/usage/events",
        params={"starting_on": "2000-01-01T00:00:00Z", "ending_before": "2999-01-01T00:00:00Z"},
    ).json()
    mine = [e for e in usage["data"] if e["session_id"] == session_id]
    trained = sum(
        e["event_info"]["token_count"] for e in mine if e["event_info"]["type"] == "training"
    )
    assert trained == len(TOKENS) - 1
    assert sum(e["event_info"].get("count", 0) for e in mine) == 2  # two checkpoints saved
    storage = api.get(
        "/api/v1/billing/usage/checkpoints/current", params={"project_id": "proj-a"}
    ).json()["data"]
    assert [(d["project_id"], d["checkpoint_count"]) for d in storage] == [("proj-a", 2)]
    assert api.get("/api/v1/billing/usage/events").status_code == 422


# -- serve ---------------------------------------------------------------------------------------


def test_serve_reports_a_port_in_use_with_its_program_name_and_exit_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tinker_lite.local.__main__ import EXIT_PORT_IN_USE, main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["serve", "--port", str(port)], prog="tinker-lite local")
    assert code == EXIT_PORT_IN_USE == 3
    err = capsys.readouterr().err
    assert err.startswith(f"tinker-lite local: error: port {port}")
    with pytest.raises(SystemExit) as usage:
        main(["serve", "--config", "novalue"], prog="tinker-lite local")
    assert usage.value.code == 2
    assert "tinker-lite local serve: error" in capsys.readouterr().err


@pytest.mark.parametrize("wire", ["protobuf", "json"])
def test_tinker_lite_client_gets_every_sampling_option(base_url: str, wire: str) -> None:
    import tinker_lite

    with tinker_lite.ServiceClient(base_url=base_url, api_key="k", wire=wire) as service:
        sampler = service.create_sampling_client(base_model="tinker-lite/tiny-64").result()
        prompt = types.ModelInput.from_ints(TOKENS[:6])
        targets = np.array([[TOKENS[i + 1], -1] for i in range(5)], dtype=np.int64)
        out = sampler.sample(
            prompt,
            2,
            types.SamplingParams(max_tokens=3, seed=4),
            include_prompt_logprobs=True,
            topk_sample_logprobs=2,
            prompt_logprobs_last_n=3,
            prompt_alt_tokens_k=2,
            target_prompt_logprobs=types.TensorData.from_numpy(targets),
        ).result(timeout=60)
    topk = out.sequences[1].topk_logprobs
    assert topk is not None
    assert [len(row or []) for row in topk] == [2, 2, 2]
    assert out.prompt_logprobs is not None
    assert out.prompt_logprobs[:3] == [None, None, None]
    assert out.target_prompt_logprobs is not None
    values = out.target_prompt_logprobs.to_numpy().reshape(5, 2)
    # Past the first three positions (checked above) every prompt logprob is a number.
    after = cast(list[float], out.prompt_logprobs[3:])
    np.testing.assert_allclose(values[2:, 0], after, rtol=1e-5)
    assert out.prompt_alt_tokens is not None
    assert list(out.prompt_alt_tokens.tokens.to_numpy().shape) == [5, 2]


def test_sparse_target_prompt_logprobs_score_only_the_listed_cells(api: Api) -> None:
    sampler_id = _sampler(api, api.session())
    # 5 x 2 CSR: row 0 lists column 1, row 3 lists column 0; every other cell asks nothing
    sparse = {
        "data": [TOKENS[1], TOKENS[4]],
        "dtype": "int64",
        "shape": [5, 2],
        "sparse_crow_indices": [0, 1, 1, 1, 2, 2],
        "sparse_col_indices": [1, 0],
    }
    body = _sample_body(sampler_id, 1, prompt_logprobs=True, target_prompt_logprobs=sparse)
    answer = api.result(api.ok("/api/v1/asample", body)["request_id"])
    values = np.asarray(answer["target_prompt_logprobs"]["data"]).reshape(5, 2)
    assert values[0, 1] == pytest.approx(answer["prompt_logprobs"][1], rel=1e-5)
    assert values[3, 0] == pytest.approx(answer["prompt_logprobs"][4], rel=1e-5)
    assert np.count_nonzero(values) == 2
