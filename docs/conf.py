"""Sphinx configuration of the tinker_lite documentation (``make docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

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
nitpicky = False

exclude_patterns = ["_build"]
templates_path: list[str] = []
html_static_path: list[str] = []
html_theme = "alabaster"
html_title = f"tinker_lite {__version__}"
