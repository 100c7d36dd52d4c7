"""Client creation returns a future of the client, and warns where the official SDK 0.38 warns.

In 0.38 ``create_lora_training_client``, ``create_training_client_from_state``
(``..._with_optimizer``), ``create_sampling_client`` (of both clients) and
``save_weights_and_get_sampling_client`` return a future of the client at once; sync code reads
``tc = service_client.create_lora_training_client(...).result()``. Using the future as the
client still works there, deprecated: each client method called on it and each attribute read
from it warns with a ``FutureWarning``. tinker_lite does the same, with the same texts; both
spellings run here against the local server. ``make test-official`` also compares the warnings
with the official SDK's own, measured in its venv.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tinker_lite as tinker
from tests.compat.test_surface import load_surface
from tests.support.paths import REPO
from tinker_lite.local import LocalServer

BASE_MODEL = "tinker-lite/tiny-64"

# The official SDK 0.38's texts, all with category FutureWarning: the @deprecated(...,
# category=FutureWarning) of every forwarding method in tinker/lib/public_interfaces/
# backcompat_training_client_future.py and backcompat_sampling_client_future.py, and the
# warnings.warn(..., FutureWarning, stacklevel=2) of BackcompatClientFuture.__getattr__ in
# backcompat_client_future.py.
OFFICIAL_METHOD_WARNING = {
    "TrainingClient": (
        "Using the future as the TrainingClient is deprecated; call .result() on it, or await "
        "it, to get the TrainingClient first"
    ),
    "SamplingClient": (
        "Using the future as the SamplingClient is deprecated; call .result() on it, or await "
        "it, to get the SamplingClient first"
    ),
}
OFFICIAL_ATTRIBUTE_WARNING = (
    "Reading `.{name}` from the future returned by a client-creation method is deprecated and "
    "will stop working in a future tinker SDK version. Call .result() on the future, or await "
    "it, to get the client first."
)
OFFICIAL_WARNINGS = {*OFFICIAL_METHOD_WARNING.values()}
FUTURE_CLASSES = {
    "BackcompatTrainingClientFuture": "TrainingClient",
    "BackcompatSamplingClientFuture": "SamplingClient",
}


@pytest.fixture(scope="module")
def local_url() -> Iterator[str]:
    with LocalServer() as url:
        yield url


def _datum() -> tinker.Datum:
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints([1, 2, 3, 4]),
        loss_fn_inputs={"target_tokens": [2, 3, 4, 5], "weights": [1.0, 1.0, 1.0, 1.0]},
    )


def _as_future(created: Any) -> Any:
    return created.result()


def _as_client(created: Any) -> Any:
    return created


@pytest.mark.parametrize("ready", [_as_future, _as_client], ids=["result", "as-the-client"])
def test_both_spellings_train_restore_and_sample(
    local_url: str, ready: Callable[[Any], Any]
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train_restore_and_sample(local_url, ready)
    messages = {str(w.message) for w in caught}
    assert all(w.category is FutureWarning for w in caught)
    if ready is _as_future:
        assert messages == set()  # .result() is the official spelling: nothing warns
    else:
        assert messages == {
            *OFFICIAL_WARNINGS,
            OFFICIAL_ATTRIBUTE_WARNING.format(name="model_id"),
        }
        assert {w.filename for w in caught} == {__file__}  # each points at the caller's line


def _train_restore_and_sample(local_url: str, ready: Callable[[Any], Any]) -> None:
    with tinker.ServiceClient(base_url=local_url, telemetry=False) as service_client:
        training_client = ready(
            service_client.create_lora_training_client(base_model=BASE_MODEL, rank=4, seed=0)
        )
        assert isinstance(training_client, tinker.TrainingClient)
        datum = _datum()
        training_client.forward_backward([datum], "cross_entropy").result()
        training_client.optim_step(tinker.AdamParams(learning_rate=1e-2)).result()
        trained = training_client.forward([datum], "cross_entropy").result().metrics["loss:sum"]

        state_path = training_client.save_state("compat-state").result().path
        restored = [
            ready(service_client.create_training_client_from_state(state_path)),
            ready(service_client.create_training_client_from_state_with_optimizer(state_path)),
        ]
        for client in restored:
            assert isinstance(client, tinker.TrainingClient)
            assert client.model_id != training_client.model_id
            loss = client.forward([datum], "cross_entropy").result().metrics["loss:sum"]
            assert loss == pytest.approx(trained, rel=1e-5)

        sampler_path = training_client.save_weights_for_sampler("compat-sampler").result().path
        samplers = [
            ready(service_client.create_sampling_client(model_path=sampler_path)),
            ready(service_client.create_sampling_client(base_model=BASE_MODEL)),
            ready(training_client.create_sampling_client(sampler_path)),
            ready(training_client.save_weights_and_get_sampling_client()),
        ]
        prompt = tinker.ModelInput.from_ints([1, 2, 3])
        params = tinker.SamplingParams(max_tokens=3, seed=0)
        for sampler in samplers:
            assert isinstance(sampler, tinker.SamplingClient)
            response = sampler.sample(prompt=prompt, num_samples=2, sampling_params=params).result()
            assert len(response.sequences) == 2
            assert all(1 <= len(seq.tokens) <= 3 for seq in response.sequences)


def test_the_future_gives_the_client_silently(local_url: str) -> None:
    with tinker.ServiceClient(base_url=local_url, telemetry=False) as service_client:
        trainer_future = service_client.create_lora_training_client(BASE_MODEL, rank=4)
        sampler_future = service_client.create_sampling_client(base_model=BASE_MODEL)
        pairs: list[tuple[tinker.APIFuture[Any], type[Any], type[Any]]] = [
            (trainer_future, tinker.TrainingClient, tinker.BackcompatTrainingClientFuture),
            (sampler_future, tinker.SamplingClient, tinker.BackcompatSamplingClientFuture),
        ]
        for future, client_class, future_class in pairs:
            # The official types hold: a future of the client, and (deprecated) the client.
            assert isinstance(future, (tinker.APIFuture, concurrent.futures.Future, future_class))
            assert isinstance(future, client_class)
            client = future.result(timeout=60)
            assert type(client) is client_class
            assert not isinstance(client, tinker.APIFuture)
            # Every future member stays silent (filterwarnings = error would raise).
            assert future.done()
            assert not future.cancelled()
            assert future.result() is client
            assert future.result(timeout=0) is client
            assert future.future().result() is client
            assert future.exception() is None
            assert asyncio.run(_awaited(future)) == (client, client, client)
            assert repr(future) == f"<{future_class.__name__}: {client!r}>"
        assert pickle.loads(pickle.dumps(sampler_future.result())).base_model == BASE_MODEL


async def _awaited(future: Any) -> tuple[Any, Any, Any]:
    return await future, await future.result_async(timeout=5), await future.coroutine()


def test_creation_returns_at_once_and_errors_surface_from_the_future(local_url: str) -> None:
    with tinker.ServiceClient(base_url=local_url, telemetry=False) as service_client:
        # Checked before anything is sent: raised by the call itself.
        with pytest.raises(tinker.InvalidInputError, match="base_model"):
            service_client.create_lora_training_client("", rank=4)
        with pytest.raises(tinker.InvalidInputError, match="model_path/base_model"):
            service_client.create_sampling_client()
        # Refused by the service: delivered by the future, also when used as the client.
        future = service_client.create_lora_training_client("no/such-model", rank=4)
        with pytest.raises(tinker.BadRequestError, match="no/such-model"):
            future.result(timeout=60)
        assert repr(future).startswith("<BackcompatTrainingClientFuture: failed: BadRequestError")
        with pytest.warns(FutureWarning, match="Using the future"):
            with pytest.raises(tinker.BadRequestError):
                future.get_info()


def test_close_waits_for_a_creation_under_way(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tinker_lite.context")
    server = LocalServer(faults="path=/api/v1/create_model,delay=0.3")
    url = server.start()
    try:
        service = tinker.ServiceClient(base_url=url, telemetry=False)
        creating = service.create_lora_training_client(BASE_MODEL, rank=2)
        sampling = service.create_sampling_client(base_model=BASE_MODEL)
        service.close()
        # Both finished before close returned: the model exists on the service, and the new
        # client of a closed connection is refused, with the run named.
        assert creating.done()
        assert sampling.done()
        with pytest.raises(tinker.ClientClosedError, match=r"train:0 was being created"):
            creating.result(timeout=0)
        assert type(sampling.result(timeout=0)) is tinker.SamplingClient
        assert [m["applied"][0]["kind"] for m in server.stats()["models"].values()] == [
            "create_model"
        ]
        assert "Closing: waiting for 2 queued requests (1 create_model request" in caplog.text

        dropping = tinker.ServiceClient(base_url=url, telemetry=False)
        dropped = dropping.create_lora_training_client(BASE_MODEL, rank=2)
        dropping.close(wait=False)
        with pytest.raises(tinker.ClientClosedError):
            dropped.result(timeout=30)
    finally:
        server.stop()


# -- every forwarder, against the official texts -------------------------------------------------


class _Client:
    """Stands for a client: answers every method (``*_async`` ones as coroutines) with its name."""

    model_id = "model-1"

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_async"):

            async def method_async(*args: Any, **kwargs: Any) -> str:
                return name

            return method_async
        return lambda *args, **kwargs: name

    def __reduce__(self) -> Any:
        return (str, ("reduced",))


def _forwarders(future_class: str) -> list[str]:
    """The members the official future class deprecates that tinker_lite's has."""
    official = load_surface()["top_level"][future_class]["methods"]
    ours = getattr(tinker, future_class)
    return sorted(m for m, f in official.items() if f.get("deprecated") and hasattr(ours, m))


