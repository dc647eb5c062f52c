"""Element-wise ops, fills, reductions, pooling, normalisation, softmax and losses: a fixed count
of arithmetic operations per element, worked out beside each table entry."""

from __future__ import annotations

import math

from archsim.trace.flops.args import Formula, OpArgs, Tensor, broadcast, is_ints, words


def _elementwise(ops_per_element: float) -> Formula:
    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        tensors = [v for v in args.values if isinstance(v, Tensor)]
        if not tensors:
            return None
        shape = broadcast(*(t.shape for t in tensors))
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
        if is_ints(dims) and dims and x.shape:
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


# Element-wise ops and their arithmetic operations per output element.
_ELEMENTWISE_OPS: dict[str, float] = {
    **dict.fromkeys(
        words(
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
        words("threshold_backward hardtanh_backward leaky_relu_backward native_dropout_backward"),
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
_FILL_OPS = ("fill", "zero", "zeros_like", "ones_like", "full_like", "normal", "uniform")
_REDUCTION_OPS: dict[str, float] = {
    **dict.fromkeys(
        words("sum mean amax amin max min argmax argmin prod any all count_nonzero nansum cumsum"),
        1.0,
    ),
    **dict.fromkeys(["norm", "linalg_vector_norm"], 2.0),  # square and add
    **dict.fromkeys(["var", "std", "var_mean", "std_mean"], 3.0),  # sub mean, square, add
    "logsumexp": 4.0,  # max, sub, exp, add
}
# Pooling reads every input element and does ~1 compare/add for it (kernel windows overlap little).
_POOL_OPS = words(
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
        words(
            "batch_norm native_batch_norm _batch_norm_impl_index cudnn_batch_norm "
            "miopen_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training "
            "group_norm native_group_norm instance_norm"
        ),
        8.0,
    ),
    **dict.fromkeys(
        words(
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

# Per row of the normalised dims: the mean's and variance's divisions by n, + eps, rsqrt (layer
# norm, 4); rms norm has no mean: mean-square division, + eps, rsqrt (3).
LAYER_NORM_OPS_PER_ROW = 4
RMS_NORM_OPS_PER_ROW = 3
STATS_ITEMSIZE = (
    4  # mean / rstd saved for backward are float32 (native_layer_norm, _fused_rms_norm)
)


def _rows(args: OpArgs, x: Tensor, weight_idx: int) -> int | None:
    """Rows being normalised: numel / prod(normalized_shape) (the weight has normalized_shape)."""
    w = args.tensor(weight_idx)
    shape = args.value(1)
    per_row = w.numel if w is not None else (math.prod(shape) if is_ints(shape) else None)
    return x.numel // per_row if per_row else None


def _layer_norm(saves_stats: bool) -> Formula:
    """layer_norm / native_layer_norm(input, normalized_shape, weight, bias, eps): per element the
    mean's add (1), the variance's subtract, square, add (3), (x - mean) * rstd (2), and the affine
    * weight (1) + bias (1) when given; per row LAYER_NORM_OPS_PER_ROW. Writes the output (and, for
    native_layer_norm, the float32 mean and rstd per row)."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x = args.tensor(0)
        if x is None:
            return None
        affine = (args.tensor(2) is not None) + (args.tensor(3) is not None)
        rows = _rows(args, x, 2) or 0
        flops = (6 + affine) * x.numel + LAYER_NORM_OPS_PER_ROW * rows
        written = x.nbytes + (2 * rows * STATS_ITEMSIZE if saves_stats else 0)
        return float(flops), args.read_bytes(), float(written)

    return formula


def _rms_norm(saves_stats: bool) -> Formula:
    """rms_norm / _fused_rms_norm(input, normalized_shape, weight, eps) (Zhang & Sennrich 2019,
    arXiv:1910.07467): per element square (1), add to the mean square (1), x * rstd (1) and * weight
    (1) when given; per row RMS_NORM_OPS_PER_ROW. Writes the output (and the float32 rstd)."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x = args.tensor(0)
        if x is None:
            return None
        rows = _rows(args, x, 2) or 0
        flops = (3 + (args.tensor(2) is not None)) * x.numel + RMS_NORM_OPS_PER_ROW * rows
        written = x.nbytes + (rows * STATS_ITEMSIZE if saves_stats else 0)
        return float(flops), args.read_bytes(), float(written)

    return formula


def _rms_norm_backward(args: OpArgs) -> tuple[float, float, float] | None:
    """_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    x_hat = x * rstd (1), w * g (1), their product (1) summed per row (1), x_hat * that mean (1),
    subtract (1), * rstd (1) = 7 per element for grad_input; g * x_hat (1) summed over rows (1) = 2
    for grad_weight. Writes grad_input (and grad_weight)."""
    x = args.tensor(1)
    if x is None:
        return None
    w = args.tensor(4)
    return 9.0 * x.numel, args.read_bytes(), float(x.nbytes + (w.nbytes if w else 0))


GROUP_NORM_OPS_PER_ELEMENT = _NORM_OPS["group_norm"]


def _aiter_group_norm(args: OpArgs) -> tuple[float, float, float] | None:
    """aiter's ``_groupnorm_run`` (github.com/ROCm/aiter, aiter/ops/groupnorm.py): ``(input,
    num_groups, weight, bias, eps) -> output``, or in later releases ``(y, workspace, input,
    num_groups, weight, bias, eps)`` writing into the caller's ``y``. Group norm's per-element
    arithmetic (GROUP_NORM_OPS_PER_ELEMENT); reads input, weight and bias, writes an output of the
    input's size (``torch.empty_like(input)``). The workspace's per-block partial sums
    (csrc/kernels/groupnorm.cu: two floats per workgroup) are a few KB and are left out here;
    archsim.trace.norm_traffic gives each of the op's two kernels its own traffic."""
    later = args.tensor(1) is not None  # the workspace tensor sits where num_groups was
    x, w, b = (args.tensor(i) for i in ((2, 4, 5) if later else (0, 2, 3)))
    if x is None:
        return None
    read = x.nbytes + (w.nbytes if w else 0) + (b.nbytes if b else 0)
    return GROUP_NORM_OPS_PER_ELEMENT * x.numel, float(read), float(x.nbytes)


FORMULAS: dict[str, tuple[str, Formula]] = {
    "_groupnorm_run": ("reduction", _aiter_group_norm),  # aiter::_groupnorm_run
    "layer_norm": ("reduction", _layer_norm(saves_stats=False)),
    "native_layer_norm": ("reduction", _layer_norm(saves_stats=True)),
    "rms_norm": ("reduction", _rms_norm(saves_stats=False)),
    "_fused_rms_norm": ("reduction", _rms_norm(saves_stats=True)),
    "_fused_rms_norm_backward": ("reduction", _rms_norm_backward),
    **{name: ("elementwise", _elementwise(k)) for name, k in _ELEMENTWISE_OPS.items()},
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
}
