"""What a file with nothing to ingest holds instead, said in the one line that refuses it."""

from __future__ import annotations

from typing import Any

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
        return f" (none of its {kt.n_events:,} events is a complete ('X') or 'B'/'E' span)"
    return " (traceEvents is empty)"


def is_xla_trace(top: dict[str, Any]) -> bool:
    """TensorFlow's and JAX's profiler (tsl/profiler/convert/trace_events_to_json.cc) writes
    ``"metadata": {"highres-ticks": true}`` beside its events, which name no Kineto category."""
    return isinstance(top.get("metadata"), dict) and "highres-ticks" in top["metadata"]
