"""What a file with nothing to ingest holds instead, said in the one line that refuses it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archsim.errors import ArchsimError

if TYPE_CHECKING:  # stream.py imports this module, and kineto.py imports stream.py
    from archsim.trace.kineto import KinetoTrace


def nothing_to_ingest_reason(kt: KinetoTrace) -> str:
    """A parenthesised reason: a TensorFlow/JAX trace, torch <= 1.7's export_chrome_trace ("X"
    events without "cat"), another tool's categories, or no complete events at all."""
    if is_xla_trace(kt.top):
        return (
            " (a TensorFlow/JAX profiler trace: its top-level 'metadata' has 'highres-ticks', as "
            "tsl's trace_events_to_json writes; archsim reads torch.profiler (Kineto) traces)"
        )
    if kt.uncategorized_events:
        return (
            f" ({kt.uncategorized_events} events without 'cat': this looks like the legacy "
            "pre-Kineto torch.autograd.profiler format; profile with torch.profiler instead)"
        )
    return _not_profiler_events(kt)


def _not_profiler_events(kt: KinetoTrace) -> str:
    """What a trace with nothing to ingest holds instead: the categories of its complete events
    (another tool's Chrome trace), or that none of its events is a complete or B/E span."""
    if kt.skipped_categories:
        top = sorted(kt.skipped_categories.items(), key=lambda kv: -kv[1])[:3]
        listed = ", ".join(f"'{c}' ({n:,})" for c, n in top)
        return f" (its complete events are of categories {listed})"
    if kt.n_events:
        return (
            f" (none of its {kt.n_events:,} events is a complete ('X') or 'B'/'E' span)"
            f"{_async_events_note(kt.path)}"
        )
    return " (traceEvents is empty)"


def is_xla_trace(top: dict[str, Any]) -> bool:
    """TensorFlow's and JAX's profiler (tsl/profiler/convert/trace_events_to_json.cc) writes
    ``"metadata": {"highres-ticks": true}`` beside its events, which name no Kineto category."""
    return isinstance(top.get("metadata"), dict) and "highres-ticks" in top["metadata"]


def no_events_reason(top: dict[str, Any]) -> str:
    """What a JSON object without 'traceEvents' holds instead, where it is a known file; "" else.

    PyTorch's execution trace (torch.profiler.ExecutionTraceObserver, the Chakra host trace,
    torch/csrc/profiler/standalone/execution_trace_observer.cpp) is a JSON object of a 'schema'
    string ("1.0.1", "1.1.1-chakra.0.0.4") and a 'nodes' list of ops with shapes but no times; it
    is recorded beside the Kineto trace, which is the one to ingest."""
    if isinstance(top.get("schema"), str) and isinstance(top.get("nodes"), list):
        nodes = len(top["nodes"])
        return (
            f"; a PyTorch execution trace (schema {top['schema']!r}, {nodes:,} "
            f"node{'' if nodes == 1 else 's'}, "
            "as torch.profiler.ExecutionTraceObserver writes): it has no times; ingest the "
            "torch.profiler trace recorded beside it (prof.export_chrome_trace)"
        )
    return ""


# NCCL's example profiler plugin (NVIDIA/nccl ext-profiler/example, print_event.cc) writes each
# NCCL operation as Chrome async events ("ph" "b"/"e") of these categories, in a JSON array.
_NCCL_PLUGIN_CATEGORIES = frozenset({"GROUP", "COLL", "P2P", "PROXY", "NET", "GROUP_API",
                                     "COLL_API", "P2P_API", "KERNEL_LAUNCH"})  # fmt: skip
_ASYNC_PHASES = frozenset({"b", "e", "n"})
_SCAN_EVENTS = 100_000  # enough to name a file's kind; the refusal never reads a huge file twice


def _async_events_note(path: Path) -> str:
    """ "; N are async 'b'/'e' events of categories ..." (and whose they are, for NCCL's profiler
    plugin), read again from the first events of the file, only on this refusal's path."""
    from archsim.trace.stream import iter_trace  # stream.py imports this module

    cats: Counter[str] = Counter()
    try:
        for index, event, _ in iter_trace(path, {}):
            if index >= _SCAN_EVENTS:
                break
            if isinstance(event, dict) and event.get("ph") in _ASYNC_PHASES:
                cats[str(event.get("cat", ""))] += 1
    except ArchsimError:
        return ""
    if not cats:
        return ""
    listed = ", ".join(f"'{c}' ({n:,})" for c, n in cats.most_common(3))
    note = f"; {sum(cats.values()):,} are async ('b'/'e') events of categories {listed}"
    if _NCCL_PLUGIN_CATEGORIES.intersection(cats) and set(cats) <= _NCCL_PLUGIN_CATEGORIES | {
        "GPU"
    }:
        note += (
            ": an NCCL profiler-plugin trace (NCCL_PROFILER_PLUGIN, ext-profiler/example), which "
            "times NCCL's own steps; torch.profiler records the NCCL kernels themselves"
        )
    return note
