"""Calibration classes of GPU ops (archsim.perf.calibrate): op class, whether the work was inferred
from the launch grid (``_grid``), GEMM/conv auxiliary kernels (``_aux``), pooling (``_pool``),
memcpy by direction, memset."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.blocks import TILED_OP_CLASSES, tiled_engine
from archsim.perf.columns import by_unique
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings
from archsim.perf.terms import _name_view

INFERRED_WORK_SUFFIX = "_grid"
AUXILIARY_SUFFIX = "_aux"
POOLING_SUFFIX = "_pool"


MEMCPY_CLASSES = ("memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_other")

# Op classes a kernel-efficiency fit leaves out, and the reason calibrate reports. A collective's
# time on a GPU trace is not the GPU's own work: an NCCL/RCCL kernel spins until its peers arrive
# and the wire delivers (fixture a100_train_shapes: 60 ncclKernel_SendRecv measure 163.5 ms where
# the model prices their bytes at 0.18 ms). Fitted, that ratio (0.0011) became an "efficiency" that
# priced another trace's collectives at 900x their model time (a100_80gb_train_prewindow predicted
# +1334.5%); left out, they keep the model's time, as before any fit.
UNFITTED_CLASSES = frozenset({"communication"})
UNFITTED_REASON = (
    "collectives: their time on a GPU trace is spent waiting on peers and the wire, not the "
    "GPU's own work; they keep the model's time"
)


def is_unfitted_class(name: str) -> bool:
    """Whether a calibration class (``communication``, ``communication_grid``) is left out of the
    efficiency fit (UNFITTED_CLASSES)."""
    return str(name).removesuffix(INFERRED_WORK_SUFFIX) in UNFITTED_CLASSES


def known_efficiency_classes() -> frozenset[str]:
    """Every name efficiency_class can give that a calibration fits (not UNFITTED_CLASSES): an
    overlay naming another (a typo such as ``gemn``) would silently calibrate nothing, so
    archsim.perf.calibrate refuses it."""
    from archsim.trace.flops import OP_CLASSES

    bases = {*OP_CLASSES, *TILED_OP_CLASSES} - UNFITTED_CLASSES
    stems = {
        *bases,
        *(c + AUXILIARY_SUFFIX for c in TILED_OP_CLASSES),
        "reduction" + POOLING_SUFFIX,
    }
    return frozenset(
        {*stems, *(c + INFERRED_WORK_SUFFIX for c in stems), "memset", *MEMCPY_CLASSES}
    )


def known_classes_text() -> str:
    """The known classes in one line: the op classes, then the suffix rules and the copies."""
    from archsim.trace.flops import OP_CLASSES

    tiled = "/".join(sorted(TILED_OP_CLASSES))
    return (
        f"{', '.join(sorted({*OP_CLASSES, *TILED_OP_CLASSES} - UNFITTED_CLASSES))}, each also with "
        f"{INFERRED_WORK_SUFFIX}; {tiled} also with {AUXILIARY_SUFFIX} and "
        f"{AUXILIARY_SUFFIX}{INFERRED_WORK_SUFFIX}; reduction{POOLING_SUFFIX}, "
        f"reduction{POOLING_SUFFIX}{INFERRED_WORK_SUFFIX}; {', '.join(MEMCPY_CLASSES)}"
    )


def work_inferred(ops: pd.DataFrame) -> np.ndarray:
    """Kernels whose FLOPs or bytes the trace lacks, so the model infers them from the launch grid."""
    kind = _strings(ops, "kind")
    flops = np.nan_to_num(_column(ops, "flops"), nan=0.0)
    nbytes = np.nan_to_num(_column(ops, "bytes_read"), nan=0.0) + np.nan_to_num(
        _column(ops, "bytes_written"), nan=0.0
    )
    return ~kind.isin(["memcpy", "memset"]).to_numpy(dtype=bool) & ((flops <= 0) | (nbytes <= 0))


def efficiency_class(ops: pd.DataFrame) -> pd.Series:
    """Class used for calibrated efficiencies: op_class; memset; memcpy by direction (memcpy_htod,
    memcpy_dtoh, memcpy_dtod, memcpy_other), since each direction is limited by a different link.
    Kernels whose work is inferred from the launch grid get the suffix ``_grid`` (e.g. ``conv_grid``):
    that inference has its own arbitrary scale, so its efficiencies must not apply to ops with real
    FLOPs and bytes (CPU captures), and vice versa. Traced kernels of a GEMM/conv op that are not its
    GEMM engine get ``_aux`` before it (``conv_aux_grid``: cuDNN's transforms around the engine), and
    traced pooling kernels of the reduction class ``_pool`` (``reduction_pool_grid``)."""
    kind = _strings(ops, "kind")
    op_class = _strings(ops, "op_class").replace("", "other")
    # The auxiliary kernels of a GEMM/conv op (layout, FFT and Winograd transforms, split-K
    # reductions: archsim.perf.blocks.AUXILIARY_KERNEL_PATTERN) get their work from the element-wise
    # rule, not the tile rule, so their inferred scale, and efficiency, is another class's.
    grid_known = np.nan_to_num(_column(ops, "grid_x"), nan=0.0) > 0
    tiled_class = by_unique(op_class, lambda u: u.isin(TILED_OP_CLASSES)).astype(bool)
    engine = tiled_engine(_name_view(ops), grid_known, _column(ops, "flops"))
    auxiliary = tiled_class & grid_known & ~engine
    op_class = op_class.where(~auxiliary, op_class + AUXILIARY_SUFFIX)
    # Pooling kernels launch one thread per output (or input) element (PyTorch
    # aten/src/ATen/native/cuda/DilatedMaxPool2d.cu, AveragePool2d.cu: blocks = ceil(count /
    # threads)), so their grid shows their data as the element-wise rule assumes; reductions such as
    # cuDNN's batch norm (bn_fw_tr_1C11_*: one block per channel) or PyTorch's reduce_kernel loop over
    # an extent the grid does not show. Different rules, different inferred scales: separate classes.
    pool = by_unique(_strings(ops, "name"), lambda u: u.str.lower().str.contains("pool")).astype(
        bool
    )
    pooling = (op_class == "reduction").to_numpy(dtype=bool) & grid_known & pool
    op_class = op_class.where(~pooling, op_class + POOLING_SUFFIX)
    op_class = op_class.where(~work_inferred(ops), op_class + INFERRED_WORK_SUFFIX)
    direction = pd.Series(
        by_unique(
            _strings(ops, "name"),
            lambda u: u.str.extract(r"(HtoD|DtoH|DtoD)")[0].str.lower().fillna("other"),
        ),
        dtype="string",
    )
    out = op_class.where(kind != "memset", "memset")
    return out.where(kind != "memcpy", "memcpy_" + direction)
