"""FLOPs, bytes and op class of an operator from its recorded input shapes (torch.profiler
``record_shapes``: ``Input Dims``, ``Input type``, ``Concrete Inputs``).

One small function per op family, keyed by the aten op name without namespace and trailing ``_``
(``aten::add_`` -> ``add``). Conventions, so every number here has a stated origin:
- a multiply-add is 2 FLOPs (GEMM 2*M*K*N, convolution 2 * MACs);
- element-wise ops cost a fixed count of arithmetic operations per output element, worked out from
  the textbook formula in the comment beside each (a transcendental such as exp/tanh counts as 1);
- bytes_read = every tensor input once; bytes_written = the output once (no cache reuse modelled);
- an op with no formula (or whose shapes were not recorded) gets bytes_read from its tensor inputs,
  bytes_written 0, FLOPs 0 and ``has_formula`` False; ingest counts them in meta.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Kineto "Input type" names of tensor element types -> (numpy-style dtype name, bytes per element).
TENSOR_TYPES: dict[str, tuple[str, int]] = {
    "float": ("float32", 4),
    "double": ("float64", 8),
    "c10::Half": ("float16", 2),
    "c10::BFloat16": ("bfloat16", 2),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "short": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1),
    "c10::Float8_e5m2": ("float8_e5m2", 1),
}
DEFAULT_DTYPE = ("float32", 4)  # legacy traces without "Input type": assume fp32

OP_CLASSES = (
    "gemm",
    "conv",
    "elementwise",
    "reduction",
    "softmax",
    "loss",
    "copy",
    "optimizer",
    "rnn",
    "memcpy",
    "memset",
    "other",
)


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str
    itemsize: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class OpCost:
    op_class: str
    flops: float
    bytes_read: float
    bytes_written: float
    has_formula: bool
    dtype: str


@dataclass
class OpArgs:
    """Positional arguments of one recorded op call: a Tensor, a list of Tensors, or a plain value."""

    values: list[Any]
    dtype: str
    itemsize: int

    def tensor(self, i: int) -> Tensor | None:
        v = self.values[i] if i < len(self.values) else None
        return v if isinstance(v, Tensor) else None

    def tensors(self) -> list[Tensor]:
        out: list[Tensor] = []
        for v in self.values:
            if isinstance(v, Tensor):
                out.append(v)
            elif isinstance(v, list):
                out.extend(t for t in v if isinstance(t, Tensor))
        return out

    def tensor_list(self, i: int) -> list[Tensor]:
        v = self.values[i] if i < len(self.values) else None
        return [t for t in v if isinstance(t, Tensor)] if isinstance(v, list) else []

    def value(self, i: int, default: Any = None) -> Any:
        v = self.values[i] if i < len(self.values) else None
        is_tensors = isinstance(v, Tensor) or (
            isinstance(v, list) and any(isinstance(t, Tensor) for t in v)
        )
        return default if v is None or is_tensors else v

    def read_bytes(self) -> float:
        return float(sum(t.nbytes for t in self.tensors()))


def _is_ints(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def _parse_concrete(text: Any) -> Any:
    if not isinstance(text, str) or text == "":
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def parse_args(dims: Any, types: Any, concrete: Any) -> OpArgs | None:
    """Combine the three parallel lists of a recorded op into typed arguments (None if no shapes)."""
    if not isinstance(dims, list):
        return None
    types = types if isinstance(types, list) else [None] * len(dims)
    concrete = concrete if isinstance(concrete, list) else [None] * len(dims)
    values: list[Any] = []
    op_dtype: tuple[str, int] | None = None
    for i, d in enumerate(dims):
        typ = types[i] if i < len(types) else None
        known = TENSOR_TYPES.get(typ) if isinstance(typ, str) else None
        if typ == "TensorList" or (
            isinstance(d, list) and d and all(isinstance(x, list) for x in d)
        ):
            dt = op_dtype or DEFAULT_DTYPE
            values.append([Tensor(tuple(s), dt[0], dt[1]) for s in d if _is_ints(s)])
        elif known is not None or (typ is None and _is_ints(d) and d):
            dt = known or DEFAULT_DTYPE
            op_dtype = op_dtype or dt
            values.append(Tensor(tuple(d) if _is_ints(d) else (), dt[0], dt[1]))
        else:
            values.append(_parse_concrete(concrete[i] if i < len(concrete) else None))
    # Tensor lists seen before the first typed tensor take the op's dtype.
    dt = op_dtype or DEFAULT_DTYPE
    values = [
        [Tensor(t.shape, dt[0], dt[1]) for t in v]
        if isinstance(v, list) and v and all(isinstance(t, Tensor) for t in v)
        else v
        for v in values
    ]
    return OpArgs(values=values, dtype=dt[0], itemsize=dt[1])


def _words(text: str) -> tuple[str, ...]:
    """A table of op names written as one space-separated string (keeps the tables short)."""
    return tuple(text.split())


Formula = Callable[[OpArgs], tuple[float, float, float] | None]  # (flops, read, written)


# ---------------------------------------------------------------- GEMM -------------------------
def _mm_like(a: Tensor | None, b: Tensor | None) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of a matmul of a[..., M, K] by b[..., K, N] with torch's 1-D rules."""
    if a is None or b is None or not a.shape or not b.shape:
        return None
    sa, sb = list(a.shape), list(b.shape)
    if len(sa) == 1:
        sa = [1, sa[0]]
    if len(sb) == 1:
        sb = [sb[0], 1]
    m, k, n = sa[-2], sa[-1], sb[-1]
    batch_a, batch_b = sa[:-2], sb[:-2]
    batch = _broadcast(tuple(batch_a), tuple(batch_b))
    return (math.prod(batch) if batch is not None else 1), m, k, n


