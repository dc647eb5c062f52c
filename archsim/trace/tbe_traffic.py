"""Bytes of FBGEMM's table-batched embedding (TBE) forward kernels, from the lookup op's shapes.

``fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function`` launches
``split_embedding_codegen_forward_{unweighted,weighted}_kernel<emb_t, cache_t, output_t, ...>``
(github.com/pytorch/FBGEMM, fbgemm_gpu/codegen/embedding_forward_split_template.cu): one warp per
bag (``div_round_up(B * T, kForwardMaxThreads / kWarpSize)`` blocks of ``dim3(kWarpSize,
kForwardMaxThreads / kWarpSize)``), reading the bag's two offsets, its L indices (``indices[indices_start
+ l]``; weighted: ``indice_weights`` too), and for each index the table row ``weights[idx_j * D + d]``
(D elements of emb_t, ``Vec4T`` loads), then writing the pooled row into ``output`` of shape ``{B,
total_D}`` (output_t), for every bag, an empty one too (zeros): a lookup of no indices still writes
its output (``a100_80gb_train_prewindow``'s weighted lookups: 0 indices, 65,536 bags of 64 floats). The kernel reads only the rows its indices name, not the table: the op's
recorded tensors (the whole table: 15.4 GB on ``nodevice_sampled_train``) are not its reads.

From the op's ``Input Dims`` (its schema order: ``dev_weights`` 1, ``uvm_weights`` 2, ``indices`` 11,
``offsets`` 12, ``indice_weights`` 14, ``momentum1_dev`` 20): rowwise Adagrad keeps one momentum
value per table row, so rows = numel(momentum1_dev) and the row-weighted mean dimension is D =
numel(weights) / rows (``nodevice_sampled_train``: 7,722,480,160 / 48,265,501 = 160.0, its grad
[262144, 1440] over 9 tables = 160; ``a100_80gb_train_prewindow``: 64.0, grad 384 / 6 = 64). Bags =
numel(offsets) - 1 = B x T, which the grid confirms (147,456 blocks x 16 warps = 2,359,296).

    read    = indices x (D x sizeof(emb_t) + sizeof(index_t) [+ 4 weighted]) + offsets x sizeof(index_t)
    written = bags x D x sizeof(output_t)

An estimate where tables differ in D: the trace gives neither each table's D nor how the indices
fall among tables, so every index and bag is priced at the row-weighted mean (``a100_train_shapes``:
82.4 against the table mean 71.5 its backward's grad [8192, 8720] / 122 tables gives).
"""

from __future__ import annotations

import re

import numpy as np

LOOKUP_OP = "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function"
_FORWARD = re.compile(r"split_embedding_codegen_forward_(unweighted|weighted)_kernel<([^>]*)>")
# Template element types (FBGEMM's dispatch: float, at::Half, at::BFloat16; uint8_t rows carry
# quantization parameters and are not priced here).
_TYPE_BYTES = {"float": 4, "c10::Half": 2, "c10::BFloat16": 2, "at::Half": 2, "at::BFloat16": 2}
_INDEX_BYTES = {"long": 8, "int": 4}
# Positions in the lookup op's schema (FBGEMM split_embedding_codegen_lookup_rowwise_adagrad_function).
_DEV_WEIGHTS, _UVM_WEIGHTS, _INDICES, _OFFSETS, _INDICE_WEIGHTS, _MOMENTUM1 = 1, 2, 11, 12, 14, 20


def _numel(dims: list) -> int | None:
    if not isinstance(dims, list) or not dims:
        return None
    return int(np.prod(dims))


def tbe_forward_bytes(
    op_name: str, kernel_name: str, input_dims: list, input_types: list
) -> tuple[float, float] | None:
    """(bytes read, bytes written) of one TBE forward kernel, or None where the op, the kernel's
    element types or the recorded shapes are not those the module docstring reads."""
    if op_name != LOOKUP_OP:
        return None
    m = _FORWARD.search(kernel_name)
    if m is None or len(input_dims) <= _MOMENTUM1 or len(input_types) <= _OFFSETS:
        return None
    args = [a.strip() for a in m.group(2).split(",")]
    if len(args) < 3 or any(a not in _TYPE_BYTES for a in args[:3]):
        return None
    emb_bytes, out_bytes = _TYPE_BYTES[args[0]], _TYPE_BYTES[args[2]]
    index_bytes = _INDEX_BYTES.get(str(input_types[_INDICES]))
    weights = [_numel(input_dims[_DEV_WEIGHTS]), _numel(input_dims[_UVM_WEIGHTS])]
    indices, offsets = _numel(input_dims[_INDICES]), _numel(input_dims[_OFFSETS])
    rows = _numel(input_dims[_MOMENTUM1])
    if index_bytes is None or None in weights or indices is None or not offsets or not rows:
        return None
    dim = sum(weights) / rows
    if dim <= 0:
        return None
    weighted = m.group(1) == "weighted"
    per_index = dim * emb_bytes + index_bytes + (4 if weighted else 0)
    read = indices * per_index + offsets * index_bytes
    written = (offsets - 1) * dim * out_bytes
    return float(read), float(written)
