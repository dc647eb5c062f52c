"""An ``aten::mm`` row as a CPU capture records it (shapes, FLOPs, bytes), for kernel-model tests
that price one GEMM by hand."""

from __future__ import annotations

DTYPE_BYTES = {"float8_e4m3fn": 1, "float16": 2, "bfloat16": 2}


def mm_op(m: int, k: int, n: int, dtype: str) -> dict:
    """[m, k] x [k, n] in ``dtype``: 2mkn FLOPs, both operands read once, the output written once."""
    size = DTYPE_BYTES[dtype]
    return {
        "kind": "cpu",
        "name": "aten::mm",
        "op_class": "gemm",
        "dtype": dtype,
        "input_dims": f"[[{m},{k}],[{k},{n}]]",
        "flops": 2.0 * m * k * n,
        "bytes_read": size * (m * k + k * n),
        "bytes_written": size * m * n,
    }
