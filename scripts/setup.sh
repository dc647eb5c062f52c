#!/usr/bin/env bash
# Create .venv with archsim and its dev tools. torch is installed first, pinned to the CPU build
# (2.13.0) so pip never pulls a multi-GB CUDA build; GPU users: see DEVELOPERS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
pip install -q --disable-pip-version-check "torch==2.13.0"
# examples: stable-baselines3 (pure Python; its torch>=2.8 is met by the CPU build above, so no other
# torch is pulled) for examples/sb3_dqn.py and its capture tests, which skip without it
pip install -q --disable-pip-version-check -e ".[dev,examples]"
# Headless Chromium opens `archsim report` pages in the test suite (tests/test_report_html.py); where
# apt is available as root it is installed from Debian's packages, elsewhere that one test skips.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
    || echo "setup: chromium could not be installed; the report's browser test will skip" >&2
fi
# Xvfb: a virtual X server for `archsim capture dqn --display-every` on headless machines (a real
# blit and X round trip per frame, unlike SDL's dummy driver) and its test (tests/test_dqn_display_conv.py),
# which skips where it is missing. Installed from Debian's packages where apt is available as root.
if ! command -v Xvfb >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xvfb) >/dev/null 2>&1 \
    || echo "setup: xvfb could not be installed; the DQN display tests will skip" >&2
fi
