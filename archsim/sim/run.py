"""Run the system simulator: ``simulate(trace, hw, config) -> SimResult`` (the entry for notebooks
and the CLI) and ``simulate_system`` on already-resolved service times (the entry for tests).

Which path runs: ``engine="simpy"`` is the plain model (a simpy Resource per hardware thread, a
process per actor, a Store of requests). ``engine="fast"`` (and ``"auto"``) computes the same model
with closed forms: hardware threads as Lindley recursions, central-inference actors advanced a batch
at a time, and local-inference actors that own their thread and are never throttled as one cumsum;
the learner process's GIL on its own event loop (archsim.sim.fast_gil). ``cpu_sched="shared"`` (OS
time-sharing, archsim.sim.shared_cpu): a burst's end depends on later arrivals, so the Lindley closed
forms do not apply; the fast engine drives central-inference actors by callbacks on the
processor-sharing CPU (archsim.sim.vector_shared, path "shared_fast") with the GIL of
archsim.sim.shared_gil, else a process per actor (path "shared"). docs/SIMULATOR.md "Engines" says
where each is exact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from archsim.errors import ArchsimError
from archsim.perf.cpu import ThreadLayout, smt_speeds
from archsim.sim.assemble import build_run
from archsim.sim.config import SimConfig
from archsim.sim.limits import check_simulated_work
from archsim.sim.metrics import Recorder, add_cpu_power, power_series, summarize
from archsim.sim.nodes import node_layout
from archsim.sim.placement import choose_placement
from archsim.sim.power_cap import ClockCaps, run_clock_caps, within_tdp
from archsim.sim.replay_power import (
    learner_replay_cores,
    replay_host_power_w,
    replay_host_sockets,
    sockets_power_added_w,
)
from archsim.sim.replay_server import (
    check_network_knobs,
    network_in_use,
    no_network_metrics,
)
from archsim.sim.system import Machine, ServiceTimes


@dataclass
class SimResult:
    """Metrics of one run (named as the sweep CSV columns) plus what produced them."""

    metrics: dict[str, float]
    config: SimConfig
    engine: str  # the path that ran: "simpy", "fast" or "closed_form"
    events: int  # simpy events processed
    # archsim.sim.timeline.Timeline: (label, track, start s, duration s, args) slices, flows,
    # counters; the sequential loop gives a plain list of (label, track, start s, duration s)
    timeline: list | None = None
    power_series: tuple[np.ndarray, np.ndarray] | None = None  # (bin start s, power W)
    notes: tuple[str, ...] = ()  # one-line notes for the user (e.g. an unpaced default learner)
    # per-link and per-component detail of the replay's network (archsim.sim.replay_server), for
    # metrics.json's nested "network" key; None when no message crosses a network
    network: dict | None = None
    # --engine steady: the window reported and the doublings before it (archsim.sim.steady)
    steady: object | None = None
    # how far the clocks must fall for the run's mean power to be within TDP (archsim.sim.power_cap)
    clock_caps: ClockCaps = ClockCaps()
    # the HardwareConfig the run ran at: the asked one, or its clocks lowered by the power cap
    # (archsim.sim.power_cap.within_tdp; sweeps report its clocks); None from simulate_system
    hw_run: object | None = None


# SMT calibration: short runs that measure each hardware thread's busy fraction, from which the
# next run's SMT speeds follow (archsim.perf.cpu.smt_speeds). Two passes from the static bound settle
# the fixed point to well under a percent on the presets; each covers a tenth of the window.
SMT_CALIBRATION_PASSES = 2
SMT_CALIBRATION_FRACTION = 0.1


def simulate_system(
    times: ServiceTimes,
    machine: Machine,
    config: SimConfig,
    learner_batch: int,
    timeline: bool = False,
    series_bins: int = 0,
    network=None,
    traffic=None,
) -> SimResult:
    """Simulate ``config.sim_seconds`` of the system and summarise it. ``network`` (the hardware
    config's NetworkConfig) and ``traffic`` (archsim.sim.replay_traffic.ReplayTraffic) are needed
    when replay traffic crosses a network (``--nodes`` > 1 or a remote ``--replay-placement``).
    ``engine="steady"`` reports the shortest doubling window that shows the steady state
    (archsim.sim.steady)."""
    if config.engine == "steady":
        from archsim.sim.steady import simulate_steady

        return simulate_steady(
            times, machine, config, learner_batch, timeline, series_bins, network, traffic
        )
    layout, net_setup = prepare_layout(times, machine, config, learner_batch, network, traffic)
    rec, engine, events = _run(
        times, layout, machine, config, learner_batch, timeline, series_bins, net_setup
    )
    result = summarize_run(rec, layout, machine, config, learner_batch, net_setup, engine, events)
    result.notes = (*result.notes, *filter(None, [layout.note]))
    return result


def prepare_layout(
    times: ServiceTimes,
    machine: Machine,
    config: SimConfig,
    learner_batch: int,
    network=None,
    traffic=None,
    calibrate: bool = True,
    rank: Callable | None = None,
) -> tuple[ThreadLayout, tuple | None]:
    """Check the run, place its threads (on nodes when a network is in use) and, for SMT siblings
    under the "busy" model (``calibrates_smt``), calibrate their speeds on short runs unless
    ``calibrate`` is False (archsim.sim.steady calibrates on its own windows): (layout, setup).
    ``rank(layout, config) -> Recorder`` ranks the actors' placements (default: a run of
    ``config``; archsim.sim.steady ranks on its own runs extrapolated to the asked length)."""
    times.check(config)
    check_simulated_work(times, machine, config, learner_batch)  # bounded run time (LIMITS.md)
    hw_threads = machine.hw_threads
    if config.cpu_threads is not None:
        if config.cpu_threads > machine.hw_threads:
            raise ArchsimError(
                f"--cpu-threads: {config.cpu_threads} is more than the {machine.hw_threads} "
                "hardware threads of the hardware config"
            )
        hw_threads = config.cpu_threads
    net_setup = None

    def settle(layout: ThreadLayout) -> ThreadLayout:
        """``layout`` with its SMT siblings' calibrated speeds (when they are calibrated)."""
        if not (calibrate and calibrates_smt(layout, machine, config)):
            return layout
        short = config.replace(sim_seconds=config.sim_seconds * SMT_CALIBRATION_FRACTION)
        for _ in range(SMT_CALIBRATION_PASSES):
            rec, _, _ = _run(times, layout, machine, short, learner_batch, False, 0, net_setup)
            busy = rec.cpu_busy_s / short.sim_seconds
            layout = smt_speeds(layout, busy, machine.thread_speed_rel, machine.smt_yield)
        return layout

    if network_in_use(config):
        layout, net_setup = node_layout(config, machine, hw_threads, network, traffic)
        return settle(layout), net_setup
    # the actors' threads: the best of a few placements, each ranked at its settled SMT speeds
    # (archsim.sim.placement)
    layout = choose_placement(
        machine,
        config,
        hw_threads,
        rank or (lambda lay, short: _run(times, lay, machine, short, learner_batch, False, 0)[0]),
        settle,
    )
    return layout, net_setup


