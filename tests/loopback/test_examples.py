"""Every example runs against the offline server and does what it claims (small step counts)."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import tinker_lite as tinker
from tests.support.paths import REPO
from tinker_lite._session.journal import JOURNAL_KEYS
from tinker_lite.local import LocalServer

EXAMPLES_DIR = REPO / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES_DIR / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def numbers(pattern: str, text: str) -> list[float]:
    return [float(m) for m in re.findall(pattern, text)]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TINKER_BASE_URL", "TINKER_API_KEY", "TINKER_LITE_JOURNAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("TINKER_LITE_PROGRESS", "0")


# Examples whose test lives in another module (which names the example's file).
TESTED_ELSEWHERE = {
    "official_style_loop": REPO / "tests" / "compat" / "test_official_style_example.py",
    # On a Ray cluster there (make test-ray); its worker loop without Ray below.
    "rl_ray": REPO / "tests" / "loopback" / "test_rl_ray.py",
}


def test_every_example_has_main_and_a_test() -> None:
    names = sorted(path.stem for path in EXAMPLES_DIR.glob("*.py"))
    assert {"cron_job", "official_style_loop", "quickstart", "rl_loop"} <= set(names)
    readme = (EXAMPLES_DIR / "README.rst").read_text()
    for name in names:
        module = load_example(name)
        assert inspect.signature(module.main).parameters["argv"].default is None
        assert f"``{name}.py``" in readme
        elsewhere = TESTED_ELSEWHERE.get(name)
        if elsewhere is not None:
            assert f"examples/{name}.py" in elsewhere.read_text()
        else:
            assert any(test.startswith(f"test_{name}") for test in globals())


def test_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    code = load_example("quickstart").main(["--steps", "12"])
    out = capsys.readouterr().out
    assert code == 0
    losses = numbers(r"loss/token (\d+\.\d+)", out)
    assert len(losses) == 12
    assert losses[-1] < 0.5 * losses[0]
    # One sampled answer per training conversation, prompted in the hand-made chat format.
    assert out.count("Assistant: '") == 4


def test_rl_loop_importance_sampling_and_ppo(capsys: pytest.CaptureFixture[str]) -> None:
    module = load_example("rl_loop")
    for loss in ("importance_sampling", "ppo"):
        argv = ["--iterations", "2", "--group-size", "3", "--max-tokens", "6", "--loss", loss]
        assert module.main(argv) == 0
        out = capsys.readouterr().out
        samples = [int(n) for n in re.findall(r"samples (\d+)", out)]
        assert samples == [len(module.PROMPTS) * 3] * 2
        rewards = numbers(r"mean reward (\d+\.\d+)", out)
        assert rewards
        assert all(0.0 <= r <= 1.0 for r in rewards)
        # The sampler runs on the learner's current weights: their logprobs agree.
        gaps = numbers(r"logprob gap ([0-9.e+-]+)", out)
        assert gaps
        assert max(gaps) < 1e-3


def test_custom_loss(capsys: pytest.CaptureFixture[str]) -> None:
    code = load_example("custom_loss").main(["--steps", "2"])
    out = capsys.readouterr().out
    assert code == 0
    nll = numbers(r"mean NLL per answer (\d+\.\d+)", out)
    assert len(nll) == 2
    assert nll[1] < nll[0]
    (difference,) = numbers(r"custom vs built-in: ([0-9.e+-]+)", out)
    assert difference <= 1e-4


def test_resume(capsys: pytest.CaptureFixture[str]) -> None:
    code = load_example("resume").main(["--steps", "2", "--compare-without-optimizer"])
    out = capsys.readouterr().out
    assert code == 0
    assert "crashed: the machine went away" in out
    assert re.search(r"resuming from tinker://\S+/weights/resume-demo-step-2 \(step 2\)", out)
    (with_optimizer,) = numbers(r"with optimizer: ([0-9.e+-]+)", out)
    (without_optimizer,) = numbers(r"without optimizer: ([0-9.e+-]+)", out)
    assert with_optimizer <= 1e-4  # same next step as the run that crashed
    assert without_optimizer > 1e-3  # a fresh optimizer takes a different step


needs_journal = pytest.mark.skipif(
    "journal" not in inspect.signature(tinker.ServiceClient).parameters,
    reason="ServiceClient(journal=...) is not available",
)


@pytest.fixture
def server() -> Iterator[str]:
    with LocalServer() as url:
        yield url


@needs_journal
def test_cron_job(capsys: pytest.CaptureFixture[str], tmp_path: Path, server: str) -> None:
    module = load_example("cron_job")
    journal = tmp_path / "logs" / "nightly.jsonl"
    argv = ["--base-url", server, "--journal", str(journal), "--steps", "2", "--keep-last", "1"]
    assert module.main(argv) == 0
    out = capsys.readouterr().out
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert entries
    for entry in entries:
        assert tuple(entry)[: len(JOURNAL_KEYS)] == JOURNAL_KEYS
        assert entry["status"] == "ok"
    kinds = [e["kind"] for e in entries]
    assert kinds.count("forward_backward") == 2
    assert kinds.count("optim_step") == 2
    assert kinds.count("save_state") == 1
    seq_ids = [e["seq_id"] for e in entries if e["kind"] in ("forward_backward", "optim_step")]
    assert seq_ids == sorted(seq_ids)
    assert f"done: {len(entries)} operations journaled" in out

    # The next night resumes from that state and reads the journal first.
    assert module.main([*argv, "--resume-latest"]) == 0
    out = capsys.readouterr().out
    assert f"journal {journal}: {len(entries)} earlier operations (0 failed)" in out
    first_state = re.search(r"resuming from (tinker://\S+/weights/nightly-\S+)", out)
    assert first_state is not None
    # --keep-last 1: the new night's state replaces the previous one.
    assert f"pruned {first_state.group(1)}" in out


@needs_journal
def test_cron_job_resumes_on_the_offline_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The documented default, local://: the next night resumes, or says why it cannot.
    module = load_example("cron_job")
    argv = ["--journal", str(tmp_path / "j.jsonl"), "--steps", "1"]
    argv += ["--local-state-dir", str(tmp_path / "state")]
    assert module.main([*argv, "--resume-latest"]) == 0
    out = capsys.readouterr().out
    assert "no nightly-* training state to resume from: starting a new run" in out
    (saved,) = re.findall(r"^saved (tinker://\S+)$", out, re.M)
    assert module.main([*argv, "--resume-latest"]) == 0
    out = capsys.readouterr().out
    assert f"resuming from {saved}" in out


def test_rl_loop_learns_with_its_documented_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    # examples/README.rst: python examples/rl_loop.py --iterations 5 --loss ppo
    assert load_example("rl_loop").main(["--iterations", "5", "--loss", "ppo"]) == 0
    rewards = numbers(r"mean reward (\d+\.\d+)  datums", capsys.readouterr().out)
    assert len(rewards) == 5
    assert rewards[-1] >= rewards[0] + 0.3  # visibly learns
    assert all(b >= a - 0.02 for a, b in itertools.pairwise(rewards))  # never drops back


def test_rl_ray_without_ray_is_a_one_line_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    assert load_example("rl_ray").main([]) == 1
    captured = capsys.readouterr()
    assert captured.err == "rl_ray.py needs Ray: pip install 'tinker-lite[ray]'\n"


@needs_journal
def test_cron_job_exit_code_on_rejected_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_example("cron_job")
    monkeypatch.setenv("TINKER_API_KEY", "tml-wrong")
    with LocalServer(api_key="tml-right") as guarded:
        code = module.main(["--base-url", guarded, "--journal", str(tmp_path / "j.jsonl")])
    assert code == 3
    err = capsys.readouterr().err
    assert err.startswith("nightly job failed (exit 3)")
    assert "tml-wrong" not in err


@pytest.mark.parametrize("handover", ["handle", "pickle"])
def test_rl_processes_hand_the_sampler_to_worker_processes(handover: str) -> None:
    # Run as a script: spawned workers import the example by its path (as __mp_main__).
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("TINKER_")}
    env.update(TINKER_TELEMETRY="0", TINKER_LITE_PROGRESS="0")
    argv = ["--iterations", "2", "--workers", "2", "--group-size", "3", "--handover", handover]
    done = subprocess.run(
        [sys.executable, str(EXAMPLES_DIR / "rl_processes.py"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = re.findall(r"samples (\d+) from (\d+) worker processes", done.stdout)
    assert len(lines) == 2
    for samples, workers in lines:
        assert int(samples) == 4 * 3
        assert 1 <= int(workers) <= 2


def test_rl_ray_worker_loop_runs_in_one_process_without_ray(server: str) -> None:
    # The rollout and datums of the Ray actors, on a plain instance: Ray is not needed.
    module = load_example("rl_ray")
    with tinker.ServiceClient(base_url=server) as service:
        creating = service.create_lora_training_client("tinker-lite/tiny-64", rank=4, seed=0)
        training = creating.result()
        tokenizer = training.get_tokenizer()
        problems = [(12, 30), (25, 25)]
        prompts = [module.prompt_tokens(tokenizer, p) for p in problems]
        items = [(i, p, prompts[i]) for i, p in enumerate(problems)]
        sampler = training.save_weights_and_get_sampling_client().result()
        result = module.RolloutWorker(env_work=10).rollout(sampler, items, 3, 5, seed=1)
        assert result["pid"] == os.getpid()
        assert [g[0] for g in result["graded"]] == [0, 1]
        data = []
        for graded in result["graded"]:
            _, tokens, logprobs, rewards = graded
            assert len(tokens) == len(logprobs) == len(rewards) == 3
            assert [len(t) for t in tokens] == [len(lp) for lp in logprobs]
            assert all(0.0 <= r <= 1.0 for r in rewards)
            data += module.importance_sampling_data(prompts[graded[0]], graded)
        if data:  # the server checks the datums' layout
            training.forward_backward(data, "importance_sampling").result()
    # The environment step: the right sum scores 1, other digits a little, prose nothing.
    assert module.grade((12, 30), " 42", 10) == 1.0
    assert 0.0 < module.grade((12, 30), " 41", 10) < 1.0
    assert module.grade((12, 30), " yes", 10) == 0.0
