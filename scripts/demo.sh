#!/usr/bin/env bash
# The main job on a fresh machine: set up, capture a real DQN run on ALE Pong on this CPU, then ask
# how it would run on a DGX-1 (V100): where GPU time goes, and how throughput and power change with
# the number of actors and of SMs. Everything lands in runs/demo/ (CSV + PNG/SVG charts).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/archsim ] || bash scripts/setup.sh
. .venv/bin/activate
out=runs/demo
mkdir -p "$out"

echo "== 1/6 capture: real Nature DQN on ALE Pong (CPU), profiled windows -> normalized trace"
archsim capture dqn --steps 600 --out "$out/dqn-trace" --force
echo "== 2/6 trace info"
archsim trace info "$out/dqn-trace"
echo "== 3/6 breakdown by sequential idealization on dgx1-v100 (+ GPU time versus SM count)"
archsim breakdown "$out/dqn-trace" --hw dgx1-v100 --sms 2,4,8,16,32,40,64,80 --out "$out/breakdown" --force
echo "== 4/6 actor sweep on dgx1-v100 (throughput, GPU power, perf/W versus actors)"
archsim sweep "$out/dqn-trace" --hw dgx1-v100 --actors 4,8,16,32,40,64,128,256 --jobs 2 \
  --out "$out/actor-sweep" --force
echo "== 5/6 SM sweep at 256 actors on dgx1-v100 (slowdown versus SMs)"
archsim sweep "$out/dqn-trace" --hw dgx1-v100 --actors 256 --sms 2,4,8,16,32,40,64,80 --jobs 2 \
  --out "$out/sm-sweep" --force
echo "== 6/6 report: one HTML page with every result above"
archsim report "$out" --out "$out/report.html" --title "archsim demo: DQN on ALE Pong, replayed on a DGX-1 (V100)"
echo
echo "charts and tables:"
find "$out" -name '*.png' -o -name '*.csv' | sort
echo
echo "open the report: $out/report.html"
