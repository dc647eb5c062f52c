"""R2D2 (Kapturowski et al. 2019): recurrent replay distributed DQN, with a SEED-style runtime in
``workloads.r2d2.seed``. The pure pieces (rescaling, n-step targets, sequences, priorities, replay)
are small modules with one job each so they can be tested against hand-worked numbers.
"""