@pytest.mark.parametrize(
    ("future_class", "member"),
    [(cls, member) for cls in FUTURE_CLASSES for member in _forwarders(cls)],
)
def test_every_forwarder_warns_the_official_text_and_forwards(
    future_class: str, member: str
) -> None:
    future = getattr(tinker, future_class)(tinker.APIFuture.completed(_Client()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(future, member)()
        if inspect.isawaitable(value):
            value = asyncio.run(_await(value))
    assert value == ((str, ("reduced",)) if member == "__reduce__" else member)
    assert [(w.category, str(w.message), w.filename) for w in caught] == [
        (FutureWarning, OFFICIAL_METHOD_WARNING[FUTURE_CLASSES[future_class]], __file__)
    ]


async def _await(value: Any) -> Any:
    return await value


def test_the_forwarders_cover_the_client_and_the_official_list() -> None:
    for future_class, client_class in FUTURE_CLASSES.items():
        deprecated = {
            name
            for name, member in vars(getattr(tinker, future_class)).items()
            if getattr(member, "__deprecated__", None)
        }
        # Every official forwarder but get_telemetry (tinker_lite has no telemetry object).
        official = set(_forwarders(future_class)) | {"get_telemetry"}
        assert deprecated == official - {"get_telemetry"}
        client = getattr(tinker, client_class)
        public = {n for n in dir(client) if not n.startswith("_")}
        static = {"create", "from_sampler_handle"}
        assert public - static - {"get_telemetry"} <= deprecated


def test_attributes_read_from_the_future_warn_and_forward() -> None:
    future = tinker.BackcompatTrainingClientFuture(
        tinker.APIFuture.completed(_Client())  # type: ignore[arg-type]
    )
    with pytest.warns(FutureWarning) as caught:
        assert future.model_id == "model-1"
    assert [str(w.message) for w in caught] == [OFFICIAL_ATTRIBUTE_WARNING.format(name="model_id")]
    with pytest.raises(AttributeError, match="_private"):
        future._private  # type: ignore[attr-defined]  # noqa: B018 - private names are not forwarded (nor warned about)


def test_each_call_site_warns_once_under_the_default_filters() -> None:
    future = tinker.BackcompatSamplingClientFuture(
        tinker.APIFuture.completed(_Client())  # type: ignore[arg-type]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own action for FutureWarning
        for _ in range(3):
            future.get_base_model()
            future.model_id  # type: ignore[attr-defined]  # noqa: B018 - the read itself warns
        future.get_base_model()
    lines = [w.lineno for w in caught]
    assert len(lines) == len(set(lines)) == 3, [str(w.message) for w in caught]


# -- opt-in: the official SDK's own warnings ---------------------------------------------------

OFFICIAL_VENV = Path(
    os.environ.get("TINKER_OFFICIAL_VENV")
    or Path.home() / ".cache" / "tinker-lite-bench" / "official-venv"
)

# Run in both SDKs: every deprecated member of each future class, called on a future of a stand-in
# client, and one attribute read; prints [class, member, [[category, message], ...]] as JSON.
PROBE = textwrap.dedent(
    """
    import asyncio, inspect, json, warnings

    class Client:
        model_id = "model-1"

        def __getattr__(self, name):
            if name.endswith("_async"):
                async def method_async(*args, **kwargs):
                    return name
                return method_async
            return lambda *args, **kwargs: name

    async def wait(value):
        return await value

    def seen(caught):
        return [[w.category.__name__, str(w.message)] for w in caught]

    out = []
    for cls in FUTURE_CLASSES:
        future = make_future(cls, Client())
        for name in sorted(vars(cls)):
            if not getattr(vars(cls)[name], "__deprecated__", None) or name == "__reduce__":
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = getattr(future, name)()
                if inspect.isawaitable(value):
                    asyncio.run(wait(value))
            out.append([cls.__name__, name, seen(caught)])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            future.model_id
        out.append([cls.__name__, "model_id", seen(caught)])
    print(json.dumps(out))
    """
)
OFFICIAL_SETUP = """
import concurrent.futures
from tinker.lib.public_interfaces.api_future import AwaitableConcurrentFuture
from tinker.lib.public_interfaces.backcompat_sampling_client_future import (
    BackcompatSamplingClientFuture,
)
from tinker.lib.public_interfaces.backcompat_training_client_future import (
    BackcompatTrainingClientFuture,
)

FUTURE_CLASSES = [BackcompatTrainingClientFuture, BackcompatSamplingClientFuture]

def make_future(cls, client):
    done = concurrent.futures.Future()
    done.set_result(client)
    return cls(AwaitableConcurrentFuture(done))
"""
LITE_SETUP = """
import tinker_lite

FUTURE_CLASSES = [
    tinker_lite.BackcompatTrainingClientFuture,
    tinker_lite.BackcompatSamplingClientFuture,
]

def make_future(cls, client):
    return cls(tinker_lite.APIFuture.completed(client))
"""


@pytest.mark.skipif(
    os.environ.get("TINKER_LITE_OFFICIAL") != "1" or not (OFFICIAL_VENV / "bin/python").exists(),
    reason="opt-in: make test-official (needs the official SDK 0.38 venv)",
)
def test_the_warnings_are_the_official_sdks() -> None:
    def probe(python: str, setup: str) -> dict[tuple[str, str], list[list[str]]]:
        done = subprocess.run(
            [python, "-c", setup + PROBE],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd=REPO,
        )
        return {(cls, name): seen for cls, name, seen in json.loads(done.stdout)}

    official = probe(str(OFFICIAL_VENV / "bin/python"), OFFICIAL_SETUP)
    ours = probe(sys.executable, LITE_SETUP)
    # tinker_lite has no get_telemetry (no telemetry object): every other member matches.
    assert {k for k in official if k[1] != "get_telemetry"} == set(ours)
    assert {k: official[k] for k in ours} == ours


# Run in both SDKs: a ServiceClient with keywords neither knows (it sends nothing until used).
CONSTRUCTOR_PROBE = textwrap.dedent(
    """
    import json, warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = ServiceClient(base_url="http://127.0.0.1:9", api_key="tml-probe", timeout=120,
                               request_timeout=5)
    print(json.dumps([[w.category.__name__, str(w.message), w.filename] for w in caught]))
    """
)


@pytest.mark.skipif(
    os.environ.get("TINKER_LITE_OFFICIAL") != "1" or not (OFFICIAL_VENV / "bin/python").exists(),
    reason="opt-in: make test-official (needs the official SDK 0.38 venv)",
)
def test_unknown_service_client_keywords_warn_as_the_official_sdk() -> None:
    def probe(python: str, setup: str) -> list[list[str]]:
        done = subprocess.run(
            [python, "-c", setup + CONSTRUCTOR_PROBE],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd=REPO,
        )
        seen: list[list[str]] = json.loads(done.stdout)
        return seen

    official = probe(str(OFFICIAL_VENV / "bin/python"), "from tinker import ServiceClient\n")
    ours = probe(sys.executable, "from tinker_lite import ServiceClient\n")
    assert (
        official
        == ours
        == [
            [
                "FutureWarning",
                "ServiceClient ignores unsupported arguments: request_timeout, timeout. "
                "Passing them will be an error in a future version of the Tinker SDK.",
                "<string>",  # the caller's line, in both
            ]
        ]
    )