def calibrates_smt(layout: ThreadLayout, machine: Machine, config: SimConfig) -> bool:
    """True when SMT siblings' speeds follow their measured busy fractions (pinned, "busy")."""
    return (
        config.cpu_sched != "shared"
        and config.smt_model == "busy"
        and bool(layout.shared.any())
        and machine.smt_yield < 1
    )


def summarize_run(
    rec: Recorder,
    layout: ThreadLayout,
    machine: Machine,
    config: SimConfig,
    learner_batch: int,
    net_setup: tuple | None,
    engine: str,
    events: int,
) -> SimResult:
    """The SimResult of a recorded run: metrics over ``rec.end``, power series when recorded."""
    socket_of_thread = layout.socket_of_thread()
    # every actor node has the hardware config's sockets (archsim.sim.nodes numbers them node by node)
    power = machine.power
    if net_setup is not None:
        power = dataclasses.replace(power, sockets=layout.sockets)
    threads_per_socket = np.bincount(socket_of_thread, minlength=layout.sockets)
    # a hardware thread beyond the first ``layout.cores`` is its core's second (SMT) thread
    smt_sibling = np.arange(layout.hw_threads) >= layout.cores
    metrics = summarize(rec, power, socket_of_thread, threads_per_socket, smt_sibling)
    # Learner samples per inserted transition (each env step inserts one), over the window: the
    # replay ratio the run achieved, in the unit of the learner batch (R2D2: sequences). A mean
    # over the whole window: the rate limiter's slack lets the actors insert ahead of the learner
    # once at the start, so a short paced run reads below the asked ratio (docs/SIMULATOR.md Pacing).
    env_steps_per_s = metrics["env_steps_per_s"]
    metrics["samples_per_insert"] = (
        metrics["learner_updates_per_s"] * learner_batch / env_steps_per_s
        if env_steps_per_s > 0
        else 0.0
    )
    detail = None
    replay_w = 0.0
    replay_cores = None
    if net_setup is not None:
        flat, detail = rec.replay_network.summary()
        metrics.update(flat)
        # a replay in the learner process: a busy core of the learner's socket on node 0, counted
        # in that socket's power within its TDP (archsim.sim.replay_power)
        learner_socket = int(socket_of_thread[layout.placement[0]])
        replay_cores = learner_replay_cores(
            power, config, learner_socket, flat["replay_server_util"]
        )
        if replay_cores is not None:
            replay_w = sockets_power_added_w(
                power, rec.cpu_busy_s / rec.end, socket_of_thread, smt_sibling, replay_cores
            )
        else:  # the replay's host, which no node's sockets hold
            replay_w = replay_host_power_w(
                machine.power, config, net_setup[0], flat["replay_server_util"]
            )
            host_sockets = replay_host_sockets(machine.power, config, net_setup[0])
            cap_w = (power.sockets + host_sockets) * power.cpu_max_w  # each socket within TDP
            replay_w = max(0.0, min(replay_w, cap_w - metrics["cpu_power_w"]))
        add_cpu_power(metrics, replay_w, rec.end)
    else:
        metrics.update(no_network_metrics())
    series = None
    if rec.series_bins:
        series = power_series(rec, power, socket_of_thread, threads_per_socket, smt_sibling)
        if replay_w > 0:  # its window mean in every bin: the integral is still the energy
            series = (series[0], series[1] + replay_w)
            if rec.timeline is not None and rec.timeline.power is not None:
                starts, cpu_w, gpu_w = rec.timeline.power
                rec.timeline.power = (starts, cpu_w + replay_w, gpu_w)
    return SimResult(
        metrics=metrics,
        config=config,
        engine=engine,
        events=events,
        timeline=rec.timeline,
        power_series=series,
        network=detail,
        clock_caps=run_clock_caps(rec, power, socket_of_thread, smt_sibling, replay_cores),
    )


