"""SEED-style R2D2 runtime across real processes (Espeholt et al. 2020, "SEED RL").

Actor processes only step environments; they send each observation to the learner process over a
socket and wait for the action. The learner process runs an inference server that batches requests,
keeps each environment's frame stack and LSTM state, cuts sequences into prioritized replay, and a
training thread that learns from replay at a fixed replay ratio. ``runner.run_seed`` starts, watches and
stops the processes; each one records its own profiler trace (``profiling.ProcessProfiler``).
"""
