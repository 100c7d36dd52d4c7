"""Sphinx configuration of the tinker_lite documentation (``make docs``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tinker_lite import __version__  # noqa: E402

project = "tinker_lite"
author = "tinker_lite contributors"
copyright = "tinker_lite contributors"
version = release = __version__

extensions = ["sphinx.ext.autodoc"]

# Docstrings are reStructuredText; only the public modules are documented.
autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autoclass_content = "class"
# Every cross-reference must resolve (``make docs`` runs ``-n -W``), except those that cannot:
nitpicky = True
nitpick_ignore_regex = [
    # The standard library and third-party packages: no inventories are fetched (the build runs
    # offline), so their names in signatures stay plain text.
    (
        r"py:.*",
        r"(collections|datetime|pathlib|os|enum|concurrent|importlib|typing|logging|requests"
        r"|numpy|np|npt|tokenizers|transformers)(\..*)?",
    ),
    # Private modules and names (``tinker_lite._errors``, ``_TinkerDistribution``) and type
    # variables are undocumented on purpose.
    (r"py:.*", r"(\w+\.)*_\w+(\..*)?"),
    (r"py:.*", r"(tinker_lite\.\w+\.)?T"),
    # Names imported only for type checking, and the local server's internals.
    (r"py:class", r"Journal|SessionHolder|PretrainedTokenizer|Tokenizer"),
    # Type aliases, left as written where a signature's names are imported for type checking.
    (r"py:class", r"types\.(OptimizerConfig|CustomLossInputRank)"),
    (r"py:.*", r"tinker_lite\.local\.(http|protocol|service|storage|model)(\..*)?"),
]

exclude_patterns = ["_build"]
templates_path: list[str] = []
html_static_path: list[str] = []
html_theme = "alabaster"
html_title = f"tinker_lite {__version__}"


def _public_alias(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve ``tinker_lite.<module>.<Name>`` to where it is documented: ``tinker_lite.<Name>``
    or ``tinker_lite.types.<Name>`` (signatures name the defining module)."""
    target = str(node.get("reftarget", ""))
    if node.get("refdomain") != "py" or not target.startswith("tinker_lite."):
        return None
    name = target.rsplit(".", 1)[-1]
    domain = env.get_domain("py")
    for alias in (f"tinker_lite.{name}", f"tinker_lite.types.{name}"):
        if alias != target and alias in domain.objects:
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], alias, node, contnode
            )
    return None


def setup(app: Any) -> None:
    app.connect("missing-reference", _public_alias)
