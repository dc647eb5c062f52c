"""Measure what ``capture run``'s own markers cost per step, in the program's process, as it starts.

The markers that ``capture run`` patches into a program (archsim.capture.auto_markers) run on the
program's thread: the patched ``env.step``, ``nn.Module.__call__``, ``Tensor.backward`` and optimizer
hooks, the step bookkeeping and the CPU clock reads of archsim.capture.unprofiled. Their CPU lands in
the steps' ``cpu_us`` and in the CPU between steps (``gap_cpu_us``), and ``simulate`` would charge it
as the program's: on a CartPole DQN it was 28-41% more CPU per env step than the script uncaptured.

So before the program runs, the capture drives the very same marker code, installed the same way
under the same CPU clock and profiler, through a synthetic loop whose bodies do (almost) nothing: an
actor step (an acting forward on one observation, then ``env.step`` of a gymnasium env) and a
learner step (a train forward on a fresh 32-row minibatch, a backward, an optimizer step). The
marked loop's unprofiled step and gap means, less the same bodies' CPU run unmarked, are the
markers' cost per step of each role (``meta.capture.marker_cpu_us``), which archsim.sim.marker_cost
takes out of every step. A program whose steps make more marked calls than these (two forwards in
one update, a replay buffer marked too) keeps those extra calls' cost: it is not counted here.

Around a real loop the same marker code costs more than around these bodies (the program's own work
runs slower between markers): once every window is recorded, ``capture run`` measures that on the
program's own steps (archsim.capture.bare_stretches) and, given enough of them, scales these figures'
step parts to it, keeping these as ``meta.capture.marker_cpu_us_synthetic``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from archsim.capture import cpu_clock, unprofiled
from archsim.capture.unprofiled import GAP_KEY, STEP_KEY

# Iterations per repeat and repeats: each iteration is one actor and one learner step, 40-60 us of
# CPU marked on the development VM, so 3 x 400 take ~0.1 s; the median repeat is kept (one repeat
# disturbed by another process on a loaded machine does not move it).
ITERATIONS = 400
REPEATS = 3
ROLES = ("actor", "learner")


def _synthetic_loop() -> tuple[Any, Any]:
    """(actor body, learner body): callables running one step's calls each, plain torch/gymnasium."""
    import gymnasium
    import numpy as np
    import torch

    class _NoopEnv(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gymnasium.spaces.Discrete(2)

        def __init__(self) -> None:
            self._result = (np.zeros(4, np.float32), 0.0, False, False, {})

        def step(self, action: Any) -> Any:
            return self._result

        def reset(self, *, seed: Any = None, options: Any = None) -> Any:
            return self._result[0], {}

    class _Identity(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x

    env, net = _NoopEnv(), _Identity()
    obs = torch.zeros(1, 4)
    # two minibatches used in turn: each forward sees a new draw, so each update is one learner step
    draws = [torch.zeros(32, 4), torch.zeros(32, 4)]
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    grad = torch.ones(1)

    def actor() -> None:
        net(obs)
        env.step(0)

    def learner(i: int) -> None:
        net(draws[i & 1])
        weight.backward(grad)
        optimizer.step()

    return actor, learner


def _plain_us(actor: Any, learner: Any, n: int) -> dict[str, float]:
    """CPU us per call of each role's bodies, unmarked."""
    start = cpu_clock.now_ns()
    for _ in range(n):
        actor()
    middle = cpu_clock.now_ns()
    for i in range(n):
        learner(i)
    end = cpu_clock.now_ns()
    return {"actor": (middle - start) / n / 1000.0, "learner": (end - middle) / n / 1000.0}


def _marked_us(actor: Any, learner: Any, n: int) -> dict[str, dict[str, float]]:
    """{role: {STEP_KEY, GAP_KEY: mean CPU us}} of the same bodies run under installed markers."""
    from archsim.capture.auto_markers import auto_markers

    with (
        unprofiled.timing_unprofiled_steps(gaps=True) as times,
        auto_markers(lambda: None) as marker,
    ):
        marker.seen_learner = True  # ticks (a no-op here) as in the program's steady state
        for i in range(n):
            actor()
            learner(i)
    summary = times.summary()
    return {
        role: {key: float(summary[role][key]["mean_us"]) for key in (STEP_KEY, GAP_KEY)}
        for role in ROLES
    }


def measure_marker_cost(
    iterations: int = ITERATIONS, repeats: int = REPEATS
) -> dict[str, dict[str, float]]:
    """{role: {"step_us", "gap_us"}}: the markers' CPU per step inside the step and between steps,
    under the CPU clock in force (``capture run``'s process clock). Never negative; YAML-able.
    Empty without gymnasium (nothing to step: the trace then keeps the markers' cost)."""
    try:
        actor, learner = _synthetic_loop()
    except ImportError:
        return {}
    _plain_us(actor, learner, 20)  # warm both paths (first-call allocations, lazy imports)
    _marked_us(actor, learner, 20)
    runs = []
    for _ in range(repeats):
        plain = _plain_us(actor, learner, iterations)
        marked = _marked_us(actor, learner, iterations)
        runs.append(
            {
                role: {
                    "step_us": max(0.0, marked[role][STEP_KEY] - plain[role]),
                    "gap_us": max(0.0, marked[role][GAP_KEY]),
                }
                for role in ROLES
            }
        )
    return {
        role: {
            key: round(statistics.median(run[role][key] for run in runs), 3)
            for key in runs[0][role]
        }
        for role in ROLES
    }


if __name__ == "__main__":  # python -m archsim.capture.marker_cost: this machine's figures
    with cpu_clock.process_cpu_time():
        started = time.process_time()
        print(measure_marker_cost(), f"({time.process_time() - started:.2f} s CPU)")
