"""The local server's training semantics: seq_id order, checkpoints, sampling, expiry, protobuf,
the chunks its text-only model refuses."""

from __future__ import annotations

import base64
import io
import json
import struct
import tarfile
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import requests

from tests.support.audio import dmel_chunk
from tests.support.local_server import Api, datum, fb_body
from tinker_lite import types
from tinker_lite._codec import proto as _proto
from tinker_lite.local import LocalServer

TOKENS = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with LocalServer(long_poll_s=0.2) as url:
        yield url


@pytest.fixture
def api(base_url: str) -> Iterator[Api]:
    client = Api(base_url)
    yield client
    client.close()


def _train_step(api: Api, model_id: str, seq: int) -> int:
    """forward_backward + optim_step with a large learning rate; returns the next seq_id."""
    api.run(
        "/api/v1/forward_backward",
        fb_body(model_id, seq, [datum(TOKENS)], "forward_backward_input"),
    )
    api.run(
        "/api/v1/optim_step",
        {"model_id": model_id, "seq_id": seq + 1, "adam_params": {"learning_rate": 0.05}},
    )
    return seq + 2


def _logprobs(api: Api, model_id: str, seq: int) -> list[float]:
    result = api.run("/api/v1/forward", fb_body(model_id, seq, [datum(TOKENS)], "forward_input"))
    values: list[float] = result["loss_fn_outputs"][0]["logprobs"]["data"]
    return values


