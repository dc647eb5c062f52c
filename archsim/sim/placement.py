"""How many hardware threads the actors use (pinned CPU, one machine): the placement a rational
deployment picks, so that more CPU threads never lower throughput at a fixed actor count.

Why not always every thread: an actor that owns its thread leaves it idle while it waits for its
action, and with central inference a batch of every actor puts all of them in lockstep (step, wait
for the batch, step). Actors that time-share a thread overlap one's env step with another's wait, as
SEED RL runs many environments per actor thread to hide inference latency (Espeholt et al., "SEED
RL: Scalable and Efficient Deep-RL with Accelerated Central Inference", ICLR 2020), so the same
actors on fewer threads can run faster (dgx1-v100, r2d2, 16 actors, 0.4 s: 19,040 frames/s on 14
actor threads, 20,000 on 6, 21,360 on 3). A machine with more threads can still run that schedule (a
deployment that pins actors may leave threads unused), so the simulated placement must never do
worse than one on fewer threads.

The rule: candidates are the default placement (``archsim.perf.cpu.actor_thread_order``; when the
actors have fewer threads of their own than the learner has, every thread but the learner's
training loop's instead: the machine with one thread fewer has actors on all the learner's threads,
and one thread of their own must not take those away), and ``ceil(actors / k)`` threads for ``k`` in
``ACTORS_PER_THREAD``. Each runs for the whole window (a shorter one ranks the unpaced start, before
the replay rate limiter binds: dgx1-v100, r2d2, 64 actors, 56 threads picked 52 actor threads on a
quarter window, 6% slower than 22). Among those with at least the default's env steps and its
learner updates (less one step of each actor and one learner step, which straddle the end of the
window; both: a placement that buys frames with learner steps trades one output for the
other, and a knob that flips such a choice would lower one of them: apex-dqn-cpu, dgx-a100, 16
actors, replay ratio 24, 2 actor threads gave 2,830 frames/s and 460 updates/s against the
default's 2,560 and 542), the one with the most env steps, then learner updates, is used (ties keep
the default, then the earlier). So no run does worse than the default placement on either. Deterministic (the runs are); it costs up to
``len(ACTORS_PER_THREAD) + 1`` runs on the fast engine wherever it is exact (dgx1-v100, r2d2, 64
actors, a 2 s window: 0.25 s before, 0.61 s with the candidates, on this project's 2-core machine).
Since the candidates at one thread count include (nearly: ``ceil(actors / k)`` is the same list)
those at fewer threads, the choice with more threads is never the worse by more than the noise of
a window.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from archsim.perf.cpu import ThreadLayout, actor_thread_order, place_threads_on

# Actors per thread tried besides the default: SEED RL's actors run several environments per
# thread to hide inference latency (Espeholt et al. 2020); 1 is one actor per thread. Steps of at most
# 1.5x, so the default of a machine with fewer threads is never far from a candidate (rtx4090, r2d2,
# 64 actors, 3 learner threads, 15 threads: 4, 5 and 6 actor threads give 66.5K-67.7K frames/s, 11
# give 60.7K; a list that stopped at 8 per thread missed them).
ACTORS_PER_THREAD = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def candidate_actor_threads(
    n_reserved: int, n_actors: int, hw_threads: int, cores: int
) -> list[int]:
    """Actor thread counts to try, the default first; counts beyond ``n_actors`` are one placement."""
    order, default = actor_thread_order(n_reserved, hw_threads, cores)
    if default < min(n_reserved, hw_threads):
        # Fewer threads of their own than the learner has: the actors also take the learner's
        # threads but its training loop's, as the machine with no thread of their own takes them all
        # (jetson-tx1 at 2 threads), so one more thread never takes threads away from the actors
        # and the training loop gains its thread back.
        default = max(default, len(order) - 1)
    wanted = [default] + [math.ceil(n_actors / k) for k in ACTORS_PER_THREAD]
    out: list[int] = []
    for m in wanted:
        m = min(max(1, m), default, n_actors)
        if m not in out:
            out.append(m)
    return out


def choose_placement(
    machine, config, hw_threads: int, run_short: Callable, settle: Callable = lambda layout: layout
) -> ThreadLayout:
    """The layout whose actors use the best of :func:`candidate_actor_threads`, by runs of
    ``run_short(layout, config) -> Recorder`` of each candidate after ``settle(layout)`` (its SMT
    speeds calibrated, as the run that follows uses them). Its ``note`` says when actors time-share
    threads although others were left unused."""

    def layout_for(m: int | None) -> ThreadLayout:
        return place_threads_on(
            machine, config.learner_threads, config.actors, hw_threads=hw_threads, actor_threads=m
        )

    candidates = candidate_actor_threads(
        config.learner_threads, config.actors, hw_threads, min(machine.cores, hw_threads)
    )
    default = settle(layout_for(candidates[0]))
    if config.cpu_sched == "shared" or config.actors < 2 or len(candidates) < 2:
        return default
    # "auto": the fast engine wherever it is exact (the same metrics as "simpy", a fraction of the
    # time; docs/SIMULATOR.md "Engines")
    # each candidate runs the whole window (a shorter one ranks the unpaced start: module docstring)
    short = config.replace(engine="auto")
    rec = run_short(default, short)
    # The default's counts, less what straddles the end of the window (one env step of every
    # actor, one learner step), which a placement that does as well can miss: a choice must reach
    # both.
    floor = (
        rec.env_steps - config.actors * config.envs_per_actor,
        rec.learner_updates - 1,
    )
    best, best_score, best_m = default, (rec.env_steps, rec.learner_updates), candidates[0]
    for m in candidates[1:]:
        layout = settle(layout_for(m))
        rec = run_short(layout, short)
        score = (rec.env_steps, rec.learner_updates)
        if score[0] >= floor[0] and score[1] >= floor[1] and score > best_score:
            best, best_score, best_m = layout, score, m
    if best_m == candidates[0]:
        return default
    used = len(set(best.placement[config.learner_threads :].tolist()))
    note = (
        f"placement: {config.actors} actors on {used} actor threads (not the default "
        f"{candidates[0]}): time-sharing threads ran faster, as SEED RL's many "
        "environments per thread hide inference latency; the other threads stay idle"
    )
    return dataclasses.replace(best, note=note)
