"""GPU time of one job (an inference batch, a learner step) from a few representative steps' ops:
resized with ``scale_ops_to_batch`` and predicted with ``predict_op_seconds`` in ONE call on the
concatenated table for every batch size asked. SM share of a job: blocks / (SMs x resident blocks
per SM), capped at 1, time-weighted over its ops. DRAM bytes of a job (for the power model): the
ops' bytes read and written (from their tensor sizes: an upper bound, as L2 hits never reach
DRAM; kernels that carry no bytes count none)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.sim.rnn_lowering import lower_lstm_ops

# Steps whose ops represent "one step" for GPU time: a handful of typical ones (the modal op count)
# is plenty and keeps the one vectorized prediction over (steps x batch sizes) small.
REPRESENTATIVE_STEPS = 8
COPY_KINDS = ("memcpy",)


def representative_ops(
    trace, phases: tuple[str, ...], role: str, every_step: bool = False
) -> tuple[pd.DataFrame, int, np.ndarray]:
    """(ops of up to REPRESENTATIVE_STEPS typical steps, number of those steps, batch of each op's
    step). Ops not tied to a step are spread evenly over the trace's steps of ``role``.
    ``every_step``: the steps differ by design (archsim.trace.learner_batch.updates_differ), so
    all of them are taken, whose mean is the typical step (the modal steps of a 200-step TD3
    capture of tests/test_learner_updates.py's script were its critic-only updates: 127 train ops,
    where its updates average 183)."""
    ops = trace.ops[trace.ops["phase"].isin(phases)]
    if ops.empty:
        return ops, 1, np.ones(0)
    steps = trace.steps.set_index("step_id")
    linked = ops[ops["step_id"].isin(steps.index)]
    if linked.empty:
        n_steps = max(1, int((trace.steps["role"] == role).sum()))
        return ops.reset_index(drop=True), n_steps, np.ones(len(ops))
    counts = linked.groupby("step_id").size()
    if every_step:
        pick = counts.index.to_numpy()
    else:
        modal = counts[counts == counts.mode().iloc[0]].index.to_numpy()
        spread = np.linspace(0, len(modal) - 1, min(REPRESENTATIVE_STEPS, len(modal))).astype(int)
        pick = modal[spread]
    chosen = linked[linked["step_id"].isin(pick)].reset_index(drop=True)
    batch = steps.loc[chosen["step_id"], "batch_size"].to_numpy(dtype=float)
    return chosen, len(np.unique(pick)), np.maximum(batch, 1.0)


def lowered(
    ops: pd.DataFrame, from_batch: np.ndarray, backward_steps: int | None
) -> tuple[pd.DataFrame, np.ndarray]:
    """LSTM ops as their GPU kernels (archsim.sim.rnn_lowering), keeping each row's batch."""
    tagged = ops.assign(_from_batch=from_batch)
    low = lower_lstm_ops(tagged, backward_steps)
    return low.drop(columns="_from_batch").reset_index(drop=True), low["_from_batch"].to_numpy(
        dtype=float
    )


def has_copies(ops: pd.DataFrame) -> bool:
    """Whether the ops already hold their host-device copies (then none is added)."""
    return bool(ops["kind"].isin(COPY_KINDS).any())


def job_times(
    ops: pd.DataFrame,
    n_steps: int,
    from_batch: np.ndarray,
    sizes: np.ndarray,
    hw,
    source,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPU seconds of one step, its SM share and its DRAM bytes, for every batch size in
    ``sizes``, in one pass."""
    from archsim.perf.batch import scale_ops_to_batches
    from archsim.perf.kernel import launch_shape, predict_op_seconds
    from archsim.perf.occupancy import blocks_per_sm

    # Per size, the ops grouped by recorded batch (ascending; rows in order within a batch; no
    # batch, NaN: left out), each resized to the size; all sizes resized in one call.
    from_batch = np.asarray(from_batch, dtype=float)
    rows = np.flatnonzero(~np.isnan(from_batch))
    rows = rows[np.argsort(from_batch[rows], kind="stable")]
    one = ops.iloc[rows].reset_index(drop=True)
    sizes_int = np.array([int(size) for size in sizes], dtype=np.int64)
    big = pd.concat([one] * len(sizes_int) if len(one) else [], ignore_index=True)
    big = scale_ops_to_batches(
        big,
        np.tile(from_batch[rows].astype(np.int64), len(sizes_int)),
        np.repeat(sizes_int, len(one)),
    )
    big["_size"] = np.repeat(sizes_int, len(one))
    seconds = predict_op_seconds(big.drop(columns="_size"), hw, source)
    blocks, threads, regs, smem = launch_shape(big)
    resident = blocks_per_sm(threads, regs, smem, hw.gpu)
    frac = np.minimum(1.0, blocks / (hw.gpu.sms * np.maximum(resident, 1.0)))
    nbytes = np.nan_to_num(big["bytes_read"].to_numpy(dtype=float), nan=0.0) + np.nan_to_num(
        big["bytes_written"].to_numpy(dtype=float), nan=0.0
    )
    frame = pd.DataFrame(
        {"size": big["_size"], "t": seconds, "tf": seconds * frac, "b": np.maximum(nbytes, 0.0)}
    )
    sums = frame.groupby("size").sum().reindex(sizes)
    total = sums["t"].to_numpy() / n_steps
    weighted = sums["tf"].to_numpy() / np.maximum(sums["t"].to_numpy(), 1e-30)
    return total, weighted, sums["b"].to_numpy() / n_steps
