"""aiter's two-kernel group norm (``aiter::_groupnorm_run``, github.com/ROCm/aiter
csrc/kernels/groupnorm.cu): the op's bytes from its recorded shapes (archsim.trace.flops) and each
kernel's from its code (archsim.trace.norm_traffic), worked by hand; on the MI300X SD3.5 trace both
kernels read the whole input (issue 12)."""

from __future__ import annotations

import functools
import json

import numpy as np

from archsim.trace.flops import op_cost
from archsim.trace.gpu_costs import split_op
from tests.conftest import kineto_fixture

UP = (
    "void (anonymous namespace)::groupnorm_kernel_dispatch_up<__hip_bfloat16, 1024u>(unsigned "
    "int, unsigned int, long, bool, __hip_bfloat16 const*, float*, float*)"
)
DOWN = (
    "void (anonymous namespace)::groupnorm_kernel_dispatch_down<__hip_bfloat16, 1024u>(unsigned "
    "int, unsigned int, long, float, bool, __hip_bfloat16 const*, __hip_bfloat16 const*, "
    "__hip_bfloat16 const*, float const*, float const*, __hip_bfloat16*)"
)
# As the SD3.5 VAE decoder records it: (input, num_groups, weight, bias, eps)
DIMS = [[1, 512, 128, 128], [], [512], [512], []]
TYPES = ["c10::BFloat16", "Scalar", "c10::BFloat16", "c10::BFloat16", "Scalar"]
CONCRETE = ["", "32", "", "", "1e-06"]


def test_op_cost_by_hand() -> None:
    """[1, 512, 128, 128] bf16: 8,388,608 elements x 2 B = 16,777,216 B of input, weight and bias
    512 x 2 B each: reads 16,779,264 B; writes an output of the input's size, 16,777,216 B; group
    norm's 8 operations per element: 67,108,864 FLOPs."""
    cost = op_cost("aiter::_groupnorm_run", DIMS, TYPES, CONCRETE)
    assert cost.has_formula and cost.op_class == "reduction"
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (67_108_864, 16_779_264, 16_777_216)
    # the later signature (y, workspace, input, num_groups, weight, bias, eps) moves the same bytes
    later = op_cost(
        "aiter::_groupnorm_run",
        [[1, 512, 128, 128], [1024], *DIMS],
        ["c10::BFloat16", "float", *TYPES],
        ["", "", *CONCRETE],
    )
    assert (later.flops, later.bytes_read, later.bytes_written) == (
        cost.flops,
        cost.bytes_read,
        cost.bytes_written,
    )


def test_kernels_by_hand() -> None:
    """launchGroupNormKernel: inner_size = 512 / 32 x 16,384 = 262,144; gridx = ceil(262,144 /
    8,192) = 32, aligned so / 4 = 8 (and <= 4096 / 32); grid (8, 32) = 256 workgroups of 1024.
    ``up`` reads the input (the op's 16,779,264 B) and writes two partials per workgroup,
    256 x 2 x 2 B = 1,024 B; ``down`` reads the input again and writes y, 16,777,216 B. Equal
    launches share the FLOPs equally."""
    cost = op_cost("aiter::_groupnorm_run", DIMS, TYPES, CONCRETE)
    blocks, threads = np.array([256.0, 256.0]), np.array([1024.0, 1024.0])
    flops, read, written, _ = split_op(cost, [UP, DOWN], blocks, threads, blocks * threads)
    assert read.tolist() == [16_779_264, 16_779_264]
    assert written.tolist() == [1_024, 16_777_216]
    assert flops.tolist() == [33_554_432, 33_554_432]


@functools.cache
def _sd35_ops():
    from archsim.trace.ingest import ingest

    return ingest(kineto_fixture("mi300x_sd35_inference.json.gz")).ops


def test_fixture_group_norm_kernels_read_their_input() -> None:
    """On the MI300X SD3.5 trace every aiter group-norm kernel reads at least the op's input (its
    Input Dims x 2 B, bf16), and the apply kernel writes that much."""
    ops = _sd35_ops()
    for name, writes_output in (("groupnorm_kernel_dispatch_up", False),
                                ("groupnorm_kernel_dispatch_down", True)):  # fmt: skip
        rows = ops[ops["name"].str.contains(name, regex=False)]
        assert len(rows) >= 10, f"fixture has no {name}"
        first = np.array([2.0 * np.prod(json.loads(d)[0]) for d in rows["input_dims"]])
        assert (rows["bytes_read"].to_numpy() >= first).all()
        assert rows["has_formula"].all()
        if writes_output:
            assert (rows["bytes_written"].to_numpy() == first).all()
        else:
            assert (rows["bytes_written"].to_numpy() < first / 1000).all()
