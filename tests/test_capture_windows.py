"""Joining profiler windows into one Kineto JSON, and the machine description in trace meta."""

from __future__ import annotations

import gzip
import json

from archsim.capture.kineto_merge import merge_windows
from archsim.capture.machine import cpu_description


def _window(path, base_ns, ts_us, name):
    path.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "baseTimeNanoseconds": base_ns,
                "traceEvents": [
                    {
                        "ph": "M",
                        "name": "process_name",
                        "pid": 7,
                        "tid": 0,
                        "args": {"name": "python"},
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": name,
                        "pid": 7,
                        "tid": 7,
                        "ts": ts_us,
                        "dur": 2.0,
                    },
                ],
            }
        )
    )
    return path


def test_windows_are_concatenated_on_the_first_time_base(tmp_path):
    first = _window(tmp_path / "w0.json", 1_000_000_000, 10.0, "aten::mm")
    # second window's base is 3 ms later: its ts 5.0 us becomes 3,000 + 5 = 3,005 us on the first base
    second = _window(tmp_path / "w1.json", 1_003_000_000, 5.0, "aten::add")
    summary = merge_windows([first, second], tmp_path / "raw.json.gz")
    with gzip.open(tmp_path / "raw.json.gz", "rt") as handle:
        merged = json.load(handle)
    assert summary == {"windows": 2, "events": 3}  # the repeated process_name is kept once
    assert merged["baseTimeNanoseconds"] == 1_000_000_000
    ops = {e["name"]: e["ts"] for e in merged["traceEvents"] if e["ph"] == "X"}
    assert ops == {"aten::mm": 10.0, "aten::add": 3005.0}


CPUINFO_2S_2C_2T = "\n\n".join(
    f"processor\t: {i}\nmodel name\t: Test CPU 9000\nphysical id\t: {i // 4}\n"
    f"core id\t: {(i // 2) % 2}\ncpu MHz\t\t: {2000 + i}.0"
    for i in range(8)
)


def test_cpu_description_counts_cores_and_threads():
    # 2 sockets x 2 cores x 2 threads: 8 processors, 4 distinct (physical id, core id) pairs
    assert cpu_description(CPUINFO_2S_2C_2T) == {
        "cpu_model": "Test CPU 9000",
        "cpu_cores": 4,
        "cpu_threads": 8,
        "cpu_freq_mhz": 2007.0,
    }
