"""cuBLAS's K = 1 GEMM kernel (``gemmk1_kernel``): an outer product, element-wise in its outputs.

A GEMM C = alpha A B + beta C whose reduction depth K is 1 has no K loop: each output is the one
product alpha a_i b_j (2 M N K = 2 M N FLOPs, the GEMM count at K = 1; ``torch.mm`` of an (M, 1) by
a (1, N) matrix, or a weight gradient over a batch of one). cuBLAS runs it as a kernel of its own,
``void gemmk1_kernel<int, float, 256, 5, ...>(cublasGemmk1Params<float,
cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>,
cublasGemvTensorStridedBatched<float>, ...>)`` in the traces of HolisticTraceAnalysis's tests
(Quadro GP100 and A100): the name spells K = 1, and A and B are handed over as GEMV tensors,
strided vectors (a column of A, a row of B), not as matrices. Every traced launch of it reserves
1,024 B of shared memory for its 256 threads, one fp32 operand value a thread, where a K-deep tiled
kernel stages tiles of A and B (cuBLAS's volta_sgemm_* and scudnn tiles: 8-32 KB, see
archsim.perf.blocks). So the tile rule of archsim.perf.blocks (a 128 x 128 output tile a block,
ASSUMED_TILE_K = 512 deep) does not apply: it priced a one-block launch on the Quadro GP100 at
2 x 128 x 128 x 512 = 16.8 MFLOP, 104 us of one SM's math, against 2-3 us measured
(gp100_user_annotation).

cuBLAS is closed source, so how many outputs a thread writes is not published: the launch is read
as the model reads every kernel of a GEMM op that multiplies no tiles (gemv2N/gemv2T, split-K
reductions; archsim.perf.blocks.estimate_work_from_launch): ``outputs_per_thread`` outputs a
thread, PyTorch's element-wise launch (4). The fixtures whose ops recorded shapes bear it out: in
nodevice_sampled_train six [1, 64, 1] launches belong to mm ops of 131,072 FLOPs = 64 blocks x 256
threads x 4 outputs x 2, two to ops of 8,192 (a partly filled grid: the rule's count is an upper
bound), and a100_train_shapes' [1, 1, 1024] launches to bmm ops of 2,097,152 = 1,024 x 256 x 4 x 2.
Bytes: each output written once (beta = 0: ATen's mm passes beta 0, aten/src/ATen/native/cuda/
Blas.cpp, ``addmm_out_cuda_impl(result, result, self, mat2, 0, 1)``) and the one staged operand value
a thread reads (the shaped ops read less: M + N values, 8,320 B of the [1, 64, 1] launches' 65,536).
With the tile rule gp100_user_annotation was +494%; with this one its gemmk1 launches sit at the
kernel floor (1.25 us against 2-3 us measured) and the fixture at -43%.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.columns import by_unique

K1_GEMM_PATTERN = r"\bgemmk1_kernel\b"
# 2 M N K FLOPs of a GEMM at K = 1: one multiply by alpha and one product a_i b_j an output.
FLOPS_PER_OUTPUT = 2.0


def k1_gemm(names: pd.Series) -> np.ndarray:
    """Kernels named as cuBLAS's K = 1 GEMM (``gemmk1_kernel``)."""
    names = names.astype("string").fillna("")
    return by_unique(
        names, lambda u: u.str.contains(K1_GEMM_PATTERN, regex=True).to_numpy(dtype=bool)
    ).astype(bool)


def k1_gemm_work(
    blocks: np.ndarray,
    threads: np.ndarray,
    outputs_per_thread: float,
    element_bytes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, DRAM bytes) of a K = 1 GEMM launch of ``blocks`` x ``threads``: ``outputs_per_thread``
    outputs a thread at 2 FLOPs each, each output written once and one operand value read a thread."""
    slots = np.asarray(blocks, dtype=float) * np.asarray(threads, dtype=float)
    outputs = slots * outputs_per_thread
    size = np.asarray(element_bytes, dtype=float)
    return FLOPS_PER_OUTPUT * outputs, (outputs + slots) * size
