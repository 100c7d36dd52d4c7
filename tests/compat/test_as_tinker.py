"""``python -m tinker_lite.as_tinker``: official-SDK scripts run unchanged on tinker_lite."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tinker_lite
from tests.support.paths import REPO
from tinker_lite import as_tinker
from tinker_lite._version import WIRE_SDK_VERSION
from tinker_lite.local import LocalServer

OFFICIAL_STYLE_SCRIPT = """
import asyncio
import sys
import warnings

import tinker
from tinker import types
from tinker.types.datum import Datum
from tinker.lib.public_interfaces.api_future import APIFuture
from tinker._exceptions import TinkerError

BASE_MODEL = "tinker-lite/tiny-64"


def datum(tokens):
    return Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:]},
    )


async def train_step_async(training_client, data):
    warnings.simplefilter("ignore", FutureWarning)  # the official *_async twins warn
    fwd = await training_client.forward_backward_async(data, "cross_entropy")
    opt = await training_client.optim_step_async(types.AdamParams(learning_rate=1e-2))
    result = await fwd
    await opt
    return result.metrics["loss:sum"]


if __name__ == "__main__":
    print("name", __name__, "argv", sys.argv[1:])
    print("module", tinker.__name__, isinstance(TinkerError("x"), tinker.TinkerError))
    service_client = tinker.ServiceClient(base_url="local://", telemetry=False)
    training_client = service_client.create_lora_training_client(base_model=BASE_MODEL, rank=4)
    tokenizer = training_client.get_tokenizer()
    tokens = tokenizer.encode("hel") + tokenizer.encode("lo")
    print("tokenizer", tokenizer.decode(tokens) == "hello")
    data = [datum([1, 2, 3, 4, 5, 6]), datum([7, 8, 9, 10])]
    losses = []
    for _ in range(3):
        fwd = training_client.forward_backward(data, "cross_entropy")
        opt = training_client.optim_step(types.AdamParams(learning_rate=1e-2))
        assert isinstance(fwd, APIFuture)
        losses.append(fwd.result().metrics["loss:sum"])
        opt.result()
    losses.append(asyncio.run(train_step_async(training_client, data)))
    print("losses", " ".join(f"{x:.6f}" for x in losses))
    sampling_client = training_client.save_weights_and_get_sampling_client(name="s")
    params = types.SamplingParams(max_tokens=3, temperature=0.0)
    response = sampling_client.sample(types.ModelInput.from_ints([1, 2]), 2, params).result()
    print("samples", len(response.sequences), len(response.sequences[0].tokens))
    service_client.close("success").result()
    sys.exit(int(sys.argv[1]))
"""


# Written for the official SDK 0.38, sync and async idioms; prints only deterministic results.
SAME_OUTPUT_SCRIPT = """
import asyncio
import sys
import warnings

import tinker
from tinker import types

warnings.simplefilter("ignore")
url = sys.argv[1]
service = tinker.ServiceClient(base_url=url, api_key="tml-local-test")
training = service.create_lora_training_client(base_model="Qwen/Qwen3-8B", rank=4)
tokens = list(b"hello world, hello tinker")
datum = types.Datum(
    model_input=types.ModelInput.from_ints(tokens[:-1]),
    loss_fn_inputs={"target_tokens": tokens[1:]},
)


async def step() -> float:
    fwd = await training.forward_backward_async([datum], "cross_entropy")
    opt = await training.optim_step_async(types.AdamParams(learning_rate=1e-2))
    out = await fwd
    await opt
    return out.metrics["loss:sum"]


losses = []
for _ in range(2):
    fwd = training.forward_backward([datum], "cross_entropy")
    opt = training.optim_step(types.AdamParams(learning_rate=1e-2))
    losses.append(fwd.result().metrics["loss:sum"])
    opt.result()
losses.append(asyncio.run(step()))
print("losses", [round(x, 3) for x in losses])
sampler = training.save_weights_and_get_sampling_client(name="s").result()


async def sample():
    params = types.SamplingParams(max_tokens=6, temperature=0.0)
    direct = await sampler.sample(types.ModelInput.from_ints(tokens[:5]), 1, params)
    twin = await sampler.sample_async(types.ModelInput.from_ints(tokens[:5]), 1, params)
    return direct, twin


