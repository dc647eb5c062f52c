"""Shared test fixtures: paths to the real GPU traces in ../shared/fixtures (skip when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
KINETO_FIXTURES = PROJECT_ROOT.parent / "shared" / "fixtures" / "kineto"


def kineto_fixture(name: str) -> Path:
    """Path of a fixture trace; skips the test with the reason when ../shared/fixtures is absent."""
    path = KINETO_FIXTURES / name
    if not path.exists():
        pytest.skip(
            f"real trace fixture {path} is absent (../shared/fixtures not beside the checkout)"
        )
    return path


@pytest.fixture
def fixtures_dir() -> Path:
    if not KINETO_FIXTURES.is_dir():
        pytest.skip(f"{KINETO_FIXTURES} is absent (../shared/fixtures not beside the checkout)")
    return KINETO_FIXTURES
