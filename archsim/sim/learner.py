"""The learner: sample a batch from replay, launch the training step (the CPU launch cost overlaps
the GPU work, as asynchronous CUDA launches do), wait for it, and publish parameters. Without a GPU
the step runs on the learner's own thread; with a params lock (``--param-lock on``) the replay sample
and the step's locked part (optimizer step, priority update) hold it."""

from __future__ import annotations

from archsim.sim.gpu import LEARNER
from archsim.sim.system import System, locked


def learner_process(system: System):
    env, cfg, times = system.env, system.config, system.times
    threads, rec, replay, gpu = system.threads, system.rec, system.replay, system.gpu
    thread = system.learner_thread
    batch = system.learner_batch
    lock = system.params_lock
    updates = 0
    while True:
        yield from replay.sample(batch)
        yield from locked(
            lock, threads.execute(thread, times.learner_sample_cpu_s, "replay_sample")
        )
        if times.on_gpu:
            done = gpu.submit(
                LEARNER,
                times.learner_gpu_s,
                times.learner_sm_fraction,
                "learner_step",
                dram_bytes=times.learner_dram_bytes,
            )
            yield from threads.execute(thread, times.learner_launch_cpu_s, "kernel_launches")
            yield done
        elif lock is not None:
            free_s = times.learner_gpu_s - times.learner_locked_cpu_s
            yield from threads.execute(thread, free_s, "learner_step")
            yield from locked(lock, threads.execute(thread, times.learner_locked_cpu_s, "update"))
        else:
            yield from threads.execute(thread, times.learner_gpu_s, "learner_step")
        updates += 1
        if env.now < rec.end:
            rec.learner_updates += 1
        if cfg.inference == "local" and updates % cfg.publish_every == 0:
            yield from threads.execute(thread, times.publish_cpu_s, "param_publish")