def test_out_of_order_requests_apply_in_seq_order_exactly_once(api: Api, base_url: str) -> None:
    model_id = api.model(api.session())
    bodies = {
        1: (
            "/api/v1/forward_backward",
            fb_body(model_id, 1, [datum(TOKENS)], "forward_backward_input"),
        ),
        2: ("/api/v1/optim_step", {"model_id": model_id, "seq_id": 2, "adam_params": {}}),
        3: ("/api/v1/forward", fb_body(model_id, 3, [datum(TOKENS)], "forward_input")),
    }
    request_ids: dict[int, str] = {}
    request_ids[3] = api.ok(*bodies[3])["request_id"]
    stats = api.get("/_local/stats").json()["models"][model_id]
    assert stats["waiting_seq_ids"] == [3]
    waiting = api.post("/api/v1/retrieve_future", {"request_id": request_ids[3]}).json()
    assert waiting["type"] == "try_again"
    assert "waiting for seq_id 1" in waiting["queue_state_reason"]

    def send(seq: int) -> None:
        client = Api(base_url)
        request_ids[seq] = client.ok(*bodies[seq])["request_id"]
        client.close()

    threads = [threading.Thread(target=send, args=(seq,)) for seq in (2, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seq in (1, 2, 3):
        assert "error" not in api.result(request_ids[seq])
    resend = api.ok(*bodies[2])
    assert resend["request_id"] == request_ids[2]
    applied = api.get("/_local/stats").json()["models"][model_id]["applied"]
    assert [(a["seq_id"], a["kind"]) for a in applied] == [
        (0, "create_model"),
        (1, "forward_backward"),
        (2, "optim_step"),
        (3, "forward"),
    ]
    assert all(a["ok"] for a in applied)


def test_save_load_state_gives_identical_logprobs(api: Api) -> None:
    session_id = api.session()
    model_id = api.model(session_id)
    seq = _train_step(api, model_id, 1)
    saved = api.run("/api/v1/save_weights", {"model_id": model_id, "path": "ckpt", "seq_id": seq})
    path = saved["path"]
    assert path == f"tinker://{model_id}/weights/ckpt"
    before = _logprobs(api, model_id, seq + 1)

    fresh = api.model(session_id, model_seq_id=1)
    assert _logprobs(api, fresh, 1) != before
    loaded = api.run(
        "/api/v1/load_weights",
        {"model_id": fresh, "path": path, "seq_id": 2, "optimizer": True, "type": "load_weights"},
    )
    assert loaded["path"] == path
    assert _logprobs(api, fresh, 3) == before

    # 0.4.1 form (no `optimizer`) and the 0.38 create-from-state form (model made by the load)
    other = api.model(session_id, model_seq_id=2)
    api.run("/api/v1/load_weights", {"model_id": other, "path": path, "seq_id": 1})
    assert _logprobs(api, other, 2) == before
    created = api.run(
        "/api/v1/load_weights",
        {"session_id": session_id, "model_seq_id": 3, "path": path, "optimizer": False},
    )
    assert created["model_id"] == f"{session_id}:train:3"
    assert _logprobs(api, created["model_id"], 1) == before

    info = api.ok("/api/v1/weights_info", {"tinker_path": path})
    assert info["base_model"] == "tinker-lite/tiny-64"
    assert info["lora_rank"] == 8


def test_checkpoint_errors_and_conflicts(api: Api) -> None:
    model_id = api.model(api.session())
    missing = f"tinker://{model_id}/weights/nope"
    response = api.post(
        "/api/v1/load_weights",
        {"model_id": model_id, "path": missing, "seq_id": 1, "optimizer": False},
    )
    assert response.status_code == 400
    assert response.json() == {"detail": f"Invalid checkpoint tinker path {missing}."}
    # the rejected seq_id is consumed: the next one runs, a resend gets the same answer
    api.run("/api/v1/save_weights", {"model_id": model_id, "path": "a", "seq_id": 2})
    again = api.post(
        "/api/v1/load_weights",
        {"model_id": model_id, "path": missing, "seq_id": 1, "optimizer": False},
    )
    assert again.status_code == 400
    dup = api.post("/api/v1/save_weights", {"model_id": model_id, "path": "a", "seq_id": 3})
    assert dup.status_code == 409
    assert "already exists" in dup.json()["detail"]
    replaced = api.run(
        "/api/v1/save_weights",
        {"model_id": model_id, "path": "a", "seq_id": 4, "overwrite": True},
    )
    assert replaced["path"].endswith("/weights/a")
    unknown = api.post("/api/v1/optim_step", {"model_id": "nope", "seq_id": 1, "adam_params": {}})
    assert unknown.status_code == 404


def test_sampler_checkpoint_sampling_and_state_path_error(api: Api) -> None:
    session_id = api.session()
    model_id = api.model(session_id)
    seq = _train_step(api, model_id, 1)
    sampler_path = api.run(
        "/api/v1/save_weights_for_sampler", {"model_id": model_id, "path": "s1", "seq_id": seq}
    )["path"]
    state_path = api.run(
        "/api/v1/save_weights", {"model_id": model_id, "path": "st", "seq_id": seq + 1}
    )["path"]
    trained = _logprobs(api, model_id, seq + 2)

    sampler = api.ok(
        "/api/v1/create_sampling_session",
        {"session_id": session_id, "sampling_session_seq_id": 0, "model_path": sampler_path},
    )["sampling_session_id"]
    assert sampler == f"{session_id}:sample:0"
    assert api.get(f"/api/v1/samplers/{sampler}").json()["model_path"] == sampler_path
    body = {
        "num_samples": 2,
        "prompt": {"chunks": [{"tokens": TOKENS}]},
        "sampling_params": {"max_tokens": 4, "seed": 11},
        "sampling_session_id": sampler,
        "seq_id": 0,
        "prompt_logprobs": True,
    }
    submitted = api.ok("/api/v1/asample", body)
    assert len(submitted["sample_sequence_ids"]) == 2
    result = api.result(submitted["request_id"])
    assert len(result["sequences"]) == 2
    assert all(len(s["tokens"]) == len(s["logprobs"]) == 4 for s in result["sequences"])
    assert result["prompt_logprobs"][0] is None
    np.testing.assert_allclose(result["prompt_logprobs"][1:], trained, rtol=1e-4, atol=1e-4)
    # the same seq_id is the same request; a repeat with the same seed samples the same tokens
    assert api.ok("/api/v1/asample", body)["request_id"] == submitted["request_id"]
    repeat = api.run("/api/v1/asample", {**body, "seq_id": 1})
    without_ids = [{k: v for k, v in s.items() if k != "sequence_id"} for s in repeat["sequences"]]
    assert without_ids == [
        {k: v for k, v in s.items() if k != "sequence_id"} for s in result["sequences"]
    ]

    # sampling by model_path directly, and from a base model, on the same prompt
    direct = api.run(
        "/api/v1/asample", {**body, "sampling_session_id": None, "model_path": sampler_path}
    )
    assert direct["prompt_logprobs"] == result["prompt_logprobs"]
    base = api.run(
        "/api/v1/asample",
        {**body, "sampling_session_id": None, "base_model": "tinker-lite/tiny-64"},
    )
    assert base["prompt_logprobs"] != result["prompt_logprobs"]

    state_sampler = api.ok(
        "/api/v1/create_sampling_session",
        {"session_id": session_id, "sampling_session_seq_id": 1, "model_path": state_path},
    )["sampling_session_id"]
    failed = api.run("/api/v1/asample", {**body, "sampling_session_id": state_sampler})
    assert failed["category"] == "user"
    assert "State checkpoints can't be used for sampling" in failed["error"]


def test_ephemeral_sampler_and_user_errors(api: Api) -> None:
    session_id = api.session()
    model_id = api.model(session_id)
    saved = api.run(
        "/api/v1/save_weights_for_sampler",
        {"model_id": model_id, "sampling_session_seq_id": 5, "seq_id": 1, "kind": "snapshot"},
    )
    assert "path" not in saved
    sampler = saved["sampling_session_id"]
    image = {"data": "iVBORw0KGgo=", "format": "png", "expected_tokens": 4, "type": "image"}
    body = {
        "prompt": {"chunks": [{"tokens": [1, 2]}, image]},
        "sampling_params": {"max_tokens": 2},
        "sampling_session_id": sampler,
        "seq_id": 0,
    }
    failed = api.run("/api/v1/asample", body)
    assert failed["category"] == "user"
    assert "image chunks are not supported" in failed["error"]
    bad_token = api.run(
        "/api/v1/asample", {**body, "seq_id": 1, "prompt": {"chunks": [{"tokens": [9999]}]}}
    )
    assert bad_token["category"] == "user"
    assert api.post("/api/v1/asample", {**body, "sampling_session_id": "nope"}).status_code == 404


def test_rest_listing_publish_ttl_delete() -> None:
    now = [1_700_000_000.0]
    with LocalServer(clock=lambda: now[0]) as url:
        api = Api(url)
        model_id = api.model(api.session())
        path = api.run("/api/v1/save_weights", {"model_id": model_id, "path": "c1", "seq_id": 1})[
            "path"
        ]
        api.run(
            "/api/v1/save_weights_for_sampler", {"model_id": model_id, "path": "s1", "seq_id": 2}
        )
        base = f"/api/v1/training_runs/{model_id}/checkpoints"
        listing = api.get(base).json()["checkpoints"]
        assert {c["checkpoint_id"] for c in listing} == {"weights/c1", "sampler_weights/s1"}
        assert {c["checkpoint_type"] for c in listing} == {"training", "sampler"}
        run = api.get(f"/api/v1/training_runs/{model_id}").json()
        assert run["last_checkpoint"]["tinker_path"] == path
        assert run["lora_rank"] == 8
        runs = api.get("/api/v1/training_runs", params={"limit": 20, "offset": 0}).json()
        assert runs["cursor"]["total_count"] == 1
        user = api.get("/api/v1/checkpoints", params={"limit": 1, "offset": 0}).json()
        assert user["cursor"] == {"offset": 0, "limit": 1, "total_count": 2}

        assert api.http.post(url + base + "/weights/c1/publish").status_code == 204
        assert api.http.post(url + base + "/weights/c1/publish").status_code == 409
        assert api.get(base).json()["checkpoints"][0]["public"] is True
        assert api.http.delete(url + base + "/weights/c1/publish").status_code == 204
        assert api.http.delete(url + base + "/weights/c1/publish").status_code == 409
        assert api.http.post(url + base + "/weights/zz/publish").status_code == 404

        assert (
            api.http.put(url + base + "/weights/c1/ttl", json={"ttl_seconds": 60}).status_code
            == 204
        )
        [c1] = [
            c for c in api.get(base).json()["checkpoints"] if c["checkpoint_id"] == "weights/c1"
        ]
        assert c1["expires_at"].startswith("2023-11-14T22:14:20")
        assert (
            api.http.put(url + base + "/weights/c1/ttl", json={"ttl_seconds": 0}).status_code == 422
        )
        now[0] += 61
        assert [c["checkpoint_id"] for c in api.get(base).json()["checkpoints"]] == [
            "sampler_weights/s1"
        ]
        gone = api.post(
            "/api/v1/load_weights",
            {"model_id": model_id, "path": path, "seq_id": 3, "optimizer": False},
        )
        assert gone.status_code == 400

        assert api.http.delete(url + base + "/sampler_weights/s1").status_code == 204
        assert api.http.delete(url + base + "/sampler_weights/s1").status_code == 404
        assert api.get(base).json()["checkpoints"] == []
        api.close()


def _read_safetensors_header(data: bytes) -> dict[str, Any]:
    (n,) = struct.unpack("<Q", data[:8])
    header: dict[str, Any] = json.loads(data[8 : 8 + n])
    return header


def test_archive_redirect_tar_contents_and_range_download(api: Api) -> None:
    model_id = api.model(api.session())
    api.run("/api/v1/save_weights_for_sampler", {"model_id": model_id, "path": "dl", "seq_id": 1})
    url = f"/api/v1/training_runs/{model_id}/checkpoints/sampler_weights/dl/archive"
    redirect = api.get(url, allow_redirects=False, headers={"Accept": "application/gzip"})
    assert redirect.status_code == 302
    location = redirect.headers["Location"]
    assert location.startswith(api.base_url + "/_local/download/")
    assert redirect.headers["Expires"].endswith(" GMT")
    full = api.http.get(location, timeout=30)
    assert full.status_code == 200
    assert full.headers["Accept-Ranges"] == "bytes"
    archive = full.content
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        assert names == ["adapter_config.json", "adapter_model.safetensors", "checkpoint_complete"]

        def member(name: str) -> bytes:
            file = tar.extractfile(name)
            assert file is not None, f"{name} is not a regular file"
            return file.read()

        config = json.loads(member("adapter_config.json"))
        tensors = member("adapter_model.safetensors")
        assert member("checkpoint_complete") == b""
    assert config["peft_type"] == "LORA"
    assert config["r"] == 8
    header = _read_safetensors_header(tensors)
    lora_keys = [k for k in header if k != "__metadata__"]
    assert lora_keys
    assert all(k.startswith("base_model.model.") for k in lora_keys)
    first = header[lora_keys[0]]
    assert first["dtype"] == "F32"

    part = api.http.get(location, headers={"Range": "bytes=10-19"}, timeout=30)
    assert part.status_code == 206
    assert part.content == archive[10:20]
    assert part.headers["Content-Range"] == f"bytes 10-19/{len(archive)}"
    tail = api.http.get(location, headers={"Range": "bytes=-7"}, timeout=30)
    assert tail.content == archive[-7:]
    resume = api.http.get(location, headers={"Range": f"bytes={len(archive) - 5}-"}, timeout=30)
    assert resume.content == archive[-5:]
    bad = api.http.get(location, headers={"Range": f"bytes={len(archive)}-"}, timeout=30)
    assert bad.status_code == 416
    backwards = api.http.get(location, headers={"Range": "bytes=5-3"}, timeout=30)
    assert backwards.status_code == 200
    assert backwards.content == archive
    assert api.http.get(api.base_url + "/_local/download/unknown", timeout=30).status_code == 404


def test_result_expires_after_result_ttl() -> None:
    now = [1000.0]
    with LocalServer(stub_model=True, result_ttl=30, clock=lambda: now[0]) as url:
        api = Api(url)
        session_id = api.session()
        request_id = api.ok(
            "/api/v1/create_model",
            {
                "session_id": session_id,
                "model_seq_id": 0,
                "base_model": "tinker-lite/tiny-64",
                "lora_config": {"rank": 4},
            },
        )["request_id"]
        assert api.result(request_id)["model_id"] == f"{session_id}:train:0"
        now[0] += 29
        assert api.poll(request_id).status_code == 200
        now[0] += 2
        expired = api.poll(request_id)
        assert expired.status_code == 410
        assert api.poll("req-never-issued").status_code == 410
        api.close()


def test_pending_status_408_carries_queue_state() -> None:
    with LocalServer(stub_model=True, pending_status=408, long_poll_s=0.05) as url:
        api = Api(url)
        model_id = api.model(api.session())
        waiting = api.ok(
            "/api/v1/optim_step", {"model_id": model_id, "seq_id": 2, "adam_params": {}}
        )
        response = api.post("/api/v1/retrieve_future", {"request_id": waiting["request_id"]})
        assert response.status_code == 408
        assert response.json()["queue_state"] == "active"
        api.close()


def test_protobuf_forward_backward_and_protobuf_polls(api: Api) -> None:
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
        loss_fn="cross_entropy",
        loss_fn_config=None,
        forward_only=True,
    )
    response = api.http.post(
        api.base_url + "/api/v1/forward_backward",
        data=body,
        headers={"Content-Type": "application/x-protobuf"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    request_id = response.json()["request_id"]
    proto_answer = api.poll(request_id, accept="application/x-protobuf")
    assert proto_answer.headers["Content-Type"] == "application/x-protobuf"
    decoded = _proto.decode_forward_backward_output(proto_answer.content)
    json_answer = api.result(request_id)
    np.testing.assert_allclose(
        decoded.loss_fn_outputs[0]["logprobs"].to_numpy(),
        json_answer["loss_fn_outputs"][0]["logprobs"]["data"],
        rtol=1e-6,
    )
    assert decoded.metrics["loss:sum"] == pytest.approx(json_answer["metrics"]["loss:sum"])
    applied = api.get("/_local/stats").json()["models"][model_id]["applied"]
    assert applied[-1]["kind"] == "forward"

    sample = api.ok(
        "/api/v1/asample",
        {
            "prompt": {"chunks": [{"tokens": TOKENS}]},
            "sampling_params": {"max_tokens": 3, "seed": 1},
            "base_model": "tinker-lite/tiny-64",
            "prompt_logprobs": True,
        },
    )
    proto_sample = api.poll(sample["request_id"], accept="application/x-protobuf, application/json")
    assert proto_sample.headers["Content-Type"] == "application/x-protobuf"
    decoded_sample = _proto.decode_sample_response(proto_sample.content)
    json_sample = api.result(sample["request_id"])
    assert decoded_sample.sequences[0].tokens == json_sample["sequences"][0]["tokens"]
    # a non-protobuf result is JSON whatever the Accept header says
    other = api.ok("/api/v1/optim_step", {"model_id": model_id, "seq_id": 2, "adam_params": {}})
    answer = api.poll(other["request_id"], accept="application/x-protobuf")
    assert answer.headers["Content-Type"] == "application/json"


def test_unload_model(api: Api) -> None:
    model_id = api.model(api.session())
    held = api.ok("/api/v1/optim_step", {"model_id": model_id, "seq_id": 2, "adam_params": {}})
    result = api.run("/api/v1/unload_model", {"model_id": model_id})
    assert result["model_id"] == model_id
    failed = api.result(held["request_id"])
    assert failed["category"] == "user"
    assert "unloaded" in failed["error"]
    response = api.post("/api/v1/get_info", {"model_id": model_id})
    assert response.status_code == 404


def test_data_dir_keeps_checkpoints_across_restarts(tmp_path: Any) -> None:
    with LocalServer(data_dir=tmp_path, stub_model=True) as url:
        api = Api(url)
        model_id = api.model(api.session())
        path = api.run("/api/v1/save_weights", {"model_id": model_id, "path": "keep", "seq_id": 1})[
            "path"
        ]
        api.close()
    assert (tmp_path / "runs").is_dir()
    with LocalServer(data_dir=tmp_path, stub_model=True) as url:
        api = Api(url)
        listed = api.get(f"/api/v1/training_runs/{model_id}/checkpoints").json()["checkpoints"]
        assert [c["tinker_path"] for c in listed] == [path]
        session_id = api.session()
        created = api.run(
            "/api/v1/load_weights",
            {"session_id": session_id, "model_seq_id": 0, "path": path, "optimizer": True},
        )
        assert created["model_id"] == f"{session_id}:train:0"
        api.close()


def _rl_proto_body(model_id: str, seq_id: int, loss_fn_config: dict[str, float | str]) -> bytes:
    n = len(TOKENS) - 1
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints(TOKENS[:-1]),
            loss_fn_inputs={
                "target_tokens": np.array(TOKENS[1:], dtype=np.int64),
                "logprobs": np.full(n, -2.0, dtype=np.float32),
                "advantages": np.ones(n, dtype=np.float32),
            },
        )
    ]
    return _proto.encode_forward_backward_request(
        model_id=model_id,
        seq_id=seq_id,
        data=data,
        loss_fn="dro",
        loss_fn_config=loss_fn_config,
        forward_only=False,
    )


def test_dro_reference_string_config_and_seq_id_checks(api: Api) -> None:
    model_id = api.model(api.session())
    url = api.base_url + "/api/v1/forward_backward"
    proto = {"Content-Type": "application/x-protobuf"}
    # docs/protocol.rst §3.4: the 0.38 SDK sends reference="sampler" as loss_fn_config_v2 text
    body = _rl_proto_body(model_id, 1, {"beta": 0.05, "reference": "sampler"})
    submitted = api.http.post(url, data=body, headers=proto, timeout=30)
    assert submitted.status_code == 200, submitted.text
    result = api.result(submitted.json()["request_id"])
    assert "loss:sum" in result["metrics"]
    forward = api.run("/api/v1/forward", fb_body(model_id, 2, [datum(TOKENS)], "forward_input"))
    assert "error" not in forward

    negative = api.http.post(url, data=_rl_proto_body(model_id, -1, {}), headers=proto, timeout=30)
    assert negative.status_code == 422
    assert negative.json()["detail"][0]["loc"] == ["body", "seq_id"]
    # a seq_id already taken by another kind of request is not a resend of it
    reused = api.post("/api/v1/optim_step", {"model_id": model_id, "seq_id": 1, "adam_params": {}})
    assert reused.status_code == 400
    assert "seq_id 1" in reused.json()["detail"]
    assert "already used by its forward_backward request" in reused.json()["detail"]
    creation = api.post("/api/v1/forward", fb_body(model_id, 0, [datum(TOKENS)], "forward_input"))
    assert creation.status_code == 400
    assert "create_model" in creation.json()["detail"]
    # nothing of that was applied
    applied = api.get("/_local/stats").json()["models"][model_id]["applied"]
    assert [(a["seq_id"], a["kind"]) for a in applied] == [
        (0, "create_model"),
        (1, "forward_backward"),
        (2, "forward"),
    ]


def test_failed_create_from_state_leaves_no_model_to_train(api: Api) -> None:
    session_id = api.session()
    model_id = api.model(session_id)
    sampler_path = api.run(
        "/api/v1/save_weights_for_sampler", {"model_id": model_id, "path": "s", "seq_id": 1}
    )["path"]
    # a sampler checkpoint holds no optimizer state: the load, and so the creation, fails
    created = api.ok(
        "/api/v1/load_weights",
        {"session_id": session_id, "model_seq_id": 1, "path": sampler_path, "optimizer": True},
    )
    failed = api.result(created["request_id"])
    assert failed["category"] == "user"
    assert "holds no optimizer state" in failed["error"]
    forward = api.run(
        "/api/v1/forward", fb_body(created["model_id"], 1, [datum(TOKENS)], "forward_input")
    )
    assert forward["category"] == "user"
    assert "could not be created" in forward["error"]


# -- audio (dmel) chunks: read like image chunks, refused by the text-only model (§2) -----------

PROTOBUF = {"Content-Type": "application/x-protobuf"}
AUDIO: dict[str, Any] = {"dmel": base64.b64encode(dmel_chunk(3).dmel).decode(), "type": "dmel"}
IMAGE: dict[str, Any] = {
    "data": "iVBORw0KGgo=",
    "format": "png",
    "expected_tokens": 3,
    "type": "image",
}


def _sample_body(chunk: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": {"chunks": [{"tokens": [1, 2], "type": "encoded_text"}, chunk]},
        "sampling_params": {"max_tokens": 2},
        "base_model": "tinker-lite/tiny-64",
    }


def _json_datum(chunk: dict[str, Any]) -> dict[str, Any]:
    out = datum([1, 2, 3, 4, 5, 6])  # 5 positions: 2 text tokens and the 3 of the chunk
    out["model_input"]["chunks"] = [{"tokens": [1, 2], "type": "encoded_text"}, chunk]
    return out


def _post_protobuf(
    api: Api, model_id: str, seq_id: int, chunk: types.ModelInputChunk
) -> requests.Response:
    """A forward_backward of one datum whose input is two tokens and ``chunk``, as protobuf."""
    datum = types.Datum(
        model_input=types.ModelInput(chunks=[types.EncodedTextChunk(tokens=[1, 2]), chunk]),
        loss_fn_inputs={"target_tokens": [2, 3, 4, 5, 6]},
    )
    body = _proto.encode_forward_backward_request(
        model_id=model_id,
        seq_id=seq_id,
        data=[datum],
        loss_fn="cross_entropy",
        loss_fn_config=None,
        forward_only=False,
    )
    url = api.base_url + "/api/v1/forward_backward"
    return api.http.post(url, data=body, headers=PROTOBUF, timeout=30)


def _not_supported(kind: str, where: str) -> str:
    return (
        f"{where}.chunks[1]: {kind} chunks are not supported by the local server's text-only "
        "model; send encoded_text chunks"
    )


def test_a_sample_prompt_with_audio_fails_as_a_user_error_as_an_image_does(api: Api) -> None:
    for kind, chunk in (("dmel", AUDIO), ("image", IMAGE)):
        failed = api.run("/api/v1/asample", _sample_body(chunk))
        assert failed == {"error": _not_supported(kind, "prompt"), "category": "user"}


def test_a_json_forward_backward_with_audio_fails_as_a_user_error(api: Api) -> None:
    model_id = api.model(api.session())
    for seq_id, (kind, chunk) in enumerate((("dmel", AUDIO), ("image", IMAGE)), start=1):
        body = fb_body(model_id, seq_id, [_json_datum(chunk)], "forward_backward_input")
        failed = api.run("/api/v1/forward_backward", body)
        assert failed == {
            "error": _not_supported(kind, "data[0].model_input"),
            "category": "user",
        }


def test_a_protobuf_forward_backward_with_audio_fails_as_a_user_error(api: Api) -> None:
    model_id = api.model(api.session())
    chunks: list[tuple[str, types.ModelInputChunk]] = [
        ("dmel", dmel_chunk(3)),
        ("image", types.ImageChunk(data=b"\x89PNG", format="png", expected_tokens=3)),
    ]
    for seq_id, (kind, chunk) in enumerate(chunks, start=1):
        submitted = _post_protobuf(api, model_id, seq_id, chunk)
        assert submitted.status_code == 200, submitted.text
        failed = api.result(submitted.json()["request_id"])
        assert failed == {
            "error": _not_supported(kind, "data[0].model_input"),
            "category": "user",
        }


def test_a_malformed_header_is_refused_when_the_request_is_read(api: Api) -> None:
    model_id = api.model(api.session())
    # protobuf: the decoder refuses the chunk, naming it (400)
    refused = _post_protobuf(api, model_id, 1, types.DmelChunk(dmel=b"\0" * 16))
    assert refused.status_code == 400
    detail = refused.json()["detail"]
    assert "data[0].model_input[1].dmel: DmelChunk.dmel" in detail
    assert "no dimension" in detail
    # JSON: the request model refuses it (422), as an image with empty data
    malformed = {"dmel": "AAAAAA==", "type": "dmel"}
    for path, body in (
        ("/api/v1/asample", _sample_body(malformed)),
        (
            "/api/v1/forward_backward",
            fb_body(model_id, 1, [_json_datum(malformed)], "forward_backward_input"),
        ),
    ):
        answer = api.post(path, body)
        assert answer.status_code == 422, answer.text
        assert "chunks[1].dmel: holds a tensor of no dimension" in answer.text
    applied = api.get("/_local/stats").json()["models"][model_id]["applied"]
    assert [a["kind"] for a in applied] == ["create_model"]
