"""Shared test fixtures: paths to the real GPU traces in ../shared/fixtures (skip when absent), a saved
tiny trace for CLI tests, and the check every bad-input test makes of stderr."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# In CI (CI=true) every property test draws the same examples on every run and keeps no example
# database, so a submission's result does not depend on the draw: run `CI=true bash scripts/test.sh`
# to see exactly what CI sees. Locally the draws stay random, to keep finding new cases. Neither
# profile has hypothesis' 200-ms deadline: an example's wall time says how busy the machine is, not
# whether the code is right (one kernel-model example took 319 ms beside other jobs).
settings.register_profile("local", deadline=None)
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

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


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory) -> Path:
    """A saved tiny DQN-like trace (tests.test_sim_support.tiny_trace) for CLI tests."""
    from archsim.trace import save
    from tests.test_sim_support import tiny_trace

    return save(tiny_trace(), tmp_path_factory.mktemp("trace") / "tiny")


def error_line(capsys) -> str:
    """The one stderr line of a refused command: ``archsim: error: ...`` and nothing else."""
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("archsim: error: ")
    return lines[0]
