"""Hardened response decoding: hostile bodies give typed tinker_lite errors, nothing else.

Random JSON values and mutated valid answers (keys dropped, values retyped, garbage added,
bodies truncated) are fed to every decoding path the clients use on a service's answers:
``_wire.loads`` and ``_wire.structure`` for every response model, the session holder's ``parse``
(direct answers),
the result decoders handed to the poller (JSON and protobuf results), the poller itself (a
``retrieve_future`` answer of any shape resolves the future or fails it with a TinkerError,
never hangs), the chunk-merging of results, the archive-URL answer, ``Retry-After`` parsing and
the JWT expiry read. Only :class:`~tinker_lite.TinkerError` subclasses may escape; a KeyError,
TypeError, IndexError or AttributeError escaping is a bug. The protobuf decoders have their
own fuzz tests in tests/unit/codec/test_proto_fuzz.py.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import datetime, timezone
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.holder import holder_from
from tinker_lite import types
from tinker_lite._api import decode_forward_backward as _decode_forward_backward
from tinker_lite._api import decode_sample as _decode_sample
from tinker_lite._api import json_result
from tinker_lite._api.rest import archive_url
from tinker_lite._codec import proto as _proto
from tinker_lite._codec import wire as _wire
from tinker_lite._codec.chunking import combine_outputs
from tinker_lite._codec.decoding import parse_model
from tinker_lite._errors import TinkerError
from tinker_lite._futures.poller import Poll, Poller
from tinker_lite._session.credentials import jwt_expiry
from tinker_lite._session.holder import SessionHolder
from tinker_lite._transport.answers import JSON, PROTOBUF, HttpResponse
from tinker_lite._transport.http import PoolKind, Timeout
from tinker_lite._transport.retry import parse_retry_after

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
CHECKPOINT = types.Checkpoint(
    checkpoint_id="weights/step-1",
    checkpoint_type="training",
    time=NOW,
    tinker_path="tinker://run-1/weights/step-1",
    size_bytes=123,
    expires_at=NOW,
)
RUN = types.TrainingRun(
    training_run_id="run-1",
    base_model="Qwen/Qwen3-8B",
    model_owner="me",
    is_lora=True,
    lora_rank=8,
    last_request_time=NOW,
    last_checkpoint=CHECKPOINT,
    user_metadata={"k": "v"},
)
CURSOR = types.Cursor(offset=0, limit=20, total_count=1)
TENSOR = types.TensorData.from_numpy(np.array([0.5, -1.25], dtype=np.float32))

# One valid instance of every response model the clients decode.
SEEDS: list[Any] = [
    types.UntypedAPIFuture(request_id="req-1", model_id="run-1"),
    types.TryAgainResponse(
        request_id="req-1", queue_state="paused_capacity", queue_state_reason="x"
    ),
    types.RequestFailedResponse(error="boom", category=types.RequestErrorCategory.USER),
    types.CreateSessionResponse(session_id="sess-1", warning_message="careful"),
    types.SessionHeartbeatResponse(),
    types.CreateSamplingSessionResponse(sampling_session_id="sess-1:sample:0"),
    types.CreateModelResponse(model_id="run-1"),
    types.GetInfoResponse(
        model_id="run-1",
        model_data=types.ModelData(arch="x", model_name="m", tokenizer_id="t"),
        is_lora=True,
        lora_rank=8,
        model_name="m",
    ),
    types.UnloadModelResponse(model_id="run-1"),
    types.ForwardBackwardOutput(
        loss_fn_output_type="CrossEntropyLossReturn",
        loss_fn_outputs=[{"logprobs": TENSOR, "elementwise_loss": TENSOR}],
        metrics={"loss:sum": 1.5, "tokens:unique": 3.0},
    ),
    types.OptimStepResponse(metrics={"grad_norm:mean": 0.1}),
    types.SaveWeightsResponse(path="tinker://run-1/weights/a"),
    types.LoadWeightsResponse(path="tinker://run-1/weights/a", model_id="run-1"),
    types.SaveWeightsForSamplerResponseInternal(path="tinker://run-1/sampler_weights/a"),
    types.SampleResponse(
        sequences=[
            types.SampledSequence(stop_reason="stop", tokens=[1, 2], logprobs=[-0.5, -1.0]),
            types.SampledSequence(stop_reason="length", tokens=[3], logprobs=None),
        ],
        prompt_logprobs=[None, -0.25],
        topk_prompt_logprobs=[None, [(1, -0.5), (2, -1.5)]],
    ),
    types.GetServerCapabilitiesResponse(
        supported_models=[types.SupportedModel(model_name="m", max_context_length=512)]
    ),
    types.HealthResponse(),
    types.TelemetryResponse(),
    types.ClientConfigResponse(pjwt_auth_enabled=True, fwdbwd_max_chunk_len=7),
    types.AuthTokenResponse(jwt="a.b.c"),
    types.CheckpointsListResponse(checkpoints=[CHECKPOINT], cursor=CURSOR),
    RUN,
    types.TrainingRunsResponse(training_runs=[RUN], cursor=CURSOR),
    types.CheckpointArchiveUrlResponse(url="https://x/y.tar.gz", expires=NOW),
    types.WeightsInfoResponse(base_model="m", is_lora=True, lora_rank=8, train_mlp=False),
    types.GetSamplerResponse(sampler_id="s", base_model="m", model_path=None),
    types.ListSessionsResponse(sessions=["sess-1"], cursor=CURSOR),
    types.GetSessionResponse(training_run_ids=["run-1"], sampler_ids=["s"]),
]
RESPONSE_CLASSES: list[type[Any]] = [type(seed) for seed in SEEDS]
SEED_DOCS: list[tuple[type[Any], Any]] = [(type(s), _wire.to_builtins(s)) for s in SEEDS]

# -- strategies --------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "stop", "length", "float32", "int64", "user", "try_again", "error"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _paths(value, (*prefix, index))


def _replace(doc: Any, path: tuple[Any, ...], make: Callable[[Any], Any]) -> Any:
    if not path:
        return make(doc)
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        copy = dict(doc)
        copy[head] = _replace(copy[head], rest, make)
        return copy
    copy_list = list(doc)
    copy_list[head] = _replace(copy_list[head], rest, make)
    return copy_list


_DROP = object()


def _drop(value: Any) -> Any:
    return _DROP


def _strip_dropped(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _strip_dropped(v) for k, v in doc.items() if v is not _DROP}
    if isinstance(doc, list):
        return [_strip_dropped(v) for v in doc if v is not _DROP]
    return doc


def _constant(new: Any) -> Callable[[Any], Any]:
    return lambda _: new


def _with_key(key: str, value: Any) -> Callable[[Any], Any]:
    return lambda v: {**v, key: value} if isinstance(v, dict) else v


def _wrapped(value: Any) -> Any:
    return [value]


def _emptied(value: Any) -> Any:
    return type(value)() if isinstance(value, (dict, list, str)) else value


@st.composite
def mutated(draw: st.DrawFn) -> tuple[type[Any], Any]:
    """A valid answer of one model with 1-4 mutations: drop, retype, garbage, wrap."""
    cls, doc = draw(st.sampled_from(SEED_DOCS))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(list(_paths(doc))))
        kind = draw(st.sampled_from(["drop", "retype", "garbage", "wrap", "empty"]))
        if kind == "drop" and path:
            doc = _replace(doc, path, _drop)
        elif kind == "retype":
            doc = _replace(doc, path, _constant(draw(json_values)))
        elif kind == "garbage":
            doc = _replace(doc, path, _with_key(draw(st.text(max_size=6)), draw(json_values)))
        elif kind == "wrap":
            doc = _replace(doc, path, _wrapped)
        else:
            doc = _replace(doc, path, _emptied)
        doc = _strip_dropped(doc)
    return cls, doc


def _decode(body: bytes, cls: type[Any]) -> Any:
    return _wire.structure(_wire.loads(body), cls)


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


bodies = st.one_of(
    st.binary(max_size=64),
    json_values.map(_encode),
    mutated().map(lambda pair: _encode(pair[1])),
    # valid answers cut short, as a dropped connection leaves them
    st.tuples(st.sampled_from(SEED_DOCS), st.floats(0, 1)).map(
        lambda pair: (b := _encode(pair[0][1]))[: int(len(b) * pair[1])]
    ),
)


def _typed_only(call: Callable[[], object]) -> None:
    """Run ``call``; it may return or raise a TinkerError, nothing else."""
    try:
        call()
    except TinkerError:
        pass


def _response(body: bytes, content_type: str = JSON, status: int = 200) -> HttpResponse:
    return HttpResponse(status, {"content-type": content_type}, body)


# -- the decoders ------------------------------------------------------------------------------


def test_seeds_decode() -> None:
    for cls, doc in SEED_DOCS:
        assert _wire.structure(_wire.loads(_encode(doc)), cls) is not None


@FUZZ
@given(cls=st.sampled_from(RESPONSE_CLASSES), body=bodies)
def test_wire_decode_of_every_response_model(cls: type[Any], body: bytes) -> None:
    _typed_only(lambda: _decode(body, cls))
    _typed_only(lambda: _wire.structure(_wire.loads(body), cls, strict=True))


@pytest.mark.parametrize("parser", ["orjson", "json"])
@pytest.mark.parametrize("depth", [64, 1000, 20_000])
def test_deeply_nested_answers(monkeypatch: pytest.MonkeyPatch, parser: str, depth: int) -> None:
    if parser == "json":
        monkeypatch.setattr(_wire, "_orjson", None)
    nested = b"[" * depth + b"]" * depth
    for body in (nested, b'{"sequences": ' + nested + b', "loss_fn_outputs": ' + nested + b"}"):
        for cls in RESPONSE_CLASSES:
            _typed_only(partial(_decode, body, cls))


@FUZZ
@given(pair=mutated())
def test_wire_decode_of_mutated_answers(pair: tuple[type[Any], Any]) -> None:
    cls, doc = pair
    _typed_only(lambda: _wire.structure(doc, cls))


@pytest.fixture(scope="module")
def holder() -> Iterator[SessionHolder]:
    """A session holder that never starts (nothing is sent)."""
    made = holder_from(base_url="http://127.0.0.1:9", lazy=True, telemetry=False)
    yield made
    made.close()


@FUZZ
@given(cls=st.sampled_from(RESPONSE_CLASSES), body=bodies)
def test_direct_answers_parse(holder: SessionHolder, cls: type[Any], body: bytes) -> None:
    _typed_only(lambda: parse_model(_response(body), cls))


@FUZZ
@given(body=bodies, protobuf=st.booleans(), cls=st.sampled_from(RESPONSE_CLASSES))
def test_result_decoders_handed_to_the_poller(body: bytes, protobuf: bool, cls: type[Any]) -> None:
    resp = _response(body, PROTOBUF if protobuf else JSON)
    _typed_only(lambda: _decode_forward_backward(resp))
    _typed_only(lambda: _decode_sample(resp))
    _typed_only(lambda: json_result(cls)(resp))


@FUZZ
@given(body=st.binary(max_size=96))
def test_protobuf_results_from_random_bytes(body: bytes) -> None:
    # The full mutation fuzz of these decoders lives in tests/unit/codec/test_proto_fuzz.py.
    _typed_only(lambda: _proto.decode_forward_backward_output(body))
    _typed_only(lambda: _proto.decode_sample_response(body))


@FUZZ
@given(
    metrics=st.lists(
        st.dictionaries(st.text(max_size=12), st.floats(allow_nan=True), max_size=4),
        min_size=1,
        max_size=3,
    )
)
def test_merging_chunk_results_with_hostile_metrics(metrics: list[dict[str, float]]) -> None:
    outputs = [
        types.ForwardBackwardOutput(loss_fn_output_type="x", loss_fn_outputs=[], metrics=m)
        for m in metrics
    ]
    _typed_only(lambda: combine_outputs(outputs))


@FUZZ
@given(
    headers=st.dictionaries(
        st.sampled_from(["retry-after", "Retry-After", "retry-after-ms", "x-other"]),
        st.text(max_size=40)
        | st.sampled_from(["1e308", "-5", "nan", "inf", "Wed, 21 Oct 2015 07:28:00 GMT"]),
        max_size=3,
    )
)
def test_retry_after_headers(headers: dict[str, str]) -> None:
    value = parse_retry_after(headers, now=1_700_000_000.0)
    assert value is None or math.isfinite(value)


@FUZZ
@given(token=st.text(max_size=60) | json_values.map(lambda v: f"h.{_encode(v).hex()}.s"))
def test_jwt_expiry_of_any_token(token: str) -> None:
    value = jwt_expiry(token)
    assert value is None or isinstance(value, float)


@FUZZ
@given(
    status=st.sampled_from([200, 301, 302, 307]),
    headers=st.dictionaries(
        st.sampled_from(["Location", "Expires", "content-type"]), st.text(max_size=30), max_size=3
    ),
    body=bodies,
)
def test_archive_url_answers(
    holder: SessionHolder, status: int, headers: dict[str, str], body: bytes
) -> None:
    resp = HttpResponse(status, headers, body)
    _typed_only(lambda: archive_url(resp, holder.settings.base_url))


# -- the poller, end to end --------------------------------------------------------------------


class _OneAnswer:
    """A service whose first poll gets ``answer``; later polls get a final error answer."""

    def __init__(self, answer: HttpResponse) -> None:
        self._answer = answer
        self._lock = threading.Lock()
        self.polls = 0

    def send(self, poll: Poll) -> HttpResponse:
        with self._lock:
            self.polls += 1
            first = self.polls == 1
        if first:
            return self._answer
        return _response(_encode({"error": "stop", "category": "server"}))

    def abort(self, pools: Collection[PoolKind] | None = None) -> None:
        pass


@FUZZ
@given(
    body=bodies
    | st.sampled_from(
        [
            b'{"type": "try_again", "request_id": "r", "queue_state": 5}',
            b'{"type": "try_again", "queue_state": "paused_capacity", "queue_state_reason": []}',
            b'{"error": null, "category": {"x": 1}}',
            b'{"error": ["x"]}',
            b'{"status": "complete_metadata"}',
        ]
    ),
    status=st.sampled_from([200, 200, 200, 400, 404, 408, 410, 422, 429, 500]),
    protobuf=st.booleans(),
    decoder=st.sampled_from(["forward_backward", "sample", "optim_step"]),
)
def test_poller_resolves_any_answer(body: bytes, status: int, protobuf: bool, decoder: str) -> None:
    decode: Mapping[str, Callable[[HttpResponse], Any]] = {
        "forward_backward": _decode_forward_backward,
        "sample": _decode_sample,
        "optim_step": json_result(types.OptimStepResponse),
    }
    transport = _OneAnswer(_response(body, PROTOBUF if protobuf else JSON, status))
    poller = Poller(
        transport.send,
        max_workers=1,
        stall_timeout=30.0,
        poll_timeout=Timeout(connect=1.0, read=1.0),
        sleep=lambda seconds: None,
    )
    try:
        future = poller.poll("req-1", "ForwardBackward", decode[decoder], created_at=0.0)
        error = future.exception(timeout=10)  # resolves: never hangs
        assert error is None or isinstance(error, TinkerError), repr(error)
    finally:
        poller.close()
