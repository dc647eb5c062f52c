"""The validation run (a notebook can call it): capture each workload's baseline trace, measure every
configuration on the real workloads, predict each from its baseline trace, and return the rows."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import tempfile
from pathlib import Path

from archsim.errors import ArchsimError
from archsim.validate.configs import Plan, RunConfig
from archsim.validate.load import load_between, snapshot
from archsim.validate.measure import Measurement, measure
from archsim.validate.report import add_calibrated_columns, signed_rel_error, spread
from archsim.validate.speed import reference_cpu_ms


def capture_baseline(workload: str, config: RunConfig, plan: Plan, out_dir: Path) -> object:
    """Profile one baseline run of ``workload`` into ``out_dir``; returns the Trace."""
    if workload == "dqn":
        from archsim.validate.measure import dqn_settings
        from workloads.dqn.capture import capture_dqn, default_schedule
        from workloads.dqn.settings import DqnConfig

        settings: DqnConfig = dqn_settings(config)
        base = default_schedule(settings)
        schedule = type(base)(
            skip_first=base.skip_first,
            wait=base.wait,
            warmup=base.warmup,
            active=base.active,
            repeat=plan.dqn_capture_repeat,
        )
        steps = base.skip_first + plan.dqn_capture_repeat * (base.wait + base.warmup + base.active)
        return capture_dqn(settings, steps, out_dir, schedule=schedule)
    from archsim.validate.measure import seed_settings
    from workloads.r2d2.capture import capture_r2d2

    return capture_r2d2(seed_settings(config, plan.r2d2_capture_s), out_dir)


def run_validation(plan: Plan, out_dir: Path, progress: bool = True) -> list[dict]:
    """Capture baselines into ``out_dir/traces``, measure every configuration (raw runs saved in
    ``out_dir/measurements.json``) and predict each."""
    from tqdm import tqdm

    from archsim.hw.presets import load_hw
    from archsim.validate.predict import predict

    hw = load_hw("local", [])
    # repeats interleaved (every configuration once, then again): load drift hits all of them
    rounds = max(plan.baseline_repeats, plan.variant_repeats)
    runs = [(c, i) for i in range(rounds) for c in plan.configs if i < _repeats(plan, c)]
    bar = tqdm(
        total=len(plan.baselines) + len(runs),
        desc="validate",
        unit="run",
        disable=None if progress else True,  # None: only when stderr is a terminal
    )
    traces, capture_speed, capture_load = {}, {}, {}
    for workload, config in plan.baselines.items():
        bar.set_postfix_str(f"capture {config.name}")
        before_ms = reference_cpu_ms()
        start = snapshot()
        traces[workload] = capture_baseline(
            workload, config, plan, out_dir / "traces" / config.name
        )
        capture_load[workload] = dataclasses.asdict(load_between(start, snapshot()))
        capture_speed[workload] = (before_ms + reference_cpu_ms()) / 2
        bar.update()
    measured: dict[str, list[Measurement]] = {}
    with tempfile.TemporaryDirectory(prefix="archsim-validate-") as tmp:
        for n, (config, repeat) in enumerate(runs):
            bar.set_postfix_str(f"run {config.name}" + (f" #{repeat + 1}" if repeat else ""))
            m = measure(config, plan.dqn_measure_steps, plan.r2d2_measure_s, Path(tmp) / str(n))
            measured.setdefault(config.name, []).append(m)
            bar.update()
    bar.close()
    save_measurements(out_dir / MEASUREMENTS_FILE, plan, measured, capture_speed, capture_load)
    rows = []
    for config in plan.configs:
        role = "baseline" if plan.baselines[config.workload] is config else "variant"
        rows.append(
            make_row(
                config, role, measured[config.name], predict(config, traces[config.workload], hw)
            )
        )
    add_baseline_columns(rows, traces, capture_speed, capture_load)
    return rows


def add_baseline_columns(
    rows: list[dict], traces: dict, capture_speed: dict, capture_load: dict | None = None
) -> None:
    """Diagnostics beside the headline error: the profiled baseline run's own frames/s (baseline
    rows); each prediction scaled by its baseline's measured / predicted ratio ("calibrated":
    what is left is the model's error in how frames/s CHANGES with the knobs); and each prediction
    scaled by the machine's speed during its runs over its speed during the baseline capture
    ("drift-corrected", archsim.validate.speed: what is left is the model's error, not the VM's);
    the machine's load during the baseline capture (archsim.validate.load, NaN when not read)."""
    from archsim.validate.capture_rate import capture_frames_per_s

    add_calibrated_columns(rows)
    for row in rows:
        row["capture_frames_per_s"] = (
            capture_frames_per_s(traces[row["workload"]], row["workload"])
            if row["role"] == "baseline"
            else math.nan
        )
        row["capture_speed_ref_ms"] = float(capture_speed.get(row["workload"], math.nan))
        load = (capture_load or {}).get(row["workload"], {})
        for key in ("other_busy_cpus", "steal_cpus", "loadavg_1min"):
            row[f"capture_{key}"] = float(load.get(key, math.nan))
        # slower reference = more ms: a capture at 1.2x the run's ms predicts 1.2x too few frames/s
        drift = row["capture_speed_ref_ms"] / row["speed_ref_ms"]
        row["drift_corrected_frames_error"] = signed_rel_error(
            row["predicted_frames_per_s"] * drift, row["measured_frames_per_s"]
        )


def _repeats(plan: Plan, config: RunConfig) -> int:
    if plan.baselines[config.workload] is config:
        return plan.baseline_repeats
    return plan.variant_repeats


