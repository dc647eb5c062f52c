#!/usr/bin/env bash
# Create .venv with archsim and its dev tools. torch is installed first, pinned to the CPU build
# (2.13.0) so pip never pulls a multi-GB CUDA build; GPU users: see DEVELOPERS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
pip install -q --disable-pip-version-check "torch==2.13.0"
pip install -q --disable-pip-version-check -e ".[dev]"