def _run(
    times: ServiceTimes,
    layout: ThreadLayout,
    machine: Machine,
    config: SimConfig,
    learner_batch: int,
    timeline: bool,
    series_bins: int,
    net_setup: tuple | None = None,
) -> tuple[Recorder, str, int]:
    """One simulation of ``config.sim_seconds`` with fixed thread speeds: (recorder, path, events)."""
    built = build_run(
        times, layout, machine, config, learner_batch, timeline, series_bins, net_setup
    )
    built.env.run(until=config.sim_seconds)
    built.threads.flush()
    return built.rec, built.path, _events_processed(built.env)


def _events_processed(env: simpy.Environment) -> int:
    """Events simpy scheduled (it numbers each one with an itertools.count)."""
    return int(env._eid.__reduce__()[1][0])


def simulate(
    trace,
    hw,
    config: SimConfig,
    timeline: bool = False,
    series_bins: int = 0,
    service_times=None,
) -> SimResult:
    """Simulate ``trace``'s workload on ``hw`` (a HardwareConfig) with the knobs of ``config``.
    ``service_times``: a stand-in for ``derive_service_times`` with its signature (sweeps pass a
    memoized one: archsim.analysis.sweep_cache), so many points reuse one derivation. A what-if
    whose clocks draw more than TDP runs at the clocks that hold it to TDP (archsim.sim.power_cap;
    the memo is keyed by the asked hardware, so those runs derive their own service times)."""
    result = _simulate_at(trace, hw, config, timeline, series_bins, service_times)
    return within_tdp(
        result, hw, lambda capped: _simulate_at(trace, capped, config, timeline, series_bins)
    )


