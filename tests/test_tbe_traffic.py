"""FBGEMM TBE forward bytes from the lookup op's shapes (archsim.trace.tbe_traffic)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from archsim.perf.calibrate import measured_ops
from archsim.trace.ingest import ingest
from archsim.trace.tbe_traffic import LOOKUP_OP, tbe_forward_bytes
from tests.conftest import kineto_fixture

FP32 = "void split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, 1ul>(x)"
HALF = (
    "void split_embedding_codegen_forward_weighted_kernel<c10::Half, c10::Half, float, false, "
    "long, 2ul, 32ul>(x)"
)
TYPES = ["float"] * 11 + ["long", "long", "Scalar", "float"] + ["Scalar"] * 5 + ["float"]


def dims(weights: int, indices: int, offsets: int, rows: int, weighted: bool = False) -> list:
    """The lookup op's Input Dims in its schema order (only the read positions matter)."""
    d: list = [[] for _ in range(29)]
    d[0], d[1], d[2], d[11], d[12], d[20] = [0], [weights], [0], [indices], [offsets], [rows]
    d[14] = [indices] if weighted else []
    return d


def test_golden_by_hand() -> None:
    # 100 rows of 1,200 fp32 weights: D = 12. 10 indices of 8 B, each a 48-B row; 5 offsets (4 bags).
    # read = 10 x (48 + 8) + 5 x 8 = 600; written = 4 bags x 12 x 4 B = 192.
    assert tbe_forward_bytes(LOOKUP_OP, FP32, dims(1200, 10, 5, 100), TYPES) == (600.0, 192.0)
    # Half rows, float output, weighted: 10 x (12 x 2 + 8 + 4) + 40 = 400; written 192.
    got = tbe_forward_bytes(LOOKUP_OP, HALF, dims(1200, 10, 5, 100, True), TYPES)
    assert got == (400.0, 192.0)


def test_not_priced() -> None:
    assert tbe_forward_bytes("aten::embedding", FP32, dims(1200, 10, 5, 100), TYPES) is None
    int8 = FP32.replace("<float, float, float", "<uint8_t, float, float")
    assert tbe_forward_bytes(LOOKUP_OP, int8, dims(1200, 10, 5, 100), TYPES) is None
    assert tbe_forward_bytes(LOOKUP_OP, FP32, dims(1200, 10, 5, 0), TYPES) is None
    # No indices: the kernel still writes every bag's (zero) row, and reads the offsets.
    assert tbe_forward_bytes(LOOKUP_OP, FP32, dims(1200, 0, 5, 100), TYPES) == (40.0, 192.0)


@given(
    rows=st.integers(1, 10**6),
    dim=st.integers(1, 512),
    indices=st.integers(1, 10**7),
    more=st.integers(1, 10**6),
    bags=st.integers(1, 10**6),
)
def test_invariants(rows: int, dim: int, indices: int, more: int, bags: int) -> None:
    r, w = tbe_forward_bytes(LOOKUP_OP, FP32, dims(rows * dim, indices, bags + 1, rows), TYPES)
    r2, w2 = tbe_forward_bytes(
        LOOKUP_OP, FP32, dims(rows * dim, indices + more, bags + 1, rows), TYPES
    )
    assert r2 > r and w2 == w  # more indices read more rows; the output is one row a bag
    rh, wh = tbe_forward_bytes(LOOKUP_OP, HALF, dims(rows * dim, indices, bags + 1, rows), TYPES)
    # half rows read 2 B an element less, the weighted kernel 4 B an index more; both write float
    assert rh == r - indices * (2 * dim - 4) and wh == w
    assert r >= indices * dim * 4 and w == bags * dim * 4


def test_nodevice_fixture() -> None:
    """nodevice_sampled_train's half-precision lookup: 30,111,429 indices into 48,265,501 rows of
    7,722,480,160 elements (D = 160, as its backward's [262144, 1440] over 9 tables), 2,359,297
    offsets: read 30,111,429 x (320 + 8) + 2,359,297 x 8 = 9,895,423,088 B, not the 15.4-GB table;
    written 2,359,296 x 160 x 4 = 1,509,949,440 B."""
    ops = measured_ops(ingest(kineto_fixture("nodevice_sampled_train.json.gz")).ops)
    fwd = ops[ops["name"].str.contains("split_embedding_codegen_forward_unweighted", regex=False)]
    assert len(fwd) == 2
    first = fwd.sort_values("start_us").iloc[0]  # the second call looks up other indices
    assert first["bytes_read"] == 9_895_423_088.0
    assert first["bytes_written"] == 1_509_949_440.0