def _gemm(a_idx: int, b_idx: int, bias_idx: int | None = None) -> Formula:
    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        dims = _mm_like(args.tensor(a_idx), args.tensor(b_idx))
        if dims is None:
            return None
        batch, m, k, n = dims
        out = batch * m * n
        flops = 2.0 * batch * m * k * n  # one multiply-add per (m, k, n)
        if bias_idx is not None and args.tensor(bias_idx) is not None:
            flops += out  # adding the bias/C term: one add per output element
        return flops, args.read_bytes(), out * args.itemsize

    return formula


def _linear(args: OpArgs) -> tuple[float, float, float] | None:
    x, w = args.tensor(0), args.tensor(1)
    if x is None or w is None or not x.shape or len(w.shape) != 2:
        return None
    rows, k, n = math.prod(x.shape[:-1]), x.shape[-1], w.shape[0]
    flops = 2.0 * rows * k * n + (rows * n if args.tensor(2) is not None else 0)
    return flops, args.read_bytes(), rows * n * args.itemsize


# ---------------------------------------------------------------- convolution ------------------
# Positions of (stride, padding, dilation, groups, transposed) in each convolution entry point's
# schema (native_functions.yaml). Input is arg 0 and weight arg 1 everywhere.
_CONV_ARGS: dict[str, tuple[int, int, int, int | None, int | None]] = {
    "conv1d": (3, 4, 5, 6, None),
    "conv2d": (3, 4, 5, 6, None),
    "conv3d": (3, 4, 5, 6, None),
    "convolution": (3, 4, 5, 8, 6),
    "_convolution": (3, 4, 5, 8, 6),
    "mkldnn_convolution": (4, 3, 5, 6, None),
    "cudnn_convolution": (3, 2, 4, 5, None),
    "miopen_convolution": (4, 3, 5, 6, None),
    "_slow_conv2d_forward": (4, 5, None, None, None),
    "thnn_conv2d": (4, 5, None, None, None),
}


