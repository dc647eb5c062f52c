#!/usr/bin/env bash
# Set up (if needed) and run lint and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/archsim ] || bash scripts/setup.sh
. .venv/bin/activate
ruff check archsim workloads tests benchmarks examples
ruff format --check archsim workloads tests benchmarks examples
# --durations: the slowest tests in the log, to keep the suite under its 10-minute budget
python -m pytest -q --durations=25 "$@"
