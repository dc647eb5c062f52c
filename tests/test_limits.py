"""Bounded inputs (issue 11 item 9): every numeric knob and hardware field has a documented range
checked before any work, and one run's simulated work is bounded. Each input that used to exhaust
memory, run for days or print a traceback is one line, exit 2, nothing written, and the refusing
process stays small (its peak RSS is read from the kernel, never timed)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from archsim.errors import ArchsimError
from archsim.hw.limits import HW_RANGES
from archsim.hw.presets import list_presets, load_hw
from archsim.hw.schema import HardwareConfig
from archsim.sim.config import SimConfig
from archsim.sim.limits import (
    KNOB_RANGES,
    MAX_ENVIRONMENTS,
    MAX_RUN_CPU_S,
    check_jobs,
    check_simulated_work,
    simulated_steps_bound,
    step_cpu_us,
    usable_cpus,
)
from tests.conftest import PROJECT_ROOT
from tests.test_sim_support import machine, service_times

DQN_TRACE = PROJECT_ROOT / "traces" / "dqn-pong-cpu"
# A refused command imports archsim, pandas and the hardware schema and stops: well under this.
# (The inputs below took 4.3 GB and 12 GB before they were bounded.)
REFUSAL_RSS_LIMIT_KB = 1_000_000
LIMITS = "docs/LIMITS.md"
# archsim's main in a process that prints its own peak RSS as it exits. VmHWM, not getrusage's
# ru_maxrss: Linux carries the pre-exec high-water mark into ru_maxrss, so a child forked from a
# test runner that has grown to 1.7 GB reports 1.7 GB however little it uses itself; VmHWM belongs
# to the process's own address space, which exec replaces.
MEASURED_MAIN = """
import resource, sys
from archsim.cli import main

def peak_kb():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

try:
    code = main(sys.argv[1:])
finally:
    print(f"maxrss_kb={peak_kb()}")
sys.exit(code)
"""


def _numeric_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted paths of every int/float field (optional ones too) of a pydantic model tree."""
    found = []
    for name, field in model.model_fields.items():
        args = typing.get_args(field.annotation) or (field.annotation,)
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                found += _numeric_fields(arg, f"{prefix}{name}.")
            elif arg in (int, float):
                found.append(f"{prefix}{name}")
                break
    return found


def test_every_numeric_hardware_field_has_a_documented_range():
    fields = _numeric_fields(HardwareConfig)
    assert "cpu.sockets" in fields and "gpu.sms" in fields
    missing = [f for f in fields if f not in HW_RANGES]
    assert missing == [], f"add a range (with its source) to archsim.hw.limits for {missing}"
    assert sorted(HW_RANGES) == sorted(fields)  # and no range for a field that is gone


def test_every_numeric_knob_has_a_documented_range():
    # numbers by default, or None ("derive it"), which stands for a number; replay_ratio is a
    # number or a word ("trace", none)
    numeric = {"replay_ratio"}
    for field in dataclasses.fields(SimConfig):
        default = field.default
        if default is None or (isinstance(default, int | float) and not isinstance(default, bool)):
            numeric.add(field.name)
    assert sorted(numeric) == sorted(KNOB_RANGES)


@pytest.mark.parametrize("name", list_presets()[:-1])  # "local" is this machine
def test_every_preset_lies_within_the_ranges(name):
    load_hw(name)  # raises when a preset figure is outside its range


