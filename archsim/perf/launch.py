"""CPU cost of one kernel launch (``cudaLaunchKernel`` on the launching thread), modelled from the host
CPU's per-thread speed rather than read from one trace per preset.

A launch is a fixed amount of single-threaded driver work (argument marshalling, command-buffer
writes), so its time scales with the host thread's speed. The one measured anchor: the median
``cudaLaunchKernel`` duration in the Kineto fixture v100_cnn_ddp_train, 5.22 us (4,350 launches), on
the DGX-1 preset's host (Xeon E5-2698 v4, ``thread_speed_rel`` 0.773; the trace does not record its
CPU, the preset takes it as a DGX-1). In capture-machine thread time that is 5.22 x 0.773 = 4.04 us.
Cross-check: the fixtures' own medians under the profiler span 5.2 us (v100_cnn_ddp_train),
9 us (a100_alexnet_forward, 79 launches at 1-us resolution) and 18 us (rtx2080ti_mlp_train, host
unknown); the model gives 3.2-14 us over the presets' hosts, from the DGX-H100's Xeon 8480C to
the Jetson TX1's Cortex-A57, and a faster host is never slower per launch.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.collectives import repeated_collectives

# measured: median cudaLaunchKernel 5.22 us in fixture v100_cnn_ddp_train x the DGX-1 host's
# thread_speed_rel 0.773 (hwconfigs/dgx1-v100.yaml) = 4.04 us of a capture-machine thread.
LAUNCH_CPU_US_AT_CAPTURE_SPEED = 5.22 * 0.773


def launch_overhead_us(thread_speed_rel: float) -> float:
    """CPU time of one kernel launch on a host thread of speed ``thread_speed_rel`` (relative to the
    capture machine's thread)."""
    if not thread_speed_rel > 0:
        raise ValueError("thread_speed_rel must be > 0")
    return LAUNCH_CPU_US_AT_CAPTURE_SPEED / thread_speed_rel


def launch_calls(ops: pd.DataFrame) -> np.ndarray:
    """Host launch calls each op cost: 1, except that the kernels (and copies) one graph launch
    issues share its single ``cudaGraphLaunch``/``hipGraphLaunch`` call (one correlation and start
    per call): fixture a100_80gb_train_prewindow has 345 GPU events from 70 cudaGraphLaunch calls,
    whose own traced durations are the graph's whole host cost. A CPU capture's collective is
    launched once, by its caller's c10d op, not again by its process group's work op
    (archsim.perf.collectives)."""
    calls = np.where(repeated_collectives(ops), 0.0, 1.0)
    if not len(ops) or not {"launch_api", "correlation", "launch_start_us"} <= set(ops.columns):
        return calls
    graph = ops["launch_api"].astype(str).str.contains("GraphLaunch", regex=False).to_numpy()
    if graph.any():
        later = ops.loc[graph, ["correlation", "launch_start_us"]].duplicated(keep="first")
        calls[np.flatnonzero(graph)[later.to_numpy()]] = 0.0
    return calls
