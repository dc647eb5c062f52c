"""Op class of a GPU kernel guessed from its name (when its launching op says nothing)."""

from __future__ import annotations

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