def _simulate_at(
    trace,
    hw,
    config: SimConfig,
    timeline: bool = False,
    series_bins: int = 0,
    service_times=None,
) -> SimResult:
    """simulate at ``hw``'s clocks as given."""
    from archsim.sim.pacing import resolve_pacing
    from archsim.sim.recorded import recorded_inference_batch_mean
    from archsim.sim.workload import derive_machine, derive_service_times, trace_learner_batch

    if config.learner_batch is not None and (trace.meta.get("ingest") or {}).get("inferred_steps"):
        # an inferred step's batch is the schema's fill value (1): resizing from it is fiction
        raise ArchsimError(
            "--learner-batch: the trace's steps were inferred by ingest (no archsim markers), so "
            "the batch its ops were captured at is unknown; capture with archsim to resize batches"
        )
    from archsim.perf.bf16 import emulated_bf16_note
    from archsim.perf.fp8 import fp8_port_note
    from archsim.sim.learner import publish_every_note
    from archsim.trace.learner_batch import learner_batch_flag_note

    asked = config.learner_batch  # None: the trace's own (a default 1 for some on-policy captures)
    caveats = [
        emulated_bf16_note(trace.ops, hw),
        fp8_port_note(trace.ops, hw),
        learner_batch_flag_note(trace, asked),
        publish_every_note(config),
    ]
    learner_batch = config.learner_batch or trace_learner_batch(trace)
    if config.learner_batch is None:
        config = config.replace(learner_batch=learner_batch)
    unpaced_asked = config.replay_ratio is None  # --replay-ratio none, not a trace that is silent
    config, notes = resolve_pacing(trace, config)
    notes = (*notes, *filter(None, caveats))
    if config.loop != "distributed":  # sequential, or "trace": the trace's own loop if it is one
        from archsim.sim.sequential import resolve_loop, simulate_sequential

        config = resolve_loop(trace, config)
        if config.loop == "sequential" and unpaced_asked:
            raise ArchsimError(
                "--replay-ratio none: the single loop (--loop sequential) trains every few env "
                "steps as the program did, so it cannot run unpaced; give a ratio, or --loop "
                "distributed (or --actors N) for an unpaced actor/learner system"
            )
        if config.loop == "sequential":
            result = simulate_sequential(trace, hw, config, learner_batch, timeline, series_bins)
            result.notes = notes
            return result
    machine = derive_machine(hw, config)
    times = (service_times or derive_service_times)(trace, hw, config, learner_batch)
    traffic = None
    if network_in_use(config):
        from archsim.sim.replay_traffic import check_in_network_capacity, trace_replay_traffic

        check_network_knobs(config, hw.network)
        traffic = trace_replay_traffic(trace, config)
        check_in_network_capacity(trace, config, hw.network)
    result = simulate_system(
        times,
        machine,
        config,
        learner_batch,
        timeline,
        series_bins,
        network=hw.network,
        traffic=traffic,
    )
    result.notes = (*notes, *result.notes)
    env_steps_per_s = result.metrics["env_steps_per_s"]  # issue 15: beside frames/s, both loops
    result.metrics["seconds_per_1000_steps"] = (
        1000.0 / env_steps_per_s if env_steps_per_s > 0 else float("inf")
    )
    recorded_mean = recorded_inference_batch_mean(trace)
    if recorded_mean is not None:  # next to the simulated inference_batch_mean
        result.metrics["recorded_inference_batch_mean"] = recorded_mean
    return result
