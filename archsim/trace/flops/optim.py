"""Optimizer updates: foreach/fused kernels over parameter lists and the element-wise helpers
optimizers call (addcdiv, addcmul, lerp)."""

from __future__ import annotations

from collections.abc import Sequence

from archsim.trace.flops.args import Formula, OpArgs, words
from archsim.trace.flops.pointwise import _elementwise


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

_OPTIMIZER_ELEMENTWISE_OPS: dict[str, float] = {
    "addcdiv": 3.0,  # self + value * t1 / t2
    "addcmul": 3.0,  # self + value * t1 * t2
    "lerp": 3.0,  # self + w * (end - self)
}
_FOREACH_OPS: dict[str, Formula] = {
    **{
        f"_foreach_{op}": _foreach(1.0)
        for op in words("add sub mul div sqrt neg abs exp reciprocal maximum minimum sign")
    },
    **{f"_foreach_{op}": _foreach(3.0) for op in ("addcdiv", "addcmul", "lerp")},
    **{f"_foreach_{op}": _foreach(0.0) for op in ("zero", "copy")},
    "_foreach_norm": _foreach(2.0),
    "_fused_adam": _foreach(ADAM_OPS_PER_ELEMENT, written_lists=(0, 2, 3)),
    "_fused_adamw": _foreach(ADAMW_OPS_PER_ELEMENT, written_lists=(0, 2, 3)),
    "_fused_sgd": _foreach(SGD_MOMENTUM_OPS_PER_ELEMENT, written_lists=(0, 2)),
}

FORMULAS: dict[str, tuple[str, Formula]] = {
    **{name: ("optimizer", _elementwise(k)) for name, k in _OPTIMIZER_ELEMENTWISE_OPS.items()},
    **{name: ("optimizer", f) for name, f in _FOREACH_OPS.items()},
}
