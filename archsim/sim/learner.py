"""The learner: sample a batch from replay, launch the training step (the CPU launch cost overlaps
the GPU work, as asynchronous CUDA launches do), wait for it, and publish parameters. Without a GPU
the step runs on the learner's own thread; with a params lock (``--param-lock on``) the replay sample
and the step's locked part (optimizer step, priority update) hold it. The Python part of each burst
holds the learner process's GIL (archsim.sim.gil) when the process has a server thread beside it;
kernel launches are native and take no GIL."""

from __future__ import annotations

from archsim.sim.cpu import LindleyThreads
from archsim.sim.fast_gil import FastGil
from archsim.sim.gil import run_burst
from archsim.sim.gpu import DONE_EPS_S, LEARNER
from archsim.sim.params_lock import locked
from archsim.sim.system import System

LAUNCHES = "kernel_launches"
# Numerical margin, not a model figure: a GPU job is done with up to DONE_EPS_S of work left, and
# its end is a sum of a few float times (each within ~1e-16 relative of runs of seconds); launches
# that end this much before the job's earliest end are surely over when it ends.
GPU_DONE_SLACK_S = 1000 * DONE_EPS_S


def publish_every_note(config) -> str | None:
    """One line when ``--publish-every`` is set but changes nothing: only local-inference actors
    fetch the published parameters (with central inference the server's model is the learner's,
    so the learner publishes nothing)."""
    if config.publish_every == 1 or config.inference == "local":
        return None
    return (
        f"note: --publish-every {config.publish_every} changes nothing with --inference "
        f"{config.inference}: parameters are published to local-inference actors only"
    )


def learner_process(system: System):
    env, cfg, times = system.env, system.config, system.times
    threads, rec, replay, gpu = system.threads, system.rec, system.replay, system.gpu
    thread = system.learner_thread
    batch = system.learner_batch
    lock = system.params_lock
    python = times.python
    # a CPU step's Python parts at this batch (whole, unlocked, locked; PythonShare.learner_bursts)
    step_python, free_python, update_python = python.learner_bursts(
        times.learner_gpu_s, times.learner_locked_cpu_s
    )
    updates = 0
    if rec.timeline is not None:
        rec.timeline.name_thread(thread, "learner")
    net = getattr(system, "net", None)  # set by archsim.sim.run for --nodes / --replay-placement
    # Every event the learner waits on below but the replay's wake-ups (and the network's and the
    # lock's) has its resumption as its only callback: after an unheld sample the learner runs at
    # the tail of an event's processing, and its GIL turn may be taken in place (archsim.sim.fast_gil)
    fast_gil = system.gil if isinstance(system.gil, FastGil) else None
    plain = net is None and lock is None
    while True:
        waited = yield from replay.sample(batch)
        if net is not None:  # the prioritized sample's messages (archsim.sim.replay_server)
            yield from net.sample(system, thread, batch)
        if fast_gil is not None and plain and not waited:
            sample_s = times.learner_sample_cpu_s
            after = replay.last_wake  # scheduled by the sample, the last event scheduled
            burst = fast_gil.run(
                thread, sample_s, python.replay_sample, "replay_sample", True, after
            )
            yield from burst
        else:
            yield from locked(
                lock,
                run_burst(
                    system,
                    thread,
                    times.learner_sample_cpu_s,
                    python.replay_sample,
                    "replay_sample",
                ),
            )
        if times.on_gpu:
            done = gpu.submit(
                LEARNER,
                times.learner_gpu_s,
                times.learner_sm_fraction,
                "train_step",
                dram_bytes=times.learner_dram_bytes,
                args={"update": updates, "batch_size": batch},
            )
            if isinstance(threads, LindleyThreads):
                # LindleyThreads.execute's timer, which the learner need not wake on: it waits
                # for the GPU job and then, if the launches end later, for the timer (same
                # instants and place among the events, one resumption fewer per step)
                finish = threads.finish_time(thread, times.learner_launch_cpu_s, env.now, LAUNCHES)
                if finish + GPU_DONE_SLACK_S < env.now + times.learner_gpu_s:
                    # the GPU job, alone on its stream, ends no earlier than its work alone on the
                    # GPU after now (rate <= 1): the timer would be processed before it and do
                    # nothing; it is not made
                    yield done
                else:
                    launched = env.timeout(finish - env.now)
                    yield done
                    if not launched.processed:
                        yield launched
            else:
                yield from threads.execute(thread, times.learner_launch_cpu_s, LAUNCHES)
                yield done
        elif lock is not None:
            free_s = times.learner_gpu_s - times.learner_locked_cpu_s
            yield from run_burst(system, thread, free_s, free_python, "train_step")
            yield from locked(
                lock,
                run_burst(system, thread, times.learner_locked_cpu_s, update_python, "update"),
            )
        else:
            yield from run_burst(system, thread, times.learner_gpu_s, step_python, "train_step")
        updates += 1
        if env.now < rec.end:
            rec.learner_updates += 1
        if net is not None:  # the batch's new priorities back to the replay
            yield from net.priority_update(system, thread, batch)
        if cfg.inference == "local" and updates % cfg.publish_every == 0:
            # a socket send and a copy of the parameters: native, no GIL (archsim.sim.python_share)
            yield from threads.execute(thread, times.publish_cpu_s, "param_publish")