FLOAT_KNOBS = ("inference_timeout_us", "replay_ratio", "replay_slack_batches", "sim_seconds")


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_knob_inside_its_range_is_accepted_and_one_outside_is_refused_by_name(data):
    name = data.draw(st.sampled_from(sorted(KNOB_RANGES)))
    limits = KNOB_RANGES[name]
    # The most actors, so that any inference batch in range can fill (the batch defaults to 64);
    # 256 actors with many environments each, to stay within the environments of one run.
    base = {"actors": 256 if name == "envs_per_actor" else int(KNOB_RANGES["actors"].high)}
    # Beyond the actors, a batch could never fill: refused as such before its range is read.
    top = base["actors"] if name == "inference_batch" else 10**30
    if name in FLOAT_KNOBS:
        low = math.nextafter(limits.low, math.inf) if limits.low_open else limits.low
        inside = data.draw(st.floats(low, limits.high))
        outside = data.draw(st.floats(math.nextafter(limits.high, math.inf), 1e300))
    else:
        inside = data.draw(st.integers(int(limits.low), int(limits.high)))
        outside = data.draw(st.integers(int(limits.high) + 1, top))
    SimConfig(**{**base, name: inside})
    with pytest.raises(ArchsimError) as info:
        SimConfig(**{**base, name: outside})
    message = str(info.value)
    assert message.startswith("--" + name.replace("_", "-") + ":")
    assert "supported range" in message and "\n" not in message


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["--actors", "100000"], ["--actors: 100,000", "1..16,384", LIMITS]),
        (["--actors", "99999999999999999999999"], ["--actors: 999999...(23 digits)", LIMITS]),
        (["--set", "cpu.sockets=1000000000000"], ["cpu.sockets = 1,000,000,000,000", "1..32"]),
        (["--set", "cpu.sockets=1e23"], ["key cpu.sockets", "1e23"]),
        (["--set", "cpu.sockets=1.0e+23"], ["key cpu.sockets"]),
        (["--set", "cpu.cores_per_socket=10000000"], ["cpu.cores_per_socket", "1..512", LIMITS]),
        (["--sim-seconds", "1e9"], ["--sim-seconds: 1,000,000,000", "> 0..3,600", LIMITS]),
        (["--actors", "256", "--sim-seconds", "3600"], ["--sim-seconds: 3600 s of", LIMITS]),
        (["--sms", "100000"], ["key gpu.sms = 100,000", "1..1,024", LIMITS]),
        (["--actors", "16384", "--inference-batch", "4096"], ["--inference-batch: 4,096", LIMITS]),
    ],
)
def test_each_unbounded_input_of_the_issue_is_one_line_exit_2_and_small(tmp_path, argv, needles):
    out = tmp_path / "run"
    command = ["simulate", str(DQN_TRACE), "--hw", "dgx1-v100", *argv, "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURED_MAIN, *command],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("archsim: error: "), lines
    for needle in needles:
        assert needle in lines[0]
    assert list(tmp_path.iterdir()) == []
    peak_kb = int(done.stdout.split("maxrss_kb=")[1])  # Linux reports KB
    assert peak_kb < REFUSAL_RSS_LIMIT_KB


def test_simulated_steps_bound_worked_by_hand():
    # 8 actors of one 250 us env step each on 4 threads of speed 1: at most 4 steps at a time,
    # 4 / 250 us = 16,000 actor steps/s; the learner at most once per 1 ms GPU step = 1,000/s.
    times = service_times(actor_step_s=(200e-6, 300e-6), learner_gpu_s=1e-3, launch_s=50e-6)
    config = SimConfig(actors=8, inference_batch=8, sim_seconds=2.0, replay_ratio=None)
    assert simulated_steps_bound(times, machine(threads=4), config, 32) == pytest.approx(34_000)
    # Two envs per actor: each actor step is 500 us, 8,000/s on 4 threads.
    two = config.replace(envs_per_actor=2)
    assert simulated_steps_bound(times, machine(threads=4), two, 32) == pytest.approx(18_000)
    # Paced at 1 sample per insert, batches of 32: the learner at most 16,000 x 1 / 32 = 500/s.
    paced = config.replace(replay_ratio=1.0)
    assert simulated_steps_bound(times, machine(threads=4), paced, 32) == pytest.approx(33_000)
    # At 8 per insert the inserts would allow 4,000 learner steps/s: the GPU's 1,000/s bounds.
    eight = config.replace(replay_ratio=8.0)
    assert simulated_steps_bound(times, machine(threads=4), eight, 32) == pytest.approx(34_000)
    # Without a GPU the learner's CPU and "GPU" seconds add up on its thread: 1.05 ms a step.
    cpu = service_times(actor_step_s=(250e-6,), learner_gpu_s=1e-3, launch_s=50e-6, on_gpu=False)
    got = simulated_steps_bound(cpu, machine(threads=4), config, 32)
    assert got == pytest.approx(2.0 * (16_000 + 1 / 1.05e-3))


def test_more_simulated_work_than_the_bound_is_refused_with_the_seconds_that_fit():
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=1e-3)
    config = SimConfig(actors=64, inference_batch=64, sim_seconds=1000.0, replay_ratio=None)
    # 64 threads: 256,000 actor steps/s + 1,000 learner steps/s = 257,000/s x 1,000 s, each step
    # costing step_cpu_us(64) of simulator CPU.
    with pytest.raises(ArchsimError) as info:
        check_simulated_work(times, machine(threads=64), config, 32)
    fits = MAX_RUN_CPU_S / (step_cpu_us(64) * 1e-6) / 257_000
    assert f"use --sim-seconds {fits:.3g} or less" in str(info.value)
    check_simulated_work(times, machine(threads=64), config.replace(sim_seconds=fits * 0.999), 32)


def test_jobs_are_bounded_by_the_usable_cpus():
    check_jobs(usable_cpus())
    for jobs in (0, usable_cpus() + 1, 1000):
        with pytest.raises(ArchsimError, match="--jobs: "):
            check_jobs(jobs)


def test_sweep_with_a_thousand_jobs_is_one_line_before_anything_is_written(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "archsim", "sweep", str(trace_dir), "--actors", "4,8"]
        + ["--inference-batch", "4", "--jobs", "1000", "--no-progress", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("archsim: error: --jobs: 1,000 is outside the supported range")
    assert len(done.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_the_limits_page_shows_every_range_as_the_code_has_it():
    page = (PROJECT_ROOT / "docs" / "LIMITS.md").read_text()
    for name, limits in KNOB_RANGES.items():
        flag = "--" + name.replace("_", "-")
        assert f"| `{flag}` | {limits.text()} | {limits.why} |" in page, flag
    for key, limits in HW_RANGES.items():
        assert f"| `{key}` | {limits.text()} | {limits.why} |" in page, key
    assert f"{MAX_RUN_CPU_S:.0f} s of CPU" in page


def test_a_sweep_of_more_points_than_the_bound_is_refused_before_anything_is_written(
    trace_dir, tmp_path, capsys
):
    from archsim.cli import main
    from archsim.sim.limits import MAX_SWEEP_POINTS

    actors = ",".join(str(a) for a in range(1, 401))
    sms = ",".join(str(s) for s in range(1, 301))  # 400 x 300 = 120,000 points
    out = tmp_path / "sweep"
    argv = ["sweep", str(trace_dir), "--actors", actors, "--sms", sms, "--out", str(out)]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("archsim: error: sweep: the knob lists make 120,000 points")
    assert f"over the {MAX_SWEEP_POINTS:,}" in line
    assert list(tmp_path.iterdir()) == []


def test_actors_times_environments_is_bounded_where_each_alone_is_not():
    SimConfig(actors=256, envs_per_actor=1024, inference_batch=1024)  # 2^18: the most
    with pytest.raises(ArchsimError) as info:
        SimConfig(actors=257, envs_per_actor=1024, inference_batch=1024)
    assert str(info.value).startswith(
        f"--actors x --envs-per-actor: 263,168 environments are over the {MAX_ENVIRONMENTS:,}"
    )
