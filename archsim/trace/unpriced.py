"""Say when ``--model-only`` prices GPU work the trace gave it nothing to price with.

The kernel model scales an op's time with its FLOPs and bytes, which come from the launching op's
input shapes (archsim.trace.flops). A trace recorded without ``record_shapes=True`` (or ops with no
formula) leaves kernels with neither, so their model-only time rests on launch geometry and kernel
names alone: a real trace of five fp16 ``aten::mm`` GEMMs on an A100 recorded that way
(JeremyMorlier/GPUModel trace3.json, torch with CUDA 12.8) read 0 FLOP and was predicted at 45.7 us
against 85.2 us measured, with nothing saying why. The measured path is unaffected (it scales the
measured times), so only ``--model-only`` needs the line.
"""

from __future__ import annotations

import pandas as pd

_GPU_KINDS = ("kernel", "memcpy", "memset")


def unpriced_note(ops: pd.DataFrame, shapes_recorded: bool) -> str | None:
    """One line when measured GPU ops carry no FLOPs and no bytes, None otherwise."""
    gpu = ops[ops["kind"].astype(str).isin(_GPU_KINDS)]
    if not len(gpu):
        return None
    work = pd.to_numeric(gpu["flops"], errors="coerce").fillna(0.0)
    for column in ("bytes_read", "bytes_written"):
        work = work + pd.to_numeric(gpu[column], errors="coerce").fillna(0.0)
    empty = int((work <= 0).sum())
    if not empty:
        return None
    why = (
        "the trace recorded no input shapes: record_shapes was off"
        if not shapes_recorded
        else "their ops have no FLOP formula or recorded shapes"
    )
    return (
        f"{empty} of {len(gpu)} GPU ops carry no FLOPs or bytes ({why}): their model-only time "
        "rests on launch geometry and kernel names alone"
    )
