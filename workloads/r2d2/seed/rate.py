"""The replay-ratio gate both learner layouts (central and local inference) train under."""

from __future__ import annotations


def may_train(
    replay_len: int, updates: int, batch_size: int, replay_ratio: float, inserted: int
) -> bool:
    """True when one more update keeps ``sampled <= replay_ratio * inserted`` (sequences).

    Replay ratio = sequences sampled per sequence inserted, as in Reverb's rate limiters; the learner
    also needs a full batch in replay.
    """
    budget = replay_ratio * inserted
    return replay_len >= batch_size and (updates + 1) * batch_size <= budget
