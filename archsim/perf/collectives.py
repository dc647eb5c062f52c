"""Each torch.distributed collective of a CPU capture priced once when predicted on a GPU.

A CPU-only trace records one collective twice, and ingest keeps both (class communication): c10d's
dispatcher op on the calling thread (``c10d::allreduce_``: torch/csrc/distributed/c10d/Ops.cpp),
which issues it, and the process group's work on the group's own thread (``gloo:all_reduce``: the
record_function of ProcessGroupGloo.cpp), which carries it out. Predicted on a GPU, the caller's op
is the collective's one launch and its one kernel; the work op is the same collective again. So
the work op is priced only where its process recorded no c10d op (a trace of the process group
alone). The real gloo capture (tests/data/gloo_cpu_collectives_2proc.json.gz) holds 15 of each.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.columns import by_unique
from archsim.perf.columns import strings as _strings
from archsim.trace.flops import is_collective

CALLER_PREFIX = "c10d::"  # c10d's dispatcher ops; a process group's work is "<backend>:<op>"


def repeated_collectives(ops: pd.DataFrame) -> np.ndarray:
    """Ops that repeat a collective their caller's op already prices: a CPU-captured process
    group's work op (``gloo:all_reduce``) in a process (pid) that recorded c10d ops."""
    cpu = (_strings(ops, "kind") == "cpu").to_numpy(dtype=bool)
    if not cpu.any() or "name" not in ops.columns:  # a GPU trace: its collectives are kernels
        return np.zeros(len(ops), dtype=bool)
    names = _strings(ops, "name")
    collective = cpu & by_unique(names, lambda u: u.map(is_collective)).astype(bool)
    caller = collective & by_unique(names, lambda u: u.str.startswith(CALLER_PREFIX)).astype(bool)
    work = collective & ~caller
    if not work.any() or not caller.any():
        return np.zeros(len(ops), dtype=bool)
    if "pid" not in ops.columns:  # one process
        return work
    pid = ops["pid"].astype("string").fillna("")
    return work & pid.isin(pd.unique(pid[caller])).to_numpy(dtype=bool)


__all__ = ["CALLER_PREFIX", "repeated_collectives"]
