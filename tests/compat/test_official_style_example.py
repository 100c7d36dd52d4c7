"""examples/official_style_loop.py runs, and runs unchanged when spelled ``import tinker``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO
from tests.support.tokenizer_standin import LLAMA3_TOKENIZER, stand_in_hub_cache

EXAMPLE = REPO / "examples" / "official_style_loop.py"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINKER_", "CLOUDFLARE_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    # the Llama 3 tokenizer the local server names, stood in by files of the test's own
    env["HF_HUB_CACHE"] = str(stand_in_hub_cache(tmp_path / "hub", [LLAMA3_TOKENIZER]))
    env["TINKER_TELEMETRY"] = "0"
    return env


def _check(output: str) -> None:
    losses = [
        float(line.rsplit(" ", 1)[1]) for line in output.splitlines() if line.startswith("step")
    ]
    assert len(losses) == 5
    assert losses[-1] < losses[0]
    assert "sample: " in output


def test_example_runs_on_the_local_server(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "dev", str(EXAMPLE)],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=REPO,
        timeout=100,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    _check(result.stdout)


def test_example_runs_with_the_official_import_names(tmp_path: Path) -> None:
    source = EXAMPLE.read_text(encoding="utf-8")
    official = source.replace("import tinker_lite as tinker", "import tinker").replace(
        "from tinker_lite import types", "from tinker import types"
    )
    assert "tinker_lite" not in official
    # A stand-in `tinker` package that is tinker_lite, as `import tinker_lite as tinker` makes it.
    shim = tmp_path / "tinker.py"
    shim.write_text(
        "import sys, tinker_lite, tinker_lite.types\n"
        "sys.modules['tinker'] = tinker_lite\n"
        "sys.modules['tinker.types'] = tinker_lite.types\n",
        encoding="utf-8",
    )
    script = tmp_path / "loop.py"
    script.write_text(official, encoding="utf-8")
    env = _env(tmp_path)
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=100,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    _check(result.stdout)
