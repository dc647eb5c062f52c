"""TorchInductor's looped layer norms: a second loop that reloads the row, for archsim.perf.passes.

Inductor names a reduction kernel ``triton_red_`` when it loops over the reduction axis and
``triton_per_`` when one block holds the whole row (torch/_inductor/codegen/triton.py: the kernel
category is the heuristic, ``reduction`` or ``persistent_reduction``, github.com/pytorch/pytorch). In
a looped reduction ``TritonKernel.codegen_body`` wraps the loads, compute and stores gathered so far in
``for r0_offset in range(0, r0_numel, R0_BLOCK):`` and then invalidates the common-subexpression
cache ("invalidate any caches that came from inside the reduction loop": ``self.cse.invalidate``).
A pointwise node that reads the reduction's result (a layer norm's ``(x - mean) * rstd * w + b``)
cannot run in the loop that computes it: ``SIMDKernel.disable_reduction`` (codegen/simd.py) calls
``codegen_body`` to "flush all the pending buffers and write out a reduction loop", and the nodes
after it open a second loop over the same axis. With the cache invalidated, that loop issues its
loads again: the row is read twice, once for the Welford statistics and once to normalize and store
(a generated GPT-2 layer norm, ``triton_red_fused_add_arange_embedding_native_layer_norm_unsqueeze``,
loads its two embedding rows in both loops). A persistent reduction (``triton_per_``) keeps the row
in registers and loads it once.

Which kernels have the second loop. A ``triton_red_`` kernel whose name fuses ``native_layer_norm``
and whose LAST tensor argument has at least as many elements as its first: outputs come last
(``KernelArgs.python_argdefs``: in-place buffers, inputs, outputs, sizes; see
archsim.trace.inductor_args), so the kernel stores a tensor as large as a row-sized operand, one
element per iteration: the normalized rows, which need the statistics. A kernel whose last tensor is
smaller stores per-row statistics only (SD3.5's split Welford ``..._native_layer_norm_..._4``, whose
last three arguments are [2, 4096, 1, 19] partials): one loop, no re-read.

What the second loop reloads. The normalization reads the value the statistics were taken of: when
that value is a buffer the kernel stores (SD3.5's residual stream, written in place), the loop loads
that buffer; when it is not stored, the loop recomputes it from the same loads as the first loop (the
GPT-2 kernel above). Either way it loads nothing the first loop did not. This module takes the
second case, the kernel's reads less its last tensor (the output, stored, not loaded): every tensor
the first loop loads is reloaded. On SD3.5's 8,192-row kernels that is x and the attention output,
2 x 4,864 B per row; were the residual stored in place the loop would reload x alone (half the
re-read bytes, the same rows in flight).

Where the reload comes from is archsim.perf.passes' rule: the rows a wave holds, at these bytes per
row, against the L2. The row that rule counts is what a block LOADS (for PyTorch's layer norm, X), so
the output's stores are left out here too: on the MI300X 2,432 resident 9.7-KB rows are 23.6 MB,
within the 32 MB of L2, and the reload is priced at L2 bandwidth and latency. Counting the output's
write-allocated lines as well (14.6 KB a row, 35 MB) would send it to DRAM instead: the 300
8,192-row kernels' median error would go from -47% to -18% (298 of them within 30% instead of 2;
measured on MI300X SD3.5, model-only). The rule's answer is the knife edge it looks like: the
MI300X L2 is 4 MB per XCD, private to that XCD's 38 CUs (AMD CDNA3 whitepaper: 8 XCDs, 4 MB L2
each), and 304 resident rows per XCD are 3.0 MB (loads) or 4.4 MB (with the stores). A reload
that misses L2 does not reach HBM: the 256 MB Infinity Cache, a memory-side cache in front of HBM
(CDNA3 whitepaper: 17.2 TB/s peak; a pointer chase within it takes 217-255 ns against 399-434 ns
past it, te42kyfo/gpu-benches gpu-latency/mi300x.txt) holds the 35 MB easily. The hardware schema
has one cache level, so a miss would be priced at HBM: an upper bound there.

Round trips per loop. Each loop steps ``for r0_offset in range(0, r0_numel, R0_BLOCK)``: its loads
wait before the Welford update and the next step's loads (Inductor's reduction configs launch with
``num_stages=1``, ``triton_config_reduction`` in torch/_inductor/runtime/triton_heuristics.py, so
Triton does not software-pipeline the loop), so a loop makes ceil(r0_numel / R0_BLOCK) dependent
round trips: SD3.5's 2,432 columns at R0_BLOCK 2,048 two, at 1,024 three. archsim.trace.gpu_costs
reads that count from the launch's ``kernel_kwargs`` and Concrete Inputs (``reduction_loop_steps``
on the ops table); where it is not recorded a loop is taken as one round trip (a lower bound).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.blocks import DTYPE_BYTES, element_bytes
from archsim.perf.columns import by_unique, parsed_input_dims

LOOPED_NORM_PATTERN = r"^triton_red_fused\w*native_layer_norm"


def _first_last_elements(input_dims: pd.Series) -> np.ndarray:
    """(elements of the first, of the last tensor argument) of each op's recorded shapes; scalar
    arguments (empty dims) are skipped; NaN where nothing is recorded."""

    def parse(unique: pd.Series) -> np.ndarray:
        out = np.full((len(unique), 2), np.nan)
        for i, text in enumerate(unique):
            try:
                dims = [d for d in parsed_input_dims(text) if isinstance(d, list) and d]
                sizes = [float(np.prod([float(x) for x in d])) for d in dims]
            except (ValueError, TypeError, IndexError, KeyError):
                continue
            if sizes:
                out[i] = (sizes[0], sizes[-1])
        return out

    texts = pd.Series(input_dims).reset_index(drop=True).astype("string").fillna("")
    unique = pd.Series(texts.unique())
    table = parse(unique.astype(str)) if len(unique) else np.zeros((0, 2))
    return table[pd.Index(unique).get_indexer(texts)]


def looped_norm_rows(
    names: pd.Series,
    input_dims: pd.Series | None,
    bytes_read: np.ndarray,
    dtypes: pd.Series | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(passes over the row: 2 for a looped Inductor layer norm that normalizes, else 0; the bytes
    its first loop loads, NaN elsewhere) per op (module docstring): the op's reads less its last
    tensor argument at the op's element size (2 B where the dtype is unknown)."""
    names = pd.Series(names).reset_index(drop=True).astype("string").fillna("")
    n = len(names)
    named = by_unique(names, lambda u: u.str.contains(LOOPED_NORM_PATTERN, regex=True)).astype(bool)
    named = np.asarray(named, dtype=bool)
    if input_dims is None or not named.any():
        return np.zeros(n), np.full(n, np.nan)
    first, last = _first_last_elements(input_dims).T
    stores_rows = named & np.isfinite(first) & np.isfinite(last) & (last >= first) & (first > 0)
    size = np.full(n, 2.0)
    if dtypes is not None:
        text = pd.Series(dtypes).reset_index(drop=True).astype("string").fillna("")
        known = text.str.replace("torch.", "", regex=False).isin(list(DTYPE_BYTES)).to_numpy(bool)
        size = np.where(known, element_bytes(text), size)
    read = np.nan_to_num(np.asarray(bytes_read, dtype=float), nan=0.0)
    first_loop = np.maximum(read - np.nan_to_num(last, nan=0.0) * size, 0.0)
    ok = stores_rows & (first_loop > 0)
    return np.where(ok, 2.0, 0.0), np.where(ok, first_loop, np.nan)


def looped_norm_trips(
    looped: np.ndarray, loop_steps: np.ndarray | None, trips: np.ndarray
) -> np.ndarray:
    """``trips`` (round trips per pass) with each looped layer norm's (``looped`` > 0) replaced by
    its loop's recorded steps (module docstring), 1 where none is recorded."""
    looped = np.asarray(looped, dtype=float) > 0
    steps = np.full(len(looped), np.nan) if loop_steps is None else np.asarray(loop_steps, float)
    steps = np.where(np.isfinite(steps) & (steps >= 1), steps, 1.0)
    return np.where(looped, steps, trips)


__all__ = ["LOOPED_NORM_PATTERN", "looped_norm_rows", "looped_norm_trips"]
