"""R2D2 hyper-parameters. Defaults follow Kapturowski et al. 2019 ("Recurrent Experience Replay in
Distributed Reinforcement Learning", ICLR 2019, Table 2) and docs/REFERENCE.md ("RL workloads", R2D2).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class R2D2Config:
    # Sequences of 80 with 40 burn-in, adjacent sequences overlap by 40 (REFERENCE.md, R2D2).
    # The paper's burn-in experiments prepend the 40 steps to the 80 (m=80 + l=40); we follow the
    # issue/REFERENCE layout where the 40 burn-in steps are the first half of the 80.
    sequence_length: int = 80
    burn_in: int = 40
    sequence_overlap: int = 40
    n_step: int = 5  # REFERENCE.md: n-step 5
    discount: float = 0.997  # REFERENCE.md: gamma 0.997
    rescale_eps: float = 1e-3  # REFERENCE.md: h(x) = sign(x)(sqrt(|x|+1)-1) + 1e-3 x
    priority_eta: float = 0.9  # REFERENCE.md: priority 0.9 max|td| + 0.1 mean|td|
    priority_exponent: float = 0.9  # REFERENCE.md: exponent 0.9
    importance_exponent: float = 0.6  # Kapturowski et al. 2019, Table 2: IS exponent 0.6
    batch_size: int = 64  # REFERENCE.md: batch 64
    learning_rate: float = 1e-4  # Kapturowski et al. 2019, Table 2: Adam lr 1e-4
    adam_eps: float = 1e-3  # Kapturowski et al. 2019, Table 2: Adam epsilon 1e-3
    target_update_period: int = 2500  # REFERENCE.md: target update every 2,500 learner steps
    # 4M observations / 80 per sequence = 1e5 part-overlapping sequences (Kapturowski et al. 2019,
    # Table 2). Small runs override it: replay is preallocated and must fit this machine's RAM.
    replay_capacity_sequences: int = 100_000
    lstm_size: int = 512  # REFERENCE.md: LSTM 512
    frame_stack: int = 4  # Kapturowski et al. 2019, Table 3 (Atari preprocessing): 4 frames stacked