direct, twin = asyncio.run(sample())
print("sample", list(direct.sequences[0].tokens), list(twin.sequences[0].tokens))
print("types", type(direct).__name__, type(losses[0]).__name__)
print("OK")
"""

OFFICIAL_PYTHON = (
    Path(
        os.environ.get("TINKER_OFFICIAL_VENV")
        or Path.home() / ".cache" / "tinker-lite-bench" / "official-venv"
    )
    / "bin"
    / "python"
)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "tinker_lite.as_tinker", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_official_style_script_trains_and_samples(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(OFFICIAL_STYLE_SCRIPT, encoding="utf-8")
    result = _run(str(script), "5", "--flag", cwd=REPO)
    assert result.returncode == 5, result.stderr
    out = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert out["name"] == "__main__ argv ['5', '--flag']"
    assert out["module"] == "tinker True"
    losses = [float(x) for x in out["losses"].split()]
    assert len(losses) == 4
    assert losses[-1] < losses[0], losses
    assert out["samples"] == "2 3"
    assert out["tokenizer"] == "True"


@pytest.mark.skipif(not OFFICIAL_PYTHON.exists(), reason="official SDK venv not installed")
def test_same_script_prints_the_same_as_with_the_official_sdk(tmp_path: Path) -> None:
    """The drop-in claim both ways: one official-style script, the official SDK and as_tinker,
    each against a fresh local server, print the same losses, samples and result types."""
    script = tmp_path / "same.py"
    script.write_text(SAME_OUTPUT_SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER")}
    outputs = []
    for command in (
        [str(OFFICIAL_PYTHON), str(script)],
        [sys.executable, "-m", "tinker_lite.as_tinker", str(script)],
    ):
        with LocalServer() as url:
            result = subprocess.run(
                [*command, url],
                capture_output=True,
                text=True,
                env={**env, "PYTHONPATH": str(REPO)} if command[0] == sys.executable else env,
                timeout=110,
                check=False,
            )
        assert result.returncode == 0, result.stderr[-3000:]
        outputs.append(result.stdout)
    official, ours = outputs
    assert official.endswith("OK\n")
    assert ours == official


def test_script_directory_is_on_the_path_and_errors_exit_1(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("VALUE = 'from the script dir'\n", encoding="utf-8")
    script = tmp_path / "fails.py"
    script.write_text(
        "import helper\nprint(helper.VALUE)\nraise RuntimeError('boom in script')\n",
        encoding="utf-8",
    )
    result = _run(str(script), cwd=REPO)
    assert result.returncode == 1
    assert result.stdout == "from the script dir\n"
    assert "RuntimeError: boom in script" in result.stderr


def test_module_mode_runs_as_main(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "job.py").write_text(
        "import sys\nimport tinker.types as t\n"
        "print(__name__, sys.argv[1:], t.__name__, t.Datum.__module__)\nsys.exit(0)\n",
        encoding="utf-8",
    )
    result = _run("-m", "pkg.job", "x", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "__main__ ['x'] tinker.types tinker_lite.types.datum"


def test_usage_and_missing_script(tmp_path: Path) -> None:
    result = _run(cwd=tmp_path)
    assert result.returncode == 2
    assert "usage: python -m tinker_lite.as_tinker" in result.stderr
    result = _run(str(tmp_path / "absent.py"), cwd=tmp_path)
    assert result.returncode == 2
    assert "absent.py" in result.stderr
    helped = _run("--help", cwd=tmp_path)
    assert helped.returncode == 0
    assert "Not covered" in helped.stdout


@pytest.fixture
def installed() -> Iterator[None]:
    as_tinker.install()
    try:
        yield
    finally:
        as_tinker.uninstall()
    assert "tinker" not in sys.modules


@pytest.mark.usefixtures("installed")
def test_covered_modules_resolve_to_tinker_lite() -> None:
    import tinker
    import tinker._exceptions
    import tinker.lib.public_interfaces.training_client
    import tinker.types.sampling_params

    from tinker_lite import _errors, training_client

    assert tinker.__name__ == "tinker"
    assert tinker.ServiceClient is tinker_lite.ServiceClient
    assert tinker.__version__ == WIRE_SDK_VERSION
    assert tinker._exceptions.TinkerError is _errors.TinkerError
    trainer_module = tinker.lib.public_interfaces.training_client
    assert trainer_module.TrainingClient is training_client.TrainingClient
    assert tinker.types.sampling_params.SamplingParams is tinker_lite.types.SamplingParams
    assert "ServiceClient" in dir(tinker)
    # tinker_lite's own modules are untouched: package data and submodules still resolve.
    assert tinker_lite.__spec__ is not None
    assert tinker_lite.__spec__.name == "tinker_lite"
    assert not hasattr(tinker_lite, "lib")
    assert tinker_lite.types.__spec__ is not None
    assert tinker_lite.types.__spec__.name == "tinker_lite.types"


@pytest.mark.usefixtures("installed")
def test_uncovered_official_modules_fail_naming_them() -> None:
    with pytest.raises(ImportError, match=r"'tinker\.lib\.retry_handler' is a module of the"):
        import tinker.lib.retry_handler
    with pytest.raises(ImportError, match=r"'tinker\.resources'"):
        import tinker.resources  # noqa: F401


def test_install_is_idempotent_and_uninstall_restores() -> None:
    before = list(sys.meta_path)
    as_tinker.install()
    as_tinker.install()
    try:
        assert sum(isinstance(f, as_tinker.TinkerAliasFinder) for f in sys.meta_path) == 1
    finally:
        as_tinker.uninstall()
    assert sys.meta_path == before


VERSION_SCRIPT = """
import importlib.metadata
import tinker
import tinker._version
import tinker_lite

print(tinker.__version__, tinker._version.__version__, tinker._version.__title__)
print(importlib.metadata.version("tinker"), importlib.metadata.metadata("tinker")["Name"])
major, minor = (int(part) for part in importlib.metadata.version("tinker").split(".")[:2])
print("recent" if (major, minor) >= (0, 30) else "old", tinker_lite.__version__)
"""


def test_code_asking_which_tinker_it_runs_on_gets_the_official_release(tmp_path: Path) -> None:
    script = tmp_path / "versions.py"
    script.write_text(VERSION_SCRIPT, encoding="utf-8")
    result = _run(str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{WIRE_SDK_VERSION} {WIRE_SDK_VERSION} tinker",
        f"{WIRE_SDK_VERSION} tinker",
        f"recent {tinker_lite.__version__}",
    ]


def test_the_tinker_distribution_exists_only_while_the_hook_is_installed() -> None:
    import importlib.metadata
    import importlib.util

    as_tinker.install()
    try:
        assert importlib.metadata.version("tinker") == WIRE_SDK_VERSION
        assert importlib.metadata.version("tinker-lite") == tinker_lite.__version__
    finally:
        as_tinker.uninstall()
    if importlib.util.find_spec("tinker") is None:  # without the hook, nothing changes
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            importlib.metadata.version("tinker")
    assert tinker_lite.__version__ != WIRE_SDK_VERSION
