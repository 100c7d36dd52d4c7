"""The README's Python examples run as written against the embedded local server."""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.support.paths import REPO

README = REPO / "README.rst"


def _python_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^\.\. code-block:: python\n\n((?:(?:    .*)?\n)+)", text, re.M):
        blocks.append(textwrap.dedent(match.group(1)))
    return blocks


def test_readme_has_python_examples() -> None:
    assert _python_blocks(), "README.rst lost its Python examples"


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_example_runs(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    code = _python_blocks()[index]
    exec(compile(code, f"README.rst[python block {index}]", "exec"), {"__name__": "__readme__"})
    printed = capsys.readouterr().out
    if "loss:sum" in code:
        # The quick start prints the loss per token (as make demo does) and samples one line.
        losses = [float(m) for m in re.findall(r"^step \d+: loss/token (\d+\.\d+)$", printed, re.M)]
        assert len(losses) >= 2
        assert losses[-1] < losses[0], f"the quick start's loss did not fall: {losses}"
        assert losses[0] < 20, "a loss per token, not a sum"
        (answer,) = re.findall(r"^Assistant: '(.*)'$", printed, re.M)
        assert answer.count("\\n") == 1
        assert answer.endswith("\\n"), "sampling stops at the stop string"
