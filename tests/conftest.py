"""Shared pytest configuration: the hypothesis profiles and the path to the shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "fast",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

SHARED_DIR = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared directory beside the repository (specs and captured wire fixtures)."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"{SHARED_DIR} is not present beside the repository")
    return SHARED_DIR