def make_row(
    config: RunConfig, role: str, runs: list[Measurement], predicted: dict[str, float]
) -> dict:
    """One CSV row: the knobs, the mean of the measured runs, the prediction and the errors.

    Beside frames/s (wall clock), frames per CPU-second: the measured frames over the CPU seconds
    of the run's processes, and the predicted frames/s over the predicted busy CPU seconds per
    second. Time-sharing with other jobs slows a run's wall clock, not (much) its CPU per frame.
    """
    fps = [float(m.frames_per_s) for m in runs]
    hw_threads = os.cpu_count() or 1  # rebuilds cpu_s of measurements saved without it
    mean = {
        "frames_per_s": statistics.fmean(fps),
        "updates_per_s": statistics.fmean(float(m.learner_updates_per_s) for m in runs),
        "cpu_util": statistics.fmean(float(m.cpu_util) for m in runs),
        "frames_per_cpu_s": statistics.fmean(m.frames_per_cpu_s(hw_threads) for m in runs),
    }
    busy = predicted.get("cpu_busy_s_per_s", math.nan)
    predicted_per_cpu_s = predicted["frames_per_s"] / busy if busy > 0 else math.nan
    return {
        "config": config.name,
        "workload": config.workload,
        "role": role,
        "knobs": config.knobs(),
        "actors": config.actors,
        "envs_per_actor": config.envs_per_actor,
        "inference_batch": config.inference_batch,
        "learner_batch": config.learner_batch,
        "train_every": config.train_every,
        "replay_ratio": config.dqn_replay_ratio
        if config.workload == "dqn"
        else config.replay_ratio,
        "repeats": len(runs),
        "window_s": statistics.fmean(float(m.window_s) for m in runs),
        "loadavg_1min": statistics.fmean(float(m.loadavg_1min) for m in runs),
        "speed_ref_ms": statistics.fmean(float(m.speed_ref_ms) for m in runs),
        "measured_frames_per_s": mean["frames_per_s"],
        "frames_spread": spread(fps),
        "predicted_frames_per_s": predicted["frames_per_s"],
        "frames_error": signed_rel_error(predicted["frames_per_s"], mean["frames_per_s"]),
        "measured_updates_per_s": mean["updates_per_s"],
        "predicted_updates_per_s": predicted["learner_updates_per_s"],
        "updates_error": signed_rel_error(
            predicted["learner_updates_per_s"], mean["updates_per_s"]
        ),
        "measured_cpu_util": mean["cpu_util"],
        "predicted_cpu_util": predicted["cpu_util"],
        "cpu_util_error": signed_rel_error(predicted["cpu_util"], mean["cpu_util"]),
        "measured_cpu_s": statistics.fmean(
            m.cpu_s if math.isfinite(m.cpu_s) else m.cpu_util * m.window_s * hw_threads
            for m in runs
        ),
        "measured_frames_per_cpu_s": mean["frames_per_cpu_s"],
        "predicted_frames_per_cpu_s": predicted_per_cpu_s,
        "frames_per_cpu_s_error": signed_rel_error(predicted_per_cpu_s, mean["frames_per_cpu_s"]),
        "other_busy_cpus": statistics.fmean(float(m.other_busy_cpus) for m in runs),
        "steal_cpus": statistics.fmean(float(m.steal_cpus) for m in runs),
    }


MEASUREMENTS_FILE = "measurements.json"


def save_measurements(
    path: Path,
    plan: Plan,
    measured: dict[str, list[Measurement]],
    capture_speed: dict,
    capture_load: dict | None = None,
) -> None:
    """The raw runs, so that predictions can be redone (``repredict``) when the model changes."""
    doc = {
        "configs": [dataclasses.asdict(c) for c in plan.configs],
        "baselines": {w: c.name for w, c in plan.baselines.items()},
        "capture_speed_ref_ms": capture_speed,
        "capture_load": capture_load or {},
        "runs": {name: [dataclasses.asdict(m) for m in ms] for name, ms in measured.items()},
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")


def repredict(from_dir: Path) -> list[dict]:
    """Rows from an earlier run's traces and measurements, with today's model's predictions."""
    from archsim.hw.presets import load_hw
    from archsim.json_object import read_json_text
    from archsim.trace.format import load
    from archsim.validate.predict import predict

    path = Path(from_dir) / MEASUREMENTS_FILE
    if not path.exists():
        raise ArchsimError(
            f"{path}: not found (expected the output of an earlier archsim validate)"
        )
    try:  # the file as save_measurements writes it; anything else is one line, not a traceback
        doc = json.loads(read_json_text(path))  # bounded: not a 1 GB file read whole
        configs = [RunConfig(**c) for c in doc["configs"]]
        by_name = {c.name: c for c in configs}
        baselines = {w: by_name[name] for w, name in doc["baselines"].items()}
        measured = {c.name: [Measurement(**m) for m in doc["runs"][c.name]] for c in configs}
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:  # JSON, UTF-8
        raise ArchsimError(
            f"{path}: not the measurements of an earlier archsim validate "
            f"({exc.__class__.__name__}: {str(exc)[:80]})"
        ) from None
    traces = {w: load(Path(from_dir) / "traces" / c.name) for w, c in baselines.items()}
    hw = load_hw("local", [])
    rows = []
    for config in configs:
        runs = measured[config.name]
        role = "baseline" if baselines[config.workload] is config else "variant"
        rows.append(make_row(config, role, runs, predict(config, traces[config.workload], hw)))
    add_baseline_columns(
        rows, traces, doc.get("capture_speed_ref_ms", {}), doc.get("capture_load", {})
    )
    return rows
