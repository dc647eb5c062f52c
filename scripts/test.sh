#!/usr/bin/env bash
# Set up (if needed) and run lint and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/archsim ] || bash scripts/setup.sh
. .venv/bin/activate
# a venv made before pytest-xdist joined the dev tools
python -c "import xdist" 2>/dev/null || pip install -q --disable-pip-version-check "pytest-xdist>=3.5"
ruff check archsim workloads tests benchmarks examples
ruff format --check archsim workloads tests benchmarks examples
# Two pytest workers (pytest-xdist), one per core of the 2-core CI machine, each given whole test
# files (module fixtures run once); then, alone, the few tests that compare a real run's CPU time
# with a prediction (marked solo: they skip, naming the reason, when their program gets under 85% of
# a core, which a second worker would cause). --durations: the slowest tests in the log, to keep the
# suite under its 10-minute budget.
# Exit status 5 is pytest's "no test selected" (a file or -k with no test of that kind).
run_pytest() {
  local rc=0
  python -m pytest -q "$@" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"
}
run_pytest -n 2 --dist loadfile -m "not solo" --durations=25 "$@"
run_pytest -m solo "$@"
