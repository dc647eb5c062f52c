#!/usr/bin/env bash
# Regenerate every README figure into docs/figures/ (PNG) from the example traces in traces/:
# breakdowns of DQN and R2D2 on the DGX-1 (V100) and of R2D2 on the DGX A100, and actor and SM sweeps.
# Tables (CSV) and SVGs stay in runs/figures/; docs/FIGURES.md quotes their numbers.
# The R2D2 sweeps use --learner-batch 64: R2D2's 64 sequences per update (REFERENCE.md "RL
# workloads"); for an R2D2 trace the learner batch counts sequences of the trace's length.
# Takes 36 s to 3.5 min of wall time on two cores shared with other jobs (36, 57 and 53 s in three
# runs on 2026-11-25; 58 s and 2 min 5 s on 2026-11-24; 210 s at load 7-8 on 2026-11-25).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/archsim ] || bash scripts/setup.sh
. .venv/bin/activate

runs=runs/figures
figures=docs/figures
mkdir -p "$runs" "$figures"
actors=4,8,16,32,40,64,128,256
sms=2,4,8,16,32,40,64,80
dqn=traces/dqn-pong-cpu
r2d2=traces/r2d2-seed-2x2-cpu

# copy_pngs RUN_DIR PREFIX: every chart of RUN_DIR as docs/figures/PREFIX-<chart>.png
copy_pngs() {
  local png
  for png in "$1"/*.png; do
    cp "$png" "$figures/$2-$(basename "$png")"
  done
}

echo "== breakdowns (sequential idealization of GPU time, all phases)"
archsim breakdown "$dqn" --hw dgx1-v100 --phase all --out "$runs/dqn-breakdown-dgx1-v100" --force
copy_pngs "$runs/dqn-breakdown-dgx1-v100" dqn-dgx1-v100
for hw in dgx1-v100 dgx-a100; do
  archsim breakdown "$r2d2" --hw "$hw" --phase all --out "$runs/r2d2-breakdown-$hw" --force
  copy_pngs "$runs/r2d2-breakdown-$hw" "r2d2-$hw"
done

for hw in dgx1-v100 dgx-a100; do
  echo "== R2D2 actor sweep on $hw (learner batch 64 sequences)"
  archsim sweep "$r2d2" --hw "$hw" --actors "$actors" --learner-batch 64 --jobs 2 --no-progress \
    --out "$runs/r2d2-actor-sweep-$hw" --force
  copy_pngs "$runs/r2d2-actor-sweep-$hw" "r2d2-$hw"
  echo "== R2D2 SM sweep at 256 actors on $hw (learner batch 64 sequences)"
  archsim sweep "$r2d2" --hw "$hw" --actors 256 --sms "$sms" --learner-batch 64 --jobs 2 \
    --no-progress --out "$runs/r2d2-sm-sweep-$hw" --force
  copy_pngs "$runs/r2d2-sm-sweep-$hw" "r2d2-$hw"
done

echo "== DQN actor sweep on dgx1-v100"
archsim sweep "$dqn" --hw dgx1-v100 --actors "$actors" --jobs 2 --no-progress \
  --out "$runs/dqn-actor-sweep-dgx1-v100" --force
copy_pngs "$runs/dqn-actor-sweep-dgx1-v100" dqn-dgx1-v100

echo "== Ape-X replay network (issue 14): latency by component and nodes x placement x stack, 40GbE"
python -m archsim.report.network_charts traces/apex-dqn-cpu "$runs/network" "$figures"

echo
echo "figures:"
ls -l "$figures"/*.png
