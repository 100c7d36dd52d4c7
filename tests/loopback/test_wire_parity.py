"""The same training loop gives identical losses and logprobs over JSON and over protobuf."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import requests

from tinker_lite import ServiceClient, types
from tinker_lite.local import LocalServer


@pytest.fixture(scope="module")
def local_url() -> Iterator[str]:
    with LocalServer() as url:
        yield url


def _batch() -> list[types.Datum]:
    rng = np.random.default_rng(7)
    data = []
    for length in (5, 9, 13):
        tokens = rng.integers(1, 250, size=length + 1)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={
                    "target_tokens": tokens[1:],
                    "weights": rng.uniform(0.1, 1.0, size=length).astype(np.float32),
                },
            )
        )
    return data


def _run(url: str, wire: str) -> tuple[list[float], list[np.ndarray], list[float]]:
    with ServiceClient(base_url=url, telemetry=False, wire=wire) as client:
        assert client.holder.wire_format == wire
        trainer = client.create_lora_training_client(
            "tinker-lite/tiny-64", rank=4, seed=11
        ).result()
        data = _batch()
        losses = []
        for _ in range(3):
            fb = trainer.forward_backward(data, "cross_entropy")
            step = trainer.optim_step(types.AdamParams(learning_rate=5e-2))
            losses.append(fb.result(timeout=60).metrics["loss:sum"])
            step.result(timeout=60)
        rl = types.Datum(
            model_input=data[0].model_input,
            loss_fn_inputs={
                "target_tokens": data[0].loss_fn_inputs["target_tokens"],
                "logprobs": np.full(5, -3.0, dtype=np.float32),
                "advantages": np.linspace(-1.0, 1.0, 5, dtype=np.float32),
            },
        )
        ppo = trainer.forward_backward([rl], "ppo", {"clip_low_threshold": 0.9}).result(timeout=60)
        out = trainer.forward(data, "cross_entropy").result(timeout=60)
        logprobs = [o["logprobs"].to_numpy() for o in out.loss_fn_outputs]
        return losses, logprobs, [ppo.metrics["loss:sum"], out.metrics["loss:sum"]]


def test_json_and_protobuf_train_identically(local_url: str) -> None:
    json_losses, json_logprobs, json_extra = _run(local_url, "json")
    proto_losses, proto_logprobs, proto_extra = _run(local_url, "protobuf")
    assert json_losses[-1] < json_losses[0]
    assert proto_losses == json_losses
    assert proto_extra == json_extra
    for ours, theirs in zip(proto_logprobs, json_logprobs, strict=True):
        assert ours.dtype == theirs.dtype == np.float32
        np.testing.assert_array_equal(ours, theirs)


def test_protobuf_run_really_used_protobuf(local_url: str) -> None:
    server_stats_before = _forward_backward_counts(local_url)
    _run(local_url, "protobuf")
    after = _forward_backward_counts(local_url)
    # Over protobuf, forward goes to /forward_backward with forward_only: /forward is never used.
    assert after["/api/v1/forward"] == server_stats_before["/api/v1/forward"]
    assert after["/api/v1/forward_backward"] - server_stats_before["/api/v1/forward_backward"] == 5


def _forward_backward_counts(url: str) -> dict[str, int]:
    stats = requests.get(url.rstrip("/") + "/_local/stats", timeout=10).json()
    counts = stats["requests"]
    return {p: int(counts.get(p, 0)) for p in ("/api/v1/forward", "/api/v1/forward_backward")}
