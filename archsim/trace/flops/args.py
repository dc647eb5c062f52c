"""Typed arguments of one recorded op call (torch.profiler ``record_shapes``: ``Input Dims``,
``Input type``, ``Concrete Inputs``) and the small helpers every formula module shares."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
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
    # The same element types as other compilers and tools spell them. Kineto writes the C++ type's
    # demangled name (caffe2::TypeMeta), so int64_t is "long int" under GCC but "long long" under
    # Clang (macOS: AdamM1909/unsloth_puzzels trace.json, nll_loss's target) and "__int64" under
    # MSVC; unsigned types are registered in c10/util/typeid.h. ROCm's fp8 types (MI300) are the
    # *fnuz variants (c10/util/Float8_e4m3fnuz.h); torch 2.7's MX types are one byte each (fp4
    # packs two values in its byte, c10/util/Float4_e2m1fn_x2.h). ScalarType names (c10/core/
    # ScalarType.h toString: "BFloat16", "Half", "Float") are what TraceLens's eval traces write.
    "long long": ("int64", 8),
    "__int64": ("int64", 8),
    "unsigned short": ("uint16", 2),
    "unsigned int": ("uint32", 4),
    "unsigned long": ("uint64", 8),
    "c10::Float8_e4m3fnuz": ("float8_e4m3fnuz", 1),
    "c10::Float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "c10::Float8_e8m0fnu": ("float8_e8m0fnu", 1),
    "c10::Float4_e2m1fn_x2": ("float4_e2m1fn_x2", 1),
    "BFloat16": ("bfloat16", 2),
    "Half": ("float16", 2),
    "Float": ("float32", 4),
}
DEFAULT_DTYPE = ("float32", 4)  # legacy traces without "Input type": assume fp32

OP_CLASSES = (
    "gemm",
    "conv",
    "attention",
    "elementwise",
    "reduction",
    "softmax",
    "loss",
    "copy",
    "optimizer",
    "rnn",
    "memcpy",
    "memset",
    "communication",
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
    # Output shape known from elsewhere in the trace (e.g. a 2021-era convolution's output, read from
    # its autograd node's grad_output), for ops whose own recorded arguments do not determine it.
    output_shape: tuple[int, ...] | None = None

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


def is_ints(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def _lists(value: Any) -> Any:
    """Tuples as lists, nested: a value written "(2,2)" reads like Kineto's "[2, 2]"."""
    return [_lists(v) for v in value] if isinstance(value, tuple | list) else value


def _parse_concrete(text: Any) -> Any:
    if not isinstance(text, str) or text == "":
        return None
    try:
        return _lists(ast.literal_eval(text))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def parse_args(dims: Any, types: Any, concrete: Any) -> OpArgs | None:
    """Combine the three parallel lists of a recorded op into typed arguments (None if no shapes)."""
    if not isinstance(dims, list):
        return None
    types = types if isinstance(types, list) else [None] * len(dims)
    concrete = concrete if isinstance(concrete, list) else [None] * len(dims)
    # Kineto writes one entry per argument in each list ([] and "" where none applies). Some tools
    # list only the tensors in "Input Dims" and every argument in "Concrete Inputs" (AMD-AGI/
    # TraceLens evals/unit_tests/conv/*.json: 2 dims, 9 concrete inputs, stride at position 3):
    # the positions past the dims are the non-tensor arguments.
    if len(concrete) > len(dims):
        dims = [*dims, *([None] * (len(concrete) - len(dims)))]
    values: list[Any] = []
    op_dtype: tuple[str, int] | None = None
    for i, d in enumerate(dims):
        typ = types[i] if i < len(types) else None
        known = TENSOR_TYPES.get(typ) if isinstance(typ, str) else None
        if typ == "TensorList" or (
            isinstance(d, list) and d and all(isinstance(x, list) for x in d)
        ):
            dt = op_dtype or DEFAULT_DTYPE
            values.append([Tensor(tuple(s), dt[0], dt[1]) for s in d if is_ints(s)])
        elif known is not None or (typ is None and is_ints(d) and d):
            dt = known or DEFAULT_DTYPE
            op_dtype = op_dtype or dt
            values.append(Tensor(tuple(d) if is_ints(d) else (), dt[0], dt[1]))
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


# PyTorch's cat kernel copies elements as OpaqueType<N> (N = the element size in bytes,
# aten/src/ATen/native/cuda/Shape.cu: CatArrayBatchedCopy<OpaqueType<sizeof(scalar_t)>, ...>).
_CAT_ELEMENT = re.compile(r"CatArrayBatchedCopy\w*<[^,]*OpaqueType<(\d+)u?>")


def untyped_list_element_bytes(op_args: dict, kernel_names: list[str]) -> float | None:
    """Bytes per element of an op whose only tensors are lists (``aten::cat``'s inputs are recorded
    as "TensorList", with no dtype, so its formula priced them at the fp32 default) when its
    kernels' names carry the element size; None where the op recorded a tensor dtype or the
    kernels do not say."""
    types = op_args.get("Input type") if isinstance(op_args, dict) else None
    if not isinstance(types, list) or "TensorList" not in types:
        return None
    if any(isinstance(t, str) and t in TENSOR_TYPES for t in types):
        return None
    sizes = {int(m.group(1)) for n in kernel_names if (m := _CAT_ELEMENT.search(str(n)))}
    return float(sizes.pop()) if len(sizes) == 1 else None


def words(text: str) -> tuple[str, ...]:
    """A table of op names written as one space-separated string (keeps the tables short)."""
    return tuple(text.split())


Formula = Callable[[OpArgs], tuple[float, float, float] | None]  # (flops, read, written)


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(ndim):
        sizes = {s[len(s) - ndim + axis] for s in shapes if len(s) - ndim + axis >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