def _seq(value: Any, n: int, default: int) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if _is_ints(value) and len(value) in (1, n):
        return list(value) * (n // len(value))
    return [default] * n


def _conv(name: str) -> Formula:
    stride_i, pad_i, dil_i, groups_i, transposed_i = _CONV_ARGS[name]

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x, w = args.tensor(0), args.tensor(1)
        if x is None or w is None or len(x.shape) < 3 or len(x.shape) != len(w.shape):
            return None
        spatial = len(x.shape) - 2
        stride = args.value(stride_i)
        if stride is None:
            return None  # without the stride (no Concrete Inputs) the output size is unknown
        stride = _seq(stride, spatial, 1)
        padding = _seq(args.value(pad_i), spatial, 0)
        dilation = _seq(args.value(dil_i) if dil_i is not None else None, spatial, 1)
        transposed = bool(args.value(transposed_i)) if transposed_i is not None else False
        n = x.shape[0]
        kernel = w.shape[2:]
        if transposed:
            # Each input element scatters into a (C_out/groups x kernel) patch: weight [C_in, C_out/g, k..]
            flops = 2.0 * n * math.prod(x.shape[2:]) * math.prod(w.shape)
            out_numel = (
                n
                * w.shape[1]
                * math.prod(
                    (i - 1) * s - 2 * p + d * (k - 1) + 1
                    for i, s, p, d, k in zip(
                        x.shape[2:], stride, padding, dilation, kernel, strict=True
                    )
                )
            )
            return flops, args.read_bytes(), out_numel * args.itemsize
        out_spatial = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, kernel, strict=True)
        ]
        if min(out_spatial) <= 0:
            return None
        c_out, c_in_per_group = w.shape[0], w.shape[1]
        out_numel = n * c_out * math.prod(out_spatial)
        # MACs: every output element sums C_in/groups x prod(kernel) products.
        flops = 2.0 * out_numel * c_in_per_group * math.prod(kernel)
        has_bias = name not in ("cudnn_convolution",) and args.tensor(2) is not None
        if has_bias:
            flops += out_numel
        return flops, args.read_bytes(), out_numel * args.itemsize

    return formula


def _conv_backward(args: OpArgs) -> tuple[float, float, float] | None:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost the
    forward's MACs; grad_bias one add per grad_output element."""
    go, x, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if go is None or x is None or w is None or len(go.shape) < 3:
        return None
    if bool(args.value(7, False)):
        macs = go.shape[0] * math.prod(x.shape[2:]) * math.prod(w.shape)  # transposed
    else:
        macs = go.numel * w.shape[1] * math.prod(w.shape[2:])
    mask = args.value(10)
    mask = list(mask) if isinstance(mask, list | tuple) and len(mask) == 3 else [True] * 3
    flops = 2.0 * macs * (int(bool(mask[0])) + int(bool(mask[1]))) + (go.numel if mask[2] else 0)
    written = (x.nbytes if mask[0] else 0) + (w.nbytes if mask[1] else 0)
    return flops, args.read_bytes(), float(written)


# ---------------------------------------------------------------- RNN ---------------------------
# Per hidden unit and row, an LSTM cell applies 3 sigmoids, 1 tanh (gates), f*c, i*g, their sum,
# tanh(c), o*tanh(c) = 9 operations; a GRU cell: 2 sigmoids, r*h_n, +, tanh, 1-z, *, z*h, + = 9.
RNN_CELL_OPS_PER_HIDDEN = 9


def _rnn_cell(args: OpArgs) -> tuple[float, float, float] | None:
    """lstm_cell / gru_cell(input[B,I], hx, w_ih[G*H,I], w_hh[G*H,H], b_ih, b_hh)."""
    x, w_ih, w_hh = args.tensor(0), args.tensor(2), args.tensor(3)
    if x is None or w_ih is None or w_hh is None or len(w_hh.shape) != 2:
        return None
    rows, hidden = math.prod(x.shape[:-1]), w_hh.shape[1]
    gates = w_ih.shape[0]
    flops = 2.0 * rows * gates * (w_ih.shape[1] + hidden)  # the two gate GEMMs
    flops += 2.0 * rows * gates  # both biases
    flops += RNN_CELL_OPS_PER_HIDDEN * rows * hidden
    return flops, args.read_bytes(), 2.0 * rows * hidden * args.itemsize


def _rnn_sequence(args: OpArgs) -> tuple[float, float, float] | None:
    """lstm/gru/_cudnn_rnn(input[T,B,I] or packed [sum T, I], ..., weights TensorList, ...): the
    weight list holds (w_ih [G*H, I_l], w_hh [G*H, H]) pairs per layer and direction."""
    x = args.tensor(0)
    if x is None or not x.shape:
        return None
    mats = [t for v in args.values if isinstance(v, list) for t in v if len(t.shape) == 2]
    if len(mats) < 2:
        return None
    tokens = math.prod(x.shape[:-1])  # T*B: the same for batch_first or not
    flops, written = 0.0, 0.0
    for w_ih, w_hh in zip(mats[0::2], mats[1::2], strict=False):
        gates, hidden = w_ih.shape[0], w_hh.shape[1]
        flops += 2.0 * tokens * gates * (w_ih.shape[1] + hidden) + 2.0 * tokens * gates
        flops += RNN_CELL_OPS_PER_HIDDEN * tokens * hidden
        written += tokens * hidden * args.itemsize
    return flops, args.read_bytes(), written


