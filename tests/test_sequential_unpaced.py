"""--replay-ratio none on a single-loop trace: refused in one line, not silently ignored.

The single loop (archsim.sim.sequential) trains every k env steps as the captured program did; an
"unpaced" learner has no meaning there. Before, ``archsim simulate traces/dqn-pong-cpu --hw
dgx1-v100 --replay-ratio none`` printed the same figures as the default (248.4 updates/s, the
program's one update per 4 env steps) with no word that the flag was dropped.
"""

from __future__ import annotations

import json
from pathlib import Path

from archsim.cli import main

DQN = Path(__file__).resolve().parent.parent / "traces" / "dqn-pong-cpu"


def test_replay_ratio_none_refused_on_the_single_loop(tmp_path, capsys):
    out = tmp_path / "unpaced"
    args = ["simulate", str(DQN), "--hw", "dgx1-v100", "--replay-ratio", "none"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--replay-ratio none" in err[0] and "--loop distributed" in err[0]
    assert not out.exists()


def test_replay_ratio_numbers_still_set_the_single_loops_training_frequency(tmp_path):
    """A number stays meaningful for one loop: 16 samples per transition with the trace's batch of
    32 is one update every 2 env steps, twice the program's (8: one every 4)."""
    rates = {}
    for ratio in ("8", "16"):
        out = tmp_path / f"r{ratio}"
        args = ["simulate", str(DQN), "--hw", "dgx1-v100", "--replay-ratio", ratio]
        assert main([*args, "--out", str(out)]) == 0
        m = json.loads((out / "metrics.json").read_text())
        rates[ratio] = m["learner_updates_per_s"] / m["env_steps_per_s"]
    assert abs(rates["8"] - 0.25) < 1e-9 and abs(rates["16"] - 0.5) < 1e-9
