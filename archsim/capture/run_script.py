"""``archsim capture run -- [python] SCRIPT.py [ARGS...]`` (or ``-- -m MODULE``): capture any program.

The program runs in this process as ``python`` would run it (``sys.argv``, ``sys.path[0]``, ``__main__``
through runpy; archsim.capture.program, which also turns its ``os._exit`` into its end), with no
edits: archsim.capture.auto_markers marks its environment steps, forward and backward passes,
optimizer steps and replay buffers. The schedule counts steps from the first learner step on, with
an extra window at a role its windows missed (archsim.capture.role_schedule: an on-policy loop's
bursts), and the markers read the whole process's CPU clock (torch's intra-op threads included). At
the end the capture refuses, in one line, a trace without both actor and learner steps: ``simulate``
could do nothing with it; a program that trains only on another thread, only in worker processes,
or without torch.optim is named as such. Nothing is written to ``--out`` unless the capture
succeeds.

Worker processes the program starts (``multiprocessing``: gymnasium's AsyncVectorEnv, SB3's
SubprocVecEnv) capture themselves (archsim.capture.child_capture): each marks its env steps as actor
steps on its own pid and writes its own trace, which is merged with this process's as ``capture
r2d2`` merges its processes (archsim.capture.merge; meta.capture.processes lists them). ``simulate``
still runs such a trace as the program ran, ``--loop sequential`` by default
(archsim.trace.info.loop_of_steps): one loop whose env step lasts as long as the slowest worker's, the
workers stepping on their own cores (archsim.sim.vector_workers).
Emulator frames per env step (``meta.workload.frames_per_env_step``, and ``frames_per_env_step_source``
saying why) are what the env's wrapper chain says for sure (archsim.capture.frameskip), 1 otherwise;
with worker processes, what the workers' envs say.
meta.capture.schedule is the profiler's schedule, whose ``skip_first`` is one more than given (its
step 0 is the program's start).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from archsim.capture import run_checks
from archsim.errors import ArchsimError

SUMMARY = (
    "Run any Python RL program unmodified (-- [python] SCRIPT.py ARGS, or -- -m MODULE ARGS) and "
    "mark its loop; the schedule counts steps from its first update after it first acts on."
)
_PYTHON_NAMES = ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}")


@dataclasses.dataclass(frozen=True)
class Program:
    """What to run: a script path or a module name, and its arguments."""

    script: Path | None
    module: str | None
    args: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.script.stem if self.script is not None else str(self.module)

    def argv(self) -> list[str]:
        return [str(self.script) if self.script else f"-m {self.module}", *self.args]


def parse_program(words: list[str]) -> Program:
    """``[--] [python] SCRIPT.py ARGS`` or ``[--] [python] -m MODULE ARGS``; checks the target exists."""
    words = list(words)
    if words[:1] == ["--"]:
        words = words[1:]
    if words and (words[0] in _PYTHON_NAMES or words[0] == sys.executable):
        words = words[1:]
    if not words:
        raise ArchsimError(
            "capture run: expected a program after '--': [python] SCRIPT.py [ARGS...]"
        )
    if words[0] == "-m":
        if len(words) < 2:
            raise ArchsimError("capture run: '-m' needs a MODULE name")
        module = words[1]
        check_module(module)
        return Program(None, module, tuple(words[2:]))
    if words[0].startswith("-"):
        raise ArchsimError(
            f"capture run: unknown option {words[0]!r} before the program (options go before '--')"
        )
    script = Path(words[0])
    if not script.is_file():
        raise ArchsimError(f"capture run: script {str(script)!r} does not exist or is not a file")
    return Program(script, None, tuple(words[1:]))


def check_module(module: str, program: Program | None = None, what: str = "capture run") -> None:
    """One-line error unless ``module`` can be found from where the program will run (its script's
    folder, or the current directory for ``-m``), as ``python`` would look for it."""
    import importlib.util

    folder = str(program.script.resolve().parent) if program and program.script else os.getcwd()
    saved = list(sys.path)
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise ArchsimError(f"{what}: cannot find module {module!r} ({exc})") from None
    finally:
        sys.path[:] = saved
    if spec is None:
        raise ArchsimError(f"{what}: no module named {module!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from archsim.capture.phase_fn import PhaseFn

    def phase_fn(text: str) -> PhaseFn:
        try:
            return PhaseFn.parse(text)
        except ArchsimError as exc:
            raise argparse.ArgumentTypeError(
                str(exc).removeprefix(f"--phase-fn {text!r}: ")
            ) from None

    parser.add_argument(
        "--phase-fn",
        type=phase_fn,
        action="append",
        default=[],
        metavar="MODULE:QUALNAME=PHASE",
        help="also mark calls of this function as PHASE (repeatable; MODULE may be __main__), "
        "e.g. __main__:ReplayBuffer.sample=replay_sample",
    )
    parser.add_argument(
        "--stop-when-recorded",
        action="store_true",
        help="end the program at its first step after the schedule's last window is saved (an "
        "unbounded while-True loop, or a run of millions of steps); counts and pacing cover the "
        "steps it ran. Needs --repeat > 0",
    )
    parser.add_argument(
        "--device",
        default=None,
        help="profiler activities: cpu, or cuda to record GPU kernels too "
        "(default: cuda when torch sees a GPU)",
    )
    parser.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        metavar="-- [python] SCRIPT.py [ARGS...] | -- -m MODULE [ARGS...]",
    )


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_capture(args: argparse.Namespace) -> int:
    """Capture the program into ``args.out``."""
    from archsim.atomic import atomic_output_dir, check_output_dir
    from archsim.capture.session import DEFAULT_SCHEDULE, check_device
    from archsim.capture.workloads import schedule_from_args

    program = parse_program(args.program)
    for spec in args.phase_fn:
        if spec.module != "__main__":
            check_module(spec.module, program, f"--phase-fn {spec}")
    schedule = schedule_from_args(args, DEFAULT_SCHEDULE)
    stop = bool(getattr(args, "stop_when_recorded", False))
    if stop and not schedule.repeat:
        raise ArchsimError(
            "capture run: --stop-when-recorded needs --repeat N > 0 (--repeat 0 records until the "
            "program ends)"
        )
    device = check_device(args.device or _default_device())
    check_output_dir(args.out, args.force)
    interrupted: list[bool] = []
    try:
        with atomic_output_dir(args.out, args.force) as tmp_out:
            trace, counts = capture_program(
                program,
                tmp_out,
                schedule=schedule,
                device=device,
                phase_fns=tuple(args.phase_fn),
                stop_when_recorded=stop,
                interrupted=interrupted,
            )
            run_checks.check_recorded(trace, counts, schedule)
    except ArchsimError as exc:
        if not interrupted:
            raise
        raise ArchsimError(
            f"capture run: stopped by Ctrl-C with nothing to keep, so nothing was saved: "
            f"{str(exc).removeprefix('capture run: ')}"
        ) from None
    if counts.interrupted:
        return _report_interrupted(program, trace, counts, args.out)
    actor_steps = run_checks.actor_steps_run(trace, counts)
    print(
        f"captured {program.name}: {actor_steps} actor steps, {counts.learner_steps} learner "
        f"steps; trace in {args.out}"
    )
    if counts.ended_by_os_exit:
        end_as_os_exit()
    return 0


def _report_interrupted(program: Program, trace: Any, counts: Any, out: Path) -> int:
    """One line for a capture a Ctrl-C ended: the whole steps its windows kept. Exit status 130, as
    a shell reports a program ended by SIGINT."""
    steps = trace.steps
    whole = steps[steps["cpu_us"].notna()] if "cpu_us" in steps else steps
    roles = whole["role"].astype(str).value_counts()
    cut = len(steps) - len(whole)
    print(
        f"archsim: capture run: {program.name} stopped early by Ctrl-C after {counts.ticks} steps "
        f"from its first optimizer step; kept {len(whole)} recorded steps "
        f"({int(roles.get('actor', 0))} actor, {int(roles.get('learner', 0))} learner"
        + ("; the cut step dropped" if cut else "")
        + f"); trace in {out}",
        file=sys.stderr,
    )
    return 130


def end_as_os_exit() -> None:
    """The program ended with ``os._exit(0)`` (archsim.capture.program): its trace is saved; end
    this process the same way when threads it left running would keep Python's exit waiting."""
    import threading

    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def capture_program(
    program: Program,
    out_dir: Path,
    *,
    schedule: Any,  # a CaptureSchedule, in steps from the first learner step on
    device: str = "cpu",
    phase_fns: tuple[Any, ...] = (),
    stop_when_recorded: bool = False,
    interrupted: list[bool] | None = None,
) -> tuple[Any, Any]:
    """Run ``program`` marked and profiled; save the trace to ``out_dir``. Returns (trace, counts).
    ``stop_when_recorded``: end the program (archsim.capture.program.ProgramStopped) at the first
    step boundary after the schedule's last window has been saved. A Ctrl-C the program does not
    catch ends it (archsim.capture.interrupt): its open step is cut, the recorded windows are kept,
    ``counts.interrupted`` is set and True is appended to ``interrupted`` (so that a later error
    can say the capture was stopped)."""
    import tempfile

    from archsim.capture.auto_markers import active_marker, auto_markers
    from archsim.capture.bare_stretches import BareStretches, store_in_program_cost
    from archsim.capture.child_capture import Workers, note
    from archsim.capture.cpu_clock import process_cpu_time
    from archsim.capture.interrupt import Interrupts
    from archsim.capture.marker_cost import measure_marker_cost
    from archsim.capture.program import ProgramStopped, run_program, stop_at_next_line
    from archsim.capture.role_schedule import RoleSchedule
    from archsim.capture.session import capture
    from archsim.capture.worker_merge import merge_workers

    meta: dict[str, Any] = {"name": f"run:{program.name}", "settings": {"argv": program.argv()}}
    # The profiler's step 0 is the program's start up to the first learner step (no tick before it):
    # skipped, so that the user's schedule counts from the first learner step on.
    profiled = dataclasses.replace(schedule, skip_first=schedule.skip_first + 1)
    # the user's windows, and an extra one at a role they missed (a PPO's rollouts or bursts)
    roles = RoleSchedule(profiled, lambda: getattr(active_marker(), "next_role", None))
    interrupts = Interrupts()
    with tempfile.TemporaryDirectory(prefix="archsim-workers-") as folder:
        workers = Workers(Path(folder), profiled)
        with capture(
            out_dir,
            meta,
            schedule=profiled,
            device=device,
            force=True,
            torch_schedule=roles,
            time_gaps=True,
        ) as cap:

            def on_tick() -> None:
                # archsim's work, not the program's: AutoMarker leaves it out of the next gap
                with interrupts.held():  # a Ctrl-C in an export waits
                    cap.step()  # the profiler exports a window when it steps past its last step
                if stop_when_recorded and roles.finished():
                    if marker.counts.stopped_when_recorded:  # it caught the last one and went on
                        stop_at_next_line(program)
                    marker.counts.stopped_when_recorded = True
                    raise ProgramStopped()

            with process_cpu_time():  # the markers' own CPU per step, as the program will see it
                cap.capture_meta["marker_cpu_us"] = measure_marker_cost()
            # and on the program's own steps, once nothing is profiled any more
            bare = BareStretches(roles.finished)
            try:
                with (
                    process_cpu_time(),
                    auto_markers(on_tick, phase_fns, workers=workers, bare=bare) as marker,
                    interrupts.installed(),
                ):
                    cap._progress.note("until the first optimizer step")
                    try:
                        marker.counts.ended_by_os_exit = run_program(program)
                    except KeyboardInterrupt:  # not caught by the program: keep what was recorded
                        marker.cut()
                        marker.counts.interrupted = True
                        if interrupted is not None:
                            interrupted.append(True)
            finally:
                workers.stop_all()  # no worker outlives the program, whatever happened
            store_in_program_cost(cap.capture_meta, bare)
            if bare.bare_env_steps:
                note(
                    f"{bare.bare_env_steps} env steps after the last window ran unmarked, in "
                    "stretches between marked ones, to measure the markers' cost on the program's "
                    "own steps (meta.capture.marker_cost_in_program)"
                )
            counts = marker.counts
            roles.note_extra_windows()
            if counts.stopped_when_recorded:
                note(
                    f"stopped {program.name} at its step {counts.ticks} after its first optimizer "
                    "step: the schedule's windows are all recorded (--stop-when-recorded)"
                )
            worker_counts = workers.env_counts()  # actors in worker processes (mp.Process targets)
            if counts.learner_steps and not counts.optimizer_steps:  # none closed a learner step
                raise ArchsimError(
                    f"capture run: {program.name} ran {counts.learner_steps} training passes but no "
                    "torch.optim.Optimizer.step, so its training never started for the schedule; "
                    "mark its update function with --phase-fn MODULE:QUALNAME=optimizer_step"
                )
            run_checks.check_counts(program, counts, schedule, worker_counts)
            if not counts.env_steps and not (worker_counts or {}).get("env_steps", 0):
                note(
                    f"{program.name} stepped no gymnasium environment: its "
                    f"{counts.actor_steps} actor steps are counted by its acting forwards, not its "
                    "env steps (a random exploration step without one is not counted) and its "
                    "learner pacing is unknown; mark its env's step with "
                    "--phase-fn MODULE:QUALNAME=env_step"
                )
            _describe_workload(meta, counts, marker.env_batch, marker.frameskip, worker_counts)
        trace = merge_workers(cap.trace, workers, out_dir, program.name)
    return trace, counts


def _describe_workload(
    meta: dict[str, Any],
    counts: Any,
    env_batch: int | None,
    frameskip: Any,
    worker_counts: dict[str, int] | None = None,
) -> None:
    """Pacing that ingest and the simulator read from meta, measured over the whole run; frames per
    env step as the env's wrapper chain says (archsim.capture.frameskip). ``worker_counts``: the
    summed Counts of worker processes that stepped their own environments (actors that send the
    program's process their transitions): their transitions feed its learner too."""
    from archsim.capture.frameskip import set_frames

    workload = meta
    workload["settings"]["counts"] = dataclasses.asdict(counts)
    workload["settings"]["num_envs"] = env_batch or 1
    transitions = counts.transitions_training
    if not counts.transitions:  # the program's process stepped no env: its workers' did
        transitions += (worker_counts or {}).get("transitions_training", 0)
        if worker_counts:
            workload["settings"]["worker_counts"] = dict(worker_counts)
    if transitions:
        # learner samples per environment transition from the first optimizer step on (the replay
        # fill before it is not the steady state the recorded windows show; archsim.trace.pacing)
        workload["samples_per_insert"] = counts.samples_training / transitions
    set_frames(workload, frameskip)
