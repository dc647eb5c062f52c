"""What a file with nothing to ingest holds instead, said in the one line that refuses it."""

from __future__ import annotations

import re
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
    ascend = _ascend_note(kt.path)
    if ascend:
        return ascend
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
    if len(kt.events):
        # read, but none an op or GPU activity: a window that caught only runtime calls or
        # annotations (rl-insight's VeRL rollout trace on an L20: one 10 s cudaMemGetInfo)
        cats = kt.events["cat"].astype(str).value_counts()
        listed = ", ".join(f"{n:,} '{c}'" for c, n in cats.items())
        names = list(dict.fromkeys(str(name)[:60] for name in kt.events["name"]))
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        return (
            f" (its only complete events are {listed} ({shown}): the profiling window recorded "
            "no op and no GPU activity)"
        )
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


# A file that Git LFS stores is checked out as a pointer until ``git lfs pull`` fetches it: three
# lines "version https://git-lfs.github.com/spec/v1", "oid sha256:<hex>", "size <bytes>"
# (git-lfs docs/spec.md). Trace repositories often keep large traces this way.
LFS_POINTER_PREFIX = "version https://git-lfs.github.com/spec/"
_LFS_SIZE = re.compile(r"^size (\d+)$", re.MULTILINE)


def lfs_pointer_message(text: str) -> str:
    """The refusal of a Git LFS pointer file (``text`` starts with LFS_POINTER_PREFIX)."""
    size = _LFS_SIZE.search(text[:1024])
    stored = f" of {int(size.group(1)):,} bytes" if size else ""
    return (
        f"a Git LFS pointer, not the trace: the file{stored} is stored in Git LFS; fetch it "
        "(git lfs pull) and pass the file itself"
    )


def extra_data_message(top: dict[str, Any], seen_events: bool) -> str:
    """The refusal of a file whose first JSON value (an object) is followed by more.

    Nsight Systems' ``nsys export --type jsonlines`` writes one JSON object per line, each a row
    naming its SQLite ``table`` (StringIds, NVTX_EVENTS, ANALYSIS_DETAILS, META_DATA_CAPTURE, as
    in verl-project/rl-insight's data/nvtx_data/nvtx_profile/worker_process_70000.1.jsonl); any
    other object per line is JSON Lines, one document per line rather than one trace."""
    if seen_events:
        return "not JSON (Extra data)"
    if isinstance(top.get("table"), str):
        return (
            "not a Kineto trace (an Nsight Systems export, nsys export --type jsonlines: one row "
            f"per line, the first of table {top['table']!r}; archsim reads torch.profiler "
            "(Kineto) traces, so profile the run with torch.profiler)"
        )
    return "not a Kineto trace (JSON Lines: one JSON object per line, not one trace document)"


# torch_npu's profiler labels an Ascend NPU's rows "NPU <n>" (process_labels metadata) in its
# ASCEND_PROFILER_OUTPUT/trace_view.json, a JSON array whose timestamps are decimal strings
# (verl-project/rl-insight data/mstx_data/.../trace_view.json: "Overlap Analysis", "NPU 0").
_ASCEND_LABEL = re.compile(r"NPU \d+")


def _ascend_note(path: Path) -> str:
    """ "an Ascend NPU trace ..." when a process of the file's first events is labelled "NPU <n>",
    read again only on the refusal's path; "" otherwise."""
    from archsim.trace.stream import iter_trace  # stream.py imports this module

    try:
        for index, event, _ in iter_trace(path, {}):
            if index >= _SCAN_EVENTS:
                break
            if not (isinstance(event, dict) and event.get("ph") == "M"):
                continue
            args = event.get("args")
            label = args.get("labels") if isinstance(args, dict) else None
            if (
                event.get("name") == "process_labels"
                and isinstance(label, str)
                and _ASCEND_LABEL.fullmatch(label)
            ):
                return (
                    f" (an Ascend NPU trace: a process labelled {label!r}, as torch_npu's "
                    "profiler writes ASCEND_PROFILER_OUTPUT/trace_view.json; archsim reads "
                    "torch.profiler (Kineto) traces of CUDA and ROCm GPUs and has no NPU model)"
                )
    except ArchsimError:
        return ""
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