def _fused_rnn_cell(args: OpArgs) -> tuple[float, float, float] | None:
    """_thnn_fused_lstm_cell/_gru_cell(input_gates, hidden_gates, cx/hx, ...): gate GEMMs already
    done; adds the two gate tensors (1 per element) then the cell update per hidden unit."""
    gi, hx = args.tensor(0), args.tensor(2)
    if gi is None or hx is None:
        return None
    flops = float(gi.numel) + RNN_CELL_OPS_PER_HIDDEN * hx.numel
    return flops, args.read_bytes(), 2.0 * hx.nbytes


# ---------------------------------------------------------------- element-wise ------------------
def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(ndim):
        sizes = {s[len(s) - ndim + axis] for s in shapes if len(s) - ndim + axis >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _elementwise(ops_per_element: float) -> Formula:
    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        tensors = [v for v in args.values if isinstance(v, Tensor)]
        if not tensors:
            return None
        shape = _broadcast(*(t.shape for t in tensors))
        if shape is None:
            return None
        out = math.prod(shape)
        return ops_per_element * out, args.read_bytes(), out * args.itemsize

    return formula


def _fill(args: OpArgs) -> tuple[float, float, float] | None:
    """fill_/zero_/ones_like...: nothing read, the tensor written once."""
    t = args.tensor(0)
    return (0.0, 0.0, float(t.nbytes)) if t is not None else None


# ---------------------------------------------------------------- reductions, softmax, losses ---
def _reduction(ops_per_element: float) -> Formula:
    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x = args.tensor(0)
        if x is None:
            return None
        dims = args.value(1)
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if _is_ints(dims) and dims and x.shape:
            kept = [s for i, s in enumerate(x.shape) if i not in {d % len(x.shape) for d in dims}]
            out = math.prod(kept)
        else:
            out = 1  # full reduction (or dim not recorded)
        return ops_per_element * x.numel, args.read_bytes(), out * args.itemsize

    return formula


def _per_input_element(ops_per_element: float, writes_input_size: bool = True) -> Formula:
    """Ops that touch every element of arg 0 and write a tensor of its size (softmax, norms...)."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x = args.tensor(0)
        if x is None:
            return None
        written = x.nbytes if writes_input_size else args.itemsize
        return ops_per_element * x.numel, args.read_bytes(), float(written)

    return formula


def _pointwise_loss(ops_per_element: float, reduction_idx: int) -> Formula:
    """mse/l1/smooth_l1/huber/bce(input, target, reduction...): reduction 0 = none keeps the shape."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x = args.tensor(0)
        if x is None:
            return None
        reduction = args.value(reduction_idx, 1)
        written = x.nbytes if reduction == 0 else args.itemsize
        return ops_per_element * x.numel, args.read_bytes(), float(written)

    return formula


def _pointwise_loss_backward(ops_per_element: float) -> Formula:
    """mse/l1/smooth_l1/huber/bce _backward(grad_output, self, target, ...): a full-size grad_input."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x = args.tensor(1)
        if x is None:
            return None
        return ops_per_element * x.numel, args.read_bytes(), float(x.nbytes)

    return formula


def _nll_loss(args: OpArgs) -> tuple[float, float, float] | None:
    """nll_loss(input[N,C], target[N], ...): gathers one log-prob per sample and sums them."""
    x, target = args.tensor(0), args.tensor(1)
    if x is None or target is None:
        return None
    picked = target.numel
    return float(picked), target.nbytes + picked * x.itemsize, float(args.itemsize)


def _nll_loss_backward(args: OpArgs) -> tuple[float, float, float] | None:
    """nll_loss_backward(grad_out, input[N,C], target, ...): writes a full grad_input, scatters N."""
    x, target = args.tensor(1), args.tensor(2)
    if x is None or target is None:
        return None
    return float(target.numel), args.read_bytes(), float(x.nbytes)


def _cross_entropy(args: OpArgs) -> tuple[float, float, float] | None:
    """cross_entropy_loss = log_softmax (5 per element, see _SOFTMAX_OPS) + nll_loss."""
    x, target = args.tensor(0), args.tensor(1)
    if x is None or target is None:
        return None
    return 5.0 * x.numel + target.numel, args.read_bytes(), float(args.itemsize)


# ---------------------------------------------------------------- copies -------------------------
def _copy_into_self(args: OpArgs) -> tuple[float, float, float] | None:
    """copy_(self, src): reads src, writes self (dtype of self)."""
    dst, src = args.tensor(0), args.tensor(1)
    if dst is None or src is None:
        return None
    return 0.0, float(src.nbytes), float(dst.nbytes)


def _copy_same_size(args: OpArgs) -> tuple[float, float, float] | None:
    """clone/_to_copy/contiguous/flip/roll...: reads arg 0, writes a tensor of the same size."""
    x = args.tensor(0)
    return (0.0, float(x.nbytes), float(x.nbytes)) if x is not None else None


def _concat(args: OpArgs) -> tuple[float, float, float] | None:
    """cat/stack(tensors, dim): reads every input, writes their sum."""
    total = args.read_bytes()
    return (0.0, total, total) if total > 0 or args.tensors() else None


def _gather_rows(args: OpArgs) -> tuple[float, float, float] | None:
    """embedding(weight[V,D], indices): one D-row per index."""
    w, idx = args.tensor(0), args.tensor(1)
    if w is None or idx is None or len(w.shape) != 2:
        return None
    out = idx.numel * w.shape[1] * w.itemsize
    return 0.0, float(idx.nbytes + out), float(out)


def _gather(args: OpArgs) -> tuple[float, float, float] | None:
    """gather(self, dim, index): the output has index's shape."""
    x, idx = args.tensor(0), args.tensor(2)
    if x is None or idx is None:
        return None
    out = idx.numel * x.itemsize
    return 0.0, float(idx.nbytes + out), float(out)


# ---------------------------------------------------------------- optimizers ---------------------
def _foreach(ops_per_element: float, written_lists: Sequence[int] = (0,)) -> Formula:
    """_foreach_*/_fused_* over TensorLists: work per element of the first list (the parameters)."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        lists = [v for v in args.values if isinstance(v, list) and v]
        if not lists:
            return None
        numel = sum(t.numel for t in lists[0])
        written = sum(t.nbytes for i in written_lists if i < len(lists) for t in lists[i])
        return ops_per_element * numel, args.read_bytes(), float(written)

    return formula


# Adam per element (torch.optim.Adam docs' algorithm): m = b1*m + (1-b1)*g (3), v = b2*v + (1-b2)*g*g
# (4), denom = sqrt(v)/sqrt(bc2) + eps (3), p -= lr/bc1 * m/denom (2) = 12; AdamW's decoupled weight
# decay p *= 1 - lr*wd adds 1 (counted as 2 with the product). SGD with momentum: buf = mu*buf + g
# (2), p -= lr*buf (2) = 4.
ADAM_OPS_PER_ELEMENT = 12
ADAMW_OPS_PER_ELEMENT = 14
SGD_MOMENTUM_OPS_PER_ELEMENT = 4

# ---------------------------------------------------------------- tables -------------------------
# Element-wise ops and their arithmetic operations per output element.
_ELEMENTWISE_OPS: dict[str, float] = {
    **dict.fromkeys(
        _words(
            "add sub rsub mul div neg abs relu relu6 clamp clamp_min clamp_max threshold "
            "maximum minimum where sign sgn reciprocal square exp exp2 log log2 log1p expm1 "
            "sqrt rsqrt sigmoid tanh pow sin cos floor ceil round trunc frac eq ne lt le gt "
            "ge logical_not logical_and logical_or bitwise_and bitwise_or bitwise_not __and__ "
            "__or__ __xor__ masked_fill remainder fmod hardsigmoid hardswish mish softplus "
            "erf"
        ),
        1.0,
    ),
    # backward element-wise: grad * f'(x), f' costing about as much as f
    **dict.fromkeys(
        _words("threshold_backward hardtanh_backward leaky_relu_backward native_dropout_backward"),
        1.0,
    ),
    "sigmoid_backward": 3.0,  # g * y * (1 - y)
    "tanh_backward": 3.0,  # g * (1 - y*y)
    "gelu": 8.0,  # x * 0.5 * (1 + erf(x / sqrt 2)): div, erf, add, mul, mul (+tanh approx terms)
    "gelu_backward": 10.0,
    "silu": 4.0,  # x * sigmoid(x): neg, exp, add, div-mul
    "silu_backward": 6.0,
    "elu": 4.0,
    "elu_backward": 3.0,
    "leaky_relu": 2.0,  # compare, select-multiply
    "hardtanh": 2.0,  # two compares
    "dropout": 2.0,  # mask compare, scale
    "native_dropout": 2.0,
    "bernoulli": 1.0,
}
_OPTIMIZER_ELEMENTWISE_OPS: dict[str, float] = {
    "addcdiv": 3.0,  # self + value * t1 / t2
    "addcmul": 3.0,  # self + value * t1 * t2
    "lerp": 3.0,  # self + w * (end - self)
}
_FILL_OPS = ("fill", "zero", "zeros_like", "ones_like", "full_like", "normal", "uniform")
_REDUCTION_OPS: dict[str, float] = {
    **dict.fromkeys(
        _words("sum mean amax amin max min argmax argmin prod any all count_nonzero nansum cumsum"),
        1.0,
    ),
    **dict.fromkeys(["norm", "linalg_vector_norm"], 2.0),  # square and add
    **dict.fromkeys(["var", "std", "var_mean", "std_mean"], 3.0),  # sub mean, square, add
    "logsumexp": 4.0,  # max, sub, exp, add
}
# Pooling reads every input element and does ~1 compare/add for it (kernel windows overlap little).
_POOL_OPS = _words(
    "max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices "
    "avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d "
    "_adaptive_avg_pool2d adaptive_max_pool2d mkldnn_max_pool2d "
    "max_pool2d_with_indices_backward avg_pool2d_backward adaptive_avg_pool2d_backward "
    "_adaptive_avg_pool2d_backward"
)
# Normalisation: batch/layer/group norm forward = mean (1) + variance (3) + (x-mean)*rstd (2) + affine
# (2) = 8 per element; backward, two reductions plus the element-wise chain = 12.
_NORM_OPS: dict[str, float] = {
    **dict.fromkeys(
        _words(
            "batch_norm native_batch_norm _batch_norm_impl_index cudnn_batch_norm "
            "miopen_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training "
            "layer_norm native_layer_norm group_norm native_group_norm instance_norm"
        ),
        8.0,
    ),
    **dict.fromkeys(
        _words(
            "native_batch_norm_backward cudnn_batch_norm_backward miopen_batch_norm_backward "
            "native_layer_norm_backward native_group_norm_backward"
        ),
        12.0,
    ),
}
# softmax: max, subtract, exp, sum, divide = 5; log_softmax: max, sub, exp, sum, (log), sub = 5;
# backward: g*y, row sum, subtract, multiply = 4.
_SOFTMAX_OPS: dict[str, float] = {
    **dict.fromkeys(["softmax", "_softmax", "log_softmax", "_log_softmax"], 5.0),
    **dict.fromkeys(["_softmax_backward_data", "_log_softmax_backward_data"], 4.0),
}
# (ops per element, position of the `reduction` argument). mse: sub, square, add-reduce = 3;
# l1: sub, abs, add = 3; smooth_l1/huber: sub, abs, compare, square-or-linear branch, add = 5;
# bce: log, log(1-x), two mul, add = 5; bce with logits adds the sigmoid = 7. Backward: grad of the
# pointwise part times the incoming grad = 3 (mse/l1), 4 (smooth_l1/huber/bce).
_LOSS_OPS: dict[str, tuple[float, int]] = {
    "mse_loss": (3.0, 2),
    "l1_loss": (3.0, 2),
    "smooth_l1_loss": (5.0, 2),
    "huber_loss": (5.0, 2),
    "binary_cross_entropy": (5.0, 3),
    "binary_cross_entropy_with_logits": (7.0, 4),
}
_LOSS_BACKWARD_OPS: dict[str, float] = {
    "mse_loss_backward": 3.0,
    "l1_loss_backward": 3.0,
    "smooth_l1_loss_backward": 4.0,
    "huber_loss_backward": 4.0,
    "binary_cross_entropy_backward": 4.0,
}
_COPY_OPS: dict[str, Formula] = {
    "copy": _copy_into_self,
    "_copy_from": _copy_into_self,
    "_copy_from_and_resize": _copy_into_self,
    **dict.fromkeys(
        _words("_to_copy clone contiguous flip roll _reshape_copy index_put masked_scatter"),
        _copy_same_size,
    ),
    "cat": _concat,
    "stack": _concat,
    "_cat": _concat,
    "embedding": _gather_rows,
    "gather": _gather,
}
_FOREACH_OPS: dict[str, Formula] = {
    **{
        f"_foreach_{op}": _foreach(1.0)
        for op in _words("add sub mul div sqrt neg abs exp reciprocal maximum minimum sign")
    },
    **{f"_foreach_{op}": _foreach(3.0) for op in ("addcdiv", "addcmul", "lerp")},
    **{f"_foreach_{op}": _foreach(0.0) for op in ("zero", "copy")},
    "_foreach_norm": _foreach(2.0),
    "_fused_adam": _foreach(ADAM_OPS_PER_ELEMENT, written_lists=(0, 2, 3)),
    "_fused_adamw": _foreach(ADAMW_OPS_PER_ELEMENT, written_lists=(0, 2, 3)),
    "_fused_sgd": _foreach(SGD_MOMENTUM_OPS_PER_ELEMENT, written_lists=(0, 2)),
}

_FORMULAS: dict[str, tuple[str, Formula]] = {
    "mm": ("gemm", _gemm(0, 1)),
    "addmm": ("gemm", _gemm(1, 2, bias_idx=0)),
    "_addmm_activation": ("gemm", _gemm(1, 2, bias_idx=0)),
    "bmm": ("gemm", _gemm(0, 1)),
    "baddbmm": ("gemm", _gemm(1, 2, bias_idx=0)),
    "matmul": ("gemm", _gemm(0, 1)),
    "mv": ("gemm", _gemm(0, 1)),
    "addmv": ("gemm", _gemm(1, 2, bias_idx=0)),
    "dot": ("gemm", _gemm(0, 1)),
    "linear": ("gemm", _linear),
    **{name: ("conv", _conv(name)) for name in _CONV_ARGS},
    "convolution_backward": ("conv", _conv_backward),
    "lstm_cell": ("rnn", _rnn_cell),
    "gru_cell": ("rnn", _rnn_cell),
    **{
        name: ("rnn", _rnn_sequence)
        for name in ("lstm", "gru", "rnn_tanh", "rnn_relu", "_cudnn_rnn")
    },
    "_thnn_fused_lstm_cell": ("rnn", _fused_rnn_cell),
    "_thnn_fused_gru_cell": ("rnn", _fused_rnn_cell),
    **{name: ("elementwise", _elementwise(k)) for name, k in _ELEMENTWISE_OPS.items()},
    **{name: ("optimizer", _elementwise(k)) for name, k in _OPTIMIZER_ELEMENTWISE_OPS.items()},
    **{name: ("elementwise", _fill) for name in _FILL_OPS},
    **{name: ("reduction", _reduction(k)) for name, k in _REDUCTION_OPS.items()},
    **{name: ("reduction", _per_input_element(1.0)) for name in _POOL_OPS},
    **{name: ("reduction", _per_input_element(k)) for name, k in _NORM_OPS.items()},
    **{name: ("softmax", _per_input_element(k)) for name, k in _SOFTMAX_OPS.items()},
    **{name: ("loss", _pointwise_loss(k, r)) for name, (k, r) in _LOSS_OPS.items()},
    **{name: ("loss", _pointwise_loss_backward(k)) for name, k in _LOSS_BACKWARD_OPS.items()},
    "nll_loss": ("loss", _nll_loss),
    "nll_loss_nd": ("loss", _nll_loss),
    "nll_loss_forward": ("loss", _nll_loss),
    "nll_loss2d_forward": ("loss", _nll_loss),
    "nll_loss_backward": ("loss", _nll_loss_backward),
    "nll_loss2d_backward": ("loss", _nll_loss_backward),
    "cross_entropy_loss": ("loss", _cross_entropy),
    **{name: ("copy", f) for name, f in _COPY_OPS.items()},
    **{name: ("optimizer", f) for name, f in _FOREACH_OPS.items()},
}

# Ops that only change metadata (views, allocation) and do no device work. CPU-only traces leave them
# out of ops.parquet; `aten::to`/`reshape`/`contiguous` are listed because when they do copy, the copy
# shows up as their child (_to_copy/copy_/clone), which is kept.
METADATA_OPS = frozenset(
    _words(
        "empty empty_like empty_strided new_empty new_empty_strided view view_as reshape "
        "_reshape_alias _unsafe_view as_strided as_strided_ t transpose transpose_ permute "
        "expand expand_as squeeze squeeze_ unsqueeze unsqueeze_ slice select narrow split "
        "split_with_sizes unbind chunk unsafe_split unsafe_chunk detach detach_ alias "
        "lift_fresh lift resize_ set_ flatten unflatten numpy_T contiguous to result_type "
        "resolve_conj resolve_neg broadcast_tensors _local_scalar_dense item is_nonzero size "
        "stride dim _nnz _has_compatible_shallow_copy_type record_stream zeros ones full "
        "scalar_tensor empty_like view_as_real view_as_complex real imag "
        "movedim moveaxis swapaxes diagonal indices values"
    )
)
METADATA_OPS = frozenset(name.rstrip("_") for name in METADATA_OPS)  # keys as op_key() makes them

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def op_key(name: str) -> str:
    """``aten::add_`` -> ``add``; ``ConvolutionBackward0`` -> ``convolution_backward``;
    ``autograd::engine::evaluate_function: MseLossBackward0`` -> ``mse_loss_backward``."""
    if ": " in name:
        name = name.rsplit(": ", 1)[1]
    base = name.rsplit("::", 1)[-1]
    if re.fullmatch(r"[A-Z][A-Za-z]*Backward\d*", base):
        base = _CAMEL_BOUNDARY.sub("_", re.sub(r"\d+$", "", base)).lower()
    if base.startswith("__") and base.endswith("__"):
        return base  # operators such as __and__ keep their dunder name
    return base.rstrip("_") if base.rstrip("_") else base


def is_metadata_op(name: str) -> bool:
    return op_key(name) in METADATA_OPS and "::" in name


def op_class(name: str) -> str:
    """The family an op (or an autograd node / backward op of it) belongs to."""
    key = op_key(name)
    if key in _FORMULAS:
        return _FORMULAS[key][0]
    if key.endswith("_backward"):
        forward = key[: -len("_backward")]
        if forward in _FORMULAS:
            return _FORMULAS[forward][0]
    if key.startswith(("_foreach_", "_fused_")):
        return "optimizer"
    if "conv" in key:
        return "conv"
    if "lstm" in key or "gru" in key or "rnn" in key:
        return "rnn"
    return "other"


def has_formula(name: str) -> bool:
    return op_key(name) in _FORMULAS


def op_cost(name: str, dims: Any, types: Any = None, concrete: Any = None) -> OpCost:
    """FLOPs and bytes of one recorded op call; falls back to input bytes when no formula applies."""
    args = parse_args(dims, types, concrete)
    klass = op_class(name)
    if args is None:
        return OpCost(klass, 0.0, 0.0, 0.0, False, "")
    entry = _FORMULAS.get(op_key(name))
    result = entry[1](args) if entry is not None else None
    if result is None:
        return OpCost(klass, 0.0, args.read_bytes(), 0.0, False, args.dtype)
    flops, read, written = result
    return OpCost(klass, float(flops), float(read), float(written), True, args.dtype)


# Checked in order: normalisation and softmax kernels often also contain "cudnn" or "reduce".
_KERNEL_NAME_CLASSES: tuple[tuple[str, str], ...] = (
    ("softmax", "softmax"),
    ("batch_norm", "reduction"),
    ("bn_", "reduction"),
    ("layer_norm", "reduction"),
    ("reduce", "reduction"),
    ("gemm", "gemm"),
    ("gemv", "gemm"),
    ("cutlass", "gemm"),
    ("cublas", "gemm"),
    ("cijk_", "gemm"),  # AMD Tensile / hipBLASLt GEMM kernels
    ("conv", "conv"),
    ("scudnn", "conv"),
    ("wgrad", "conv"),
    ("dgrad", "conv"),
    ("elementwise", "elementwise"),
    ("copy", "copy"),
    ("lstm", "rnn"),
    ("gru", "rnn"),
)
# Kernels that do the work of an op of a class; other kernels an op launches (bias copies, layout
# transforms) are helpers and get no share of its FLOPs.
MAIN_KERNEL_CLASSES: dict[str, frozenset[str]] = {
    "gemm": frozenset({"gemm"}),
    "conv": frozenset({"conv", "gemm"}),
}


def kernel_class(kernel_name: str) -> str:
    """Op class guessed from a kernel's name ("other" when nothing matches)."""
    lowered = kernel_name.lower()
    for needle, klass in _KERNEL_NAME_CLASSES:
        if needle in lowered:
            return klass
    return "other"
