"""The how-to pages run as shown: every script they include runs here against the local server,
and the test file of "Test your own script" (docs/howto/test_my_script.py) runs as it is."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.paths import REPO

HOWTO = REPO / "docs" / "howto"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"howto_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


# The page's own test file, run as it is: its fixtures and tests become this module's.
_page_tests = load(HOWTO / "test_my_script.py")
tinker_url = _page_tests.tinker_url
no_hosted_service = _page_tests.no_hosted_service
globals().update(
    {
        f"{name}_as_shown": getattr(_page_tests, name)
        for name in dir(_page_tests)
        if name[:5] == "test_"
    }
)

# The scripts under docs/howto/ and the test that runs each (examples/ are run by test_examples).
RUN_HERE = {
    "async_code.py": "test_async_code",
    "download_checkpoint.py": "test_download_checkpoint",
    "test_my_script.py": "test_fine_tune_learns_as_shown",
}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_LITE_PROGRESS", "0")


def test_async_code(capsys: pytest.CaptureFixture[str]) -> None:
    # The page's official *_async twins warn FutureWarning; it silences them, as it shows.
    assert load(HOWTO / "async_code.py").main(["--steps", "4"]) == 0
    out = capsys.readouterr().out
    losses = [float(x) for x in re.findall(r"loss/token (\d+\.\d+)", out)]
    assert len(losses) == 4
    assert losses[-1] < losses[0]
    assert len(re.findall(r"^Assistant: '", out, re.M)) == 3
    assert re.search(r"^\d+ models; saved tinker://\S+/sampler_weights/twins$", out, re.M)


def test_download_checkpoint(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dest = tmp_path / "adapter"
    assert load(HOWTO / "download_checkpoint.py").main(["--dest", str(dest)]) == 0
    out = capsys.readouterr().out
    (listed,) = re.findall(r": (\d+) bytes listed \(the files, uncompressed\)", out)
    (archive,) = re.findall(r"archive: (\d+) bytes \(compressed\), 1 request", out)
    (extracted,) = re.findall(rf"extracted to {re.escape(str(dest))}: (\d+) bytes", out)
    assert listed == extracted  # the listed size is the files'
    assert int(archive) < int(extracted)  # the archive is compressed
    assert "LoRA rank 8" in out
    assert (dest / "adapter_model.safetensors").is_file()


def _includes(page: Path) -> list[Path]:
    text = page.read_text(encoding="utf-8")
    return [
        (page.parent / target).resolve()
        for target in re.findall(r"^\.\. literalinclude:: (\S+)", text, re.M)
    ]


def test_every_included_script_is_run_by_a_test() -> None:
    pages = [*HOWTO.glob("*.rst"), REPO / "docs" / "testing.rst", REPO / "docs" / "api.rst"]
    included = {path for page in pages for path in _includes(page)}
    assert included
    examples = REPO / "examples"
    for path in included:
        if path.parent == examples:
            continue  # tests/loopback/test_examples.py runs every example (or names its test)
        assert path.parent == HOWTO, path
        assert RUN_HERE[path.name] in globals(), path
    assert {p.name for p in HOWTO.glob("*.py")} == set(RUN_HERE)


def test_every_page_is_listed_and_linked_from_the_readme() -> None:
    index = (HOWTO / "index.rst").read_text(encoding="utf-8")
    readme = (REPO / "README.rst").read_text(encoding="utf-8")
    pages = sorted(p.stem for p in HOWTO.glob("*.rst") if p.stem != "index")
    assert len(pages) == 8
    for page in pages:
        assert f"\n   {page}\n" in index
        assert f"<docs/howto/{page}.rst>`_" in readme
    assert "howto/index" in (REPO / "docs" / "index.rst").read_text(encoding="utf-8")


def test_testing_page_needs_nothing_from_this_repository() -> None:
    page: Any = (REPO / "docs" / "testing.rst").read_text(encoding="utf-8")
    assert "tests/" not in page
    assert "tests.support" not in (HOWTO / "test_my_script.py").read_text(encoding="utf-8")
