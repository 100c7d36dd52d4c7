"""Bad input at the client-call level: refused before anything is sent, naming field and fix.

Every case calls a public client method (or the ServiceClient constructor) with one kind of bad
input built beforehand, and asserts: the error is an :class:`~tinker_lite.InvalidInputError`
(the documented :class:`ValueError` subclass), its message names the field and says how to fix
it, and the local server's request counters did not move (nothing was sent). Type-constructor
checks live in tests/unit/types/test_bad_inputs.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from tests.support.clients import service_with
from tinker_lite import InvalidInputError, types
from tinker_lite._transport.http import Transport
from tinker_lite.local import LocalServer
from tinker_lite.rest_client import RestClient
from tinker_lite.sampling_client import SamplingClient
from tinker_lite.service_client import ServiceClient
from tinker_lite.training_client import TrainingClient

BASE_MODEL = "tinker-lite/tiny-64"
MAX_CHUNK_BYTES = 20_000  # the server's fwdbwd_max_chunk_bytes_count in these tests
SECRET = "tml-bad-input-key-123"


@dataclass
class Ctx:
    """The clients every case may call, on one server."""

    server: LocalServer
    service: ServiceClient
    trainer: TrainingClient
    sampler: SamplingClient
    rest: RestClient

    @property
    def url(self) -> str:
        return self.server.base_url


@pytest.fixture(scope="module")
def ctx() -> Iterator[Ctx]:
    server = LocalServer(config_overrides={"fwdbwd_max_chunk_bytes_count": MAX_CHUNK_BYTES})
    server.start()
    # No heartbeat during the tests: the counters must only move for the cases' own requests.
    service = service_with({"heartbeat_interval": 3600}, base_url=server.base_url, telemetry=False)
    try:
        trainer = service.create_lora_training_client(BASE_MODEL, rank=8).result()
        trainer.get_tokenizer()  # makes the vocabulary size known to the client
        sampler = service.create_sampling_client(base_model=BASE_MODEL).result()
        yield Ctx(server, service, trainer, sampler, RestClient(service))
    finally:
        service.close()
        server.stop()


@pytest.fixture(autouse=True)
def _no_credentials_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TINKER_API_KEY", "TINKER_BASE_URL", "TINKER_LITE_STALL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


def datum(tokens: list[int], **inputs: Any) -> types.Datum:
    """A datum on ``tokens[:-1]``; ``target_tokens`` default to ``tokens[1:]`` (None: absent)."""
    inputs.setdefault("target_tokens", tokens[1:])
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={k: v for k, v in inputs.items() if v is not None},
    )


GOOD = datum([1, 2, 3, 4])
PROMPT = types.ModelInput.from_ints([1, 2, 3])
PARAMS = types.SamplingParams(max_tokens=3)
ADAM = types.AdamParams(learning_rate=1e-3)
F32 = np.float32


@dataclass(frozen=True)
class Case:
    """One kind of bad input: the call, the field its error names and a piece of the fix."""

    id: str
    call: Callable[[Ctx], object]
    field: str
    fix: str


CASES = [
    # -- datums and tensors (TrainingClient.forward_backward / forward) ---------------------
    Case(
        "data-not-a-list",
        lambda c: c.trainer.forward_backward("tokens", "cross_entropy"),  # type: ignore[arg-type]
        "data",
        "pass [Datum(...), ...]",
    ),
    Case(
        "datum-not-a-datum",
        lambda c: c.trainer.forward_backward([{"model_input": [1]}], "cross_entropy"),  # type: ignore[list-item]
        "data[0]",
        "Datum(model_input=..., loss_fn_inputs=...)",
    ),
    Case(
        "datum-missing-target-tokens",
        lambda c: c.trainer.forward_backward(
            [datum([1, 2, 3, 4], target_tokens=None, weights=[1.0, 1.0, 1.0])], "cross_entropy"
        ),
        "data[0].loss_fn_inputs",
        "cross_entropy takes target_tokens",
    ),
    Case(
        "datum-missing-advantages",
        lambda c: c.trainer.forward_backward(
            [datum([1, 2, 3, 4], logprobs=[0.0, 0.0, 0.0])], "importance_sampling"
        ),
        "data[0].loss_fn_inputs",
        "importance_sampling takes advantages, logprobs, target_tokens",
    ),
    Case(
        "datum-input-the-loss-does-not-take",
        lambda c: c.trainer.forward_backward(
            [datum([1, 2, 3, 4], mask=np.ones(3, dtype=F32))], "cross_entropy"
        ),
        "data[0].loss_fn_inputs",
        "fold a mask into weights or advantages",
    ),
    Case(
        "tensor-nan",
        lambda c: c.trainer.forward_backward(
            [datum([1, 2, 3, 4], weights=np.array([1.0, np.nan, 1.0], dtype=F32))],
            "cross_entropy",
        ),
        "data[0].loss_fn_inputs['weights']",
        "np.nan_to_num",
    ),
    Case(
        "tensor-token-outside-vocabulary",
        lambda c: c.trainer.forward_backward([datum([1, 2, 3, 300])], "cross_entropy"),
        "data[0].loss_fn_inputs['target_tokens']",
        "use ids from the model's tokenizer",
    ),
    Case(
        "model-input-token-outside-vocabulary",
        lambda c: c.trainer.forward(
            [datum([1, 999, 3, 4], target_tokens=[2, 3, 4])], "cross_entropy"
        ),
        "data[0].model_input.chunks[0].tokens",
        "use ids from the model's tokenizer",
    ),
    Case(
        "oversized-datum-beyond-the-server-limit",
        lambda c: c.trainer.forward_backward([datum(list(range(1, 250)) * 12)], "cross_entropy"),
        "data[0]",
        "split the sequence into shorter datums",
    ),
    # -- loss configuration -----------------------------------------------------------------
    Case(
        "loss-fn-unknown",
        lambda c: c.trainer.forward_backward([GOOD], "cross_entropi"),
        "loss_fn",
        "use one of cross_entropy, importance_sampling, ppo, cispo, dro",
    ),
    Case(
        "loss-fn-config-value",
        lambda c: c.trainer.forward_backward(
            [datum([1, 2, 3, 4], logprobs=[0.0] * 3, advantages=[1.0] * 3)],
            "ppo",
            {"clip_low_threshold": [0.8]},  # type: ignore[dict-item]
        ),
        "loss_fn_config['clip_low_threshold']",
        "values are numbers",
    ),
    Case(
        "custom-loss-not-callable",
        lambda c: c.trainer.forward_backward_custom([GOOD], "cross_entropy"),  # type: ignore[arg-type]
        "loss_fn",
        "pass a function",
    ),
    Case(
        "optim-params-not-optimizer-params",
        lambda c: c.trainer.optim_step({"learning_rate": 1e-3}),  # type: ignore[arg-type]
        "optim_params",
        "types.AdamParams(learning_rate=1e-4)",
    ),
    Case(
        "adam-params-not-adam-params",
        lambda c: c.trainer.optim_step(adam_params={"learning_rate": 1e-3}),  # type: ignore[arg-type]
        "adam_params",
        "types.AdamParams(learning_rate=1e-4)",
    ),
    # -- model inputs and sampling params (SamplingClient.sample) ---------------------------
    Case(
        "prompt-not-a-model-input",
        lambda c: c.sampler.sample([1, 2, 3], 1, PARAMS),  # type: ignore[arg-type]
        "prompt",
        "types.ModelInput.from_ints(tokens)",
    ),
    Case(
        "prompt-empty",
        lambda c: c.sampler.sample(types.ModelInput.empty(), 1, PARAMS),
        "prompt",
        "give at least one prompt token",
    ),
    Case(
        "sampling-params-not-sampling-params",
        lambda c: c.sampler.sample(PROMPT, 1, {"max_tokens": 3}),  # type: ignore[arg-type]
        "sampling_params",
        "types.SamplingParams(max_tokens=32)",
    ),
    Case("num-samples-zero", lambda c: c.sampler.sample(PROMPT, 0, PARAMS), "num_samples", ">= 1"),
    Case(
        "topk-prompt-logprobs-negative",
        lambda c: c.sampler.sample(PROMPT, 1, PARAMS, topk_prompt_logprobs=-1),
        "topk_prompt_logprobs",
        ">= 0",
    ),
    # -- tinker paths and checkpoint names --------------------------------------------------
    Case(
        "sample-a-training-state",
        lambda c: c.service.create_sampling_client(
            model_path="tinker://run-1/weights/step-1"
        ).result(),
        "model_path",
        "save_weights_for_sampler(name)",
    ),
    Case(
        "sampler-path-not-tinker",
        lambda c: c.service.create_sampling_client(model_path="s3://bucket/weights").result(),
        "model_path",
        "e.g. 'tinker://<run>/weights/<name>'",
    ),
    Case(
        "sampler-neither-path-nor-model",
        lambda c: c.service.create_sampling_client().result(),
        "model_path/base_model",
        "pass model_path=",
    ),
    Case(
        "load-path-not-tinker",
        lambda c: _load_state_deprecated(c.trainer, "weights/step-1"),
        "path",
        "pass the path returned by save_state",
    ),
    Case(
        "tinker-path-unknown-kind",
        lambda c: c.rest.get_training_run_by_tinker_path("tinker://run-1/bogus/step-1"),
        "tinker_path",
        "tinker://<run>/sampler_weights/<name>",
    ),
    Case(
        "checkpoint-id-without-kind",
        lambda c: c.rest.delete_checkpoint("run-1", "step-1"),
        "checkpoint_id",
        "use Checkpoint.checkpoint_id from list_checkpoints",
    ),
    Case(
        "checkpoint-name-with-slash",
        lambda c: c.trainer.save_state("runs/step-1"),
        "name",
        "e.g. 'step-100'",
    ),
    Case(
        "checkpoint-name-not-a-string",
        lambda c: c.trainer.save_weights_for_sampler(123),  # type: ignore[arg-type]
        "name",
        "e.g. 'step-100'",
    ),
    Case(
        "checkpoint-ttl-negative",
        lambda c: c.trainer.save_state("step-1", ttl_seconds=-5),
        "ttl_seconds",
        ">= 1",
    ),
    Case("rest-page-limit-zero", lambda c: c.rest.list_training_runs(limit=0), "limit", ">= 1"),
    # -- LoRA settings ----------------------------------------------------------------------
    Case(
        "lora-rank-zero",
        lambda c: c.service.create_lora_training_client(BASE_MODEL, rank=0).result(),
        "rank",
        "use e.g. rank=32",
    ),
    Case(
        "lora-nothing-to-train",
        lambda c: c.service.create_lora_training_client(
            BASE_MODEL, train_mlp=False, train_attn=False, train_unembed=False
        ).result(),
        "train_unembed/train_mlp/train_attn",
        "set at least one of them to True",
    ),
    Case(
        "base-model-empty",
        lambda c: c.service.create_lora_training_client("").result(),
        "base_model",
        "e.g. 'Qwen/Qwen3-8B'",
    ),
    # -- API keys, base URLs and client settings --------------------------------------------
    Case(
        "api-key-with-space",
        lambda c: ServiceClient(api_key="tml-abc def", base_url=c.url),
        "api_key",
        "check for a stray newline or space",
    ),
    Case(
        "base-url-not-http",
        lambda c: ServiceClient(api_key=SECRET, base_url="ftp://tinker.example"),
        "base_url",
        "http:// or https://",
    ),
    Case(
        "api-key-missing-for-a-remote-service",
        lambda c: ServiceClient(base_url="https://tinker.example"),
        "api_key",
        "pass api_key=... or set TINKER_API_KEY",
    ),
    Case(
        "stall-timeout-zero",
        lambda c: ServiceClient(base_url=c.url, stall_timeout=0),
        "stall_timeout",
        "positive number of seconds",
    ),
    Case(
        "wire-mode-unknown",
        lambda c: ServiceClient(base_url=c.url, wire="xml"),
        "wire",
        "'auto', 'protobuf' or 'json'",
    ),
    Case(
        "sample-workers-zero",
        lambda c: ServiceClient(base_url=c.url, sample_workers=0),
        "sample_workers",
        ">= 1",
    ),
    Case(
        "tls-verify-empty-string",
        lambda c: ServiceClient(base_url=c.url, verify=""),
        "verify",
        "keep the default (True)",
    ),
]


def _counters(server: LocalServer) -> tuple[Any, ...]:
    stats = server.stats()
    return (stats["requests"], stats["samples_submitted"], stats["sessions"], stats["models"])


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_before_sending(ctx: Ctx, case: Case) -> None:
    before = _counters(ctx.server)
    with pytest.raises(ValueError) as caught:
        case.call(ctx)
    error = caught.value
    assert isinstance(error, InvalidInputError), repr(error)
    assert error.field == case.field, str(error)
    assert str(error).startswith(f"{case.field}: "), str(error)
    assert case.fix in str(error), str(error)
    assert _counters(ctx.server) == before, "a request was sent"


def test_there_are_at_least_25_kinds() -> None:
    assert len(CASES) >= 25
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("variable", "value", "fix"),
    [
        ("TINKER_API_KEY", "tml-abc\n", "check for a stray newline or space"),
        ("TINKER_LITE_STALL_TIMEOUT", "-1", "positive number of seconds"),
    ],
)
def test_bad_environment_variable_is_named(
    ctx: Ctx, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, fix: str
) -> None:
    monkeypatch.setenv(variable, value)
    before = _counters(ctx.server)
    with pytest.raises(InvalidInputError) as caught:
        ServiceClient(base_url=ctx.url)
    assert caught.value.field == variable
    assert fix in str(caught.value)
    assert value.strip() not in str(caught.value) or variable != "TINKER_API_KEY"
    assert _counters(ctx.server) == before


def test_plain_http_to_a_remote_host_warns(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []

    def no_send(self: Transport, pool: object, method: str, path: str, **kwargs: object) -> None:
        sent.append(f"{method} {path}")
        raise AssertionError("nothing may be sent")

    monkeypatch.setattr(Transport, "send", no_send)
    caplog.set_level(logging.WARNING, logger="tinker_lite")
    url = "http://tinker.example:8000"
    client = ServiceClient(api_key=SECRET, base_url=url)
    client.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(url in w and "unencrypted" in w for w in warnings), warnings
    assert sent == []


def _load_state_deprecated(trainer: Any, path: str) -> object:
    """``load_state``, which warns FutureWarning first (deprecated, as in the official SDK)."""
    with pytest.warns(FutureWarning, match="load_state"):
        return trainer.load_state(path)
