"""Mark an unmodified RL program: patch the library calls every loop makes into archsim steps/phases.

``archsim capture run`` cannot edit the program, so it wraps what any PyTorch RL loop calls:

* gymnasium ``Env.step`` / ``VectorEnv.step`` and Stable-Baselines3 ``VecEnv.step`` (every subclass,
  also those the program defines later, through ``__init_subclass__``): ``env_step`` of an actor step;
  ``reset`` inside an open actor step too;
* ``nn.Module.__call__`` (outermost module only): ``act`` when no learner step is open and the input's
  batch is the environment's (``num_envs``, 1 for a single env), else ``train_forward``. The batch
  rather than grad mode decides because popular loops act with grad on (CleanRL's DQN) and compute
  their TD target under ``no_grad``; grad mode decides only before any environment was seen. A
  module whose grad-on forward at the environment's batch was last followed by a backward rather
  than an env step trains at that batch (a PPO whose minibatch equals ``num_envs``): its next such
  forward is ``train_forward``;
* ``Tensor.backward`` / ``torch.autograd.backward``: ``train_backward``;
* ``Optimizer.step`` (torch's global optimizer hooks): ``optimizer_step``, after which the learner step
  (one update) ends when the loop moves on to a new draw (archsim.capture.learner_markers); so does
  a hand-written update marked ``--phase-fn MODULE:QUALNAME=optimizer_step``;
* Stable-Baselines3 ``ReplayBuffer.add/sample`` and TorchRL ``ReplayBuffer.extend/add/sample`` when the
  program has imported them, and any ``--phase-fn MODULE:QUALNAME=PHASE``.

Steps follow the loop's order. An actor step opens at its ``act`` or ``env_step`` and closes when the
next iteration's ``act``/``env_step`` starts or a learner phase starts; a learner step opens at its first
learner phase and closes once its optimizer has stepped and a new draw, acting or an env step starts.
So all of one thread's time between two steps belongs to one of them, as the sequential loop ran it.
Nested calls (wrappers' ``step``, submodules, a forward inside a marked function) are not marked
again. Only the thread that runs the program is
marked. Every patch is undone on exit. ``multiprocessing`` processes the program starts are counted
and, given ``workers`` (archsim.capture.child_capture.Workers), wrapped so that each worker marks
and profiles itself: there a marker numbers its actor steps ``actor`` and ticks once ``ready`` says
the parent's training has started.

Before the first optimizer step nothing ticks the profiler's schedule, so its windows count from the
first learner step on (a replay fill of thousands of acting steps records nothing).

This module holds the step state and the patches; the phase of a module's forward is
archsim.capture.forward_markers's, the end of a learner step archsim.capture.learner_markers's and
the environment's steps archsim.capture.env_markers's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from archsim.capture import cpu_clock, markers
from archsim.capture.env_markers import EnvMarking
from archsim.capture.forward_markers import ForwardMarking
from archsim.capture.learner_markers import LearnerMarking, tensors_of
from archsim.capture.patches import Patches, subclasses
from archsim.capture.phase_fn import PhaseFn
from archsim.errors import ArchsimError
from archsim.trace.schema import ACTOR_PHASES

_get_ident = threading.get_ident
# Phases that start a new actor step when the open one has already stepped its environment.
_BOUNDARY = frozenset({"act", "env_step"})
_ACTOR = frozenset(ACTOR_PHASES)
# Phases that make a learner step an update (counted in Counts.learner_steps).
_UPDATES = frozenset({"train_backward", "optimizer_step"})
# Library vector envs that are not gymnasium's (their step steps every env): (module, class).
LIBRARY_ENVS = (("stable_baselines3.common.vec_env.base_vec_env", "VecEnv"),)
# Library replay buffers: (module, class, method, phase).
LIBRARY_BUFFERS = (
    ("stable_baselines3.common.buffers", "ReplayBuffer", "add", "replay_insert"),
    ("stable_baselines3.common.buffers", "ReplayBuffer", "sample", "replay_sample"),
    ("stable_baselines3.common.buffers", "DictReplayBuffer", "add", "replay_insert"),
    ("stable_baselines3.common.buffers", "DictReplayBuffer", "sample", "replay_sample"),
    ("torchrl.data", "ReplayBuffer", "add", "replay_insert"),
    ("torchrl.data", "ReplayBuffer", "extend", "replay_insert"),
    ("torchrl.data", "ReplayBuffer", "sample", "replay_sample"),
)


@dataclasses.dataclass
class Counts:
    """What the program did, over the whole run (recorded or not)."""

    actor_steps: int = 0
    env_steps: int = 0  # outermost env.step calls
    transitions: int = 0  # env steps x envs stepped
    learner_steps: int = 0  # those that ran a backward or an optimizer step (an update)
    samples: int = 0  # learner steps x their batch
    frames: int = 0  # ALE emulator frames (ale_py AtariEnv steps x its frameskip)
    # the same in the steady state, without the replay fill: transitions from the first optimizer
    # step on, samples from the first env step after it (a PPO's first update burst trains on the
    # rollout before it: counted, its samples were 2.58 per transition where the loop used each twice)
    transitions_training: int = 0
    samples_training: int = 0
    ticks: int = 0  # schedule steps, from the first learner step on
    worker_processes: int = 0  # multiprocessing processes the program started
    other_thread_optimizer_steps: int = 0  # Optimizer.step calls on threads that are not marked
    # optimizer steps of the marked thread: more than learner_steps when an update steps several
    # (SAC, TD3's delayed actor), whose updates may then differ (archsim.trace.learner_batch)
    optimizer_steps: int = 0
    other_env_threads: int = 0  # threads that are not marked that stepped an env (actor threads)
    ended_by_os_exit: bool = False  # the program ended with os._exit(0) (archsim.capture.program)
    stopped_when_recorded: bool = False  # archsim ended it after its last window (--stop-when-...)
    interrupted: bool = False  # an uncaught Ctrl-C ended it (archsim.capture.interrupt)


_active: AutoMarker | None = (
    None  # the installed marker of this process (a forked child forgets it)
)


def active_marker() -> AutoMarker | None:
    return _active


class AutoMarker(ForwardMarking, LearnerMarking, EnvMarking):
    """Sequential step/phase state of the marked thread; ``install()`` patches, ``uninstall()`` undoes."""

    def __init__(
        self,
        on_tick: Callable[[], None],
        phase_fns: tuple[PhaseFn, ...] = (),
        *,
        actor: int = 0,
        ready: Callable[[], bool] | None = None,
        workers: Any = None,
        bare: Any = None,
    ) -> None:
        self._on_tick = on_tick
        # archsim.capture.bare_stretches.BareStretches: the markers' cost on the program's steps
        self._bare = bare
        self.tick_cpu_ns = 0  # the ticks' CPU so far (archsim's work, out of every gap)
        self._phase_fns = phase_fns
        self._actor_index = actor  # the actor index of this process's steps (a worker's number)
        self._ready = ready  # a worker: ticks from when this says the parent's training started
        self._workers = workers  # archsim.capture.child_capture.Workers: capture started processes
        self._patches = Patches()
        self._removers: list[Any] = []
        self._thread = threading.get_ident()
        self._actor: Any = None  # open actor step context
        self._actor_stepped = False  # the open actor step has stepped its environment
        self._learner: Any = None
        self._learner_batch = (1, False)  # the open learner step's (batch, in the steady state)
        self._learner_trained = False  # the open learner step ran a backward or optimizer step
        self._learner_stepped = False  # ... and an optimizer step (archsim.capture.learner_markers)
        self._draw: dict[tuple[Any, ...], Any] = {}  # its draw's tensors (learner_markers)
        # gradient accumulation: the open learner step's samples over its backwards so far, and the
        # largest grad-on train forward batch since its last backward (see _note_backward)
        self._backward_samples = 0
        self._forward_max = 0
        self._depth = 0  # > 0 inside a marked call
        self._pending = True  # late patches (program's own classes, libraries) not yet done
        self._env_id = 0
        self.env_batch: int | None = None
        self.env_batches: set[int] = set()  # every env's (archsim.capture.env_markers)
        self._round: dict[int, int] = {}  # envs stepped since the last outermost forward
        self.frameskip: Any = None  # archsim.capture.frameskip.FrameSkip, once an env has stepped
        self.obs_ndim: int | None = None
        self.obs_key_ndim: dict[str, int] = {}
        self.other_env_threads: set[int] = set()  # counted in Counts.other_env_threads
        self.learner_batch = 1
        # modules whose grad-on forward at the env's batch was followed by a backward (True) or an
        # env step (False), and those whose such forward awaits either (see _forward_phase)
        self._trains_at_env_batch: dict[int, bool] = {}
        self._ambiguous: set[int] = set()
        self.seen_learner = False
        self.steady = False  # an env step has run since the first optimizer step (Counts)
        self.next_role: str | None = None  # the step about to start, as it ticks the profiler
        self.counts = Counts()

    # ---- steps -------------------------------------------------------------------------------
    def _close_actor(self) -> None:
        if self._actor is not None:
            actor, self._actor = self._actor, None
            actor.__exit__(None, None, None)

    def _tick(self) -> None:
        if not self.seen_learner and self._ready is not None and self._ready():
            self.seen_learner = True
        if self.seen_learner:
            self.counts.ticks += 1
            # the tick (the profiler's step, a window's export) is archsim's work, not the
            # program's: out of the next step's gap, bracketed right here. Bracketed inside the
            # callback by a generator context manager it left that manager's own Python in the
            # gap: 5-6 us a step on a CartPole DQN (unprofiled gaps 11-14 us without a tick,
            # 17-20 us with an empty bracketed one; 4 alternating in-process runs, 2026-11-25)
            start_ns = cpu_clock.now_ns()
            try:
                self._on_tick()
            finally:
                spent_ns = cpu_clock.now_ns() - start_ns
                markers.skip_gap_ns(spent_ns)
                self.tick_cpu_ns += spent_ns

    def _begin(self, phase: str, *, boundary: bool = True) -> None:
        """Open the step ``phase`` belongs to, closing what the loop's order says has ended.
        ``boundary=False``: an actor phase that never starts a step while one is open."""
        if self._pending:
            self._late_patches()
        if phase in _ACTOR:
            if phase in _BOUNDARY and boundary:
                self._close_learner()
                if self._actor is not None and self._actor_stepped:
                    self._close_actor()
            elif self._actor is not None or self._learner is not None:
                return  # e.g. a replay insert: part of whatever step is open
            if self._actor is None:
                self.next_role = "actor"
                self._tick()
                self._actor = markers.step(
                    "actor", actor=self._actor_index, batch_size=self.env_batch or 1
                )
                self._actor.__enter__()
                self._actor_stepped = False
                self.counts.actor_steps += 1
        elif phase != "inference_batch":
            self._close_actor()
            if self._learner is None:
                self.next_role = "learner"
                self._tick()
                self._learner = markers.step("learner", batch_size=max(1, self.learner_batch))
                self._learner.__enter__()
                # counted when it closes, if it ran a backward or an optimizer step; samples in the
                # steady state (Counts) where a program's own process steps no env (actors in
                # processes): from the first optimizer step on, as its workers count transitions
                training = self.seen_learner and (self.steady or not self.counts.env_steps)
                self._learner_batch = (max(1, self.learner_batch), training)
                self._learner_trained = False
                self._backward_samples = self._forward_max = 0
            if phase in _UPDATES:
                self._learner_trained = True

    def _marked(
        self, phase: str, fn: Callable[..., Any], args: Any, kwargs: Any, boundary: bool = True
    ) -> Any:
        self._begin(phase, boundary=boundary)
        self._depth += 1
        marker = markers.phase(phase)
        marker.__enter__()
        try:
            return fn(*args, **kwargs)
        finally:
            marker.__exit__(None, None, None)
            self._depth -= 1

    def _outermost(self) -> bool:
        return not self._depth and _get_ident() == self._thread

    def cut(self) -> None:
        """The program was stopped mid-step (Ctrl-C): close the open step marked as cut (no CPU
        time, archsim.capture.markers), uncounted when it is a learner step."""
        self.end_done_update()  # an update whose optimizer stepped was done, not cut
        for attr in ("_actor", "_learner"):
            step = getattr(self, attr)
            setattr(self, attr, None)
            if step is not None and hasattr(step, "cut"):
                step.cut()
            elif step is not None:
                step.__exit__(None, None, None)

    def finish(self) -> None:
        """Close the steps still open (the program has ended, or a bare stretch begins)."""
        if self._bare is not None:
            self._bare.close(self)
        self._close_actor()
        self._close_learner()

    # ---- wrappers (the env's: archsim.capture.env_markers; forwards': forward_markers) -------
    def _wrap_phase(self, original: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not self._outermost():
                return original(*args, **kwargs)
            if phase == "replay_sample":
                self.end_done_update()  # a new minibatch: ends an update that has stepped
                sizes = [a for a in args[1:2] if isinstance(a, int) and not isinstance(a, bool)]
                if sizes and self._learner is None and sizes[0] > 0:
                    self.learner_batch = sizes[0]
                result = self._marked(phase, original, args, kwargs)
                # the batch it hands out is the update's draw (SB3's named tuple of tensors): its
                # next_observations, first used after the temperature's step, are of this update
                self.note_draw(tensors_of((result,)))
                return result
            if phase == "train_backward":
                self.resolve_ambiguous(True, args[:1] or (kwargs.get("tensors"),))
                result = self._marked(phase, original, args, kwargs)
                self._note_backward()
                return result
            if phase == "env_step":  # a hand-written env (--phase-fn ...=env_step): as a gym one's
                env = args[0] if args and callable(getattr(args[0], "step", None)) else None
                if env is not None:  # a method: its env
                    self._note_env(env)
                result = self._marked(phase, original, args, kwargs)
                self.env_stepped(env)
                return result
            if phase == "optimizer_step":  # a hand-written update (--phase-fn ...=optimizer_step)
                result = self._marked(phase, original, args, kwargs)
                self._learner_step_done()
                return result
            return self._marked(phase, original, args, kwargs)

        call.__wrapped__ = original  # type: ignore[attr-defined]
        return call

    # ---- install / uninstall -----------------------------------------------------------------
    def _patch_callable(self, owner: Any, name: str, phase: str, what: str) -> None:
        raw = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if raw is None and isinstance(owner, type):
            raw = getattr(owner, name, None)
        if isinstance(raw, staticmethod | classmethod):
            self._patches.set(owner, name, type(raw)(self._wrap_phase(raw.__func__, phase)))
        elif callable(raw):
            self._patches.set(owner, name, self._wrap_phase(raw, phase))
        else:
            raise ArchsimError(f"{what}: {name!r} is not a function")

    def _patch_phase_fn(self, spec: PhaseFn) -> None:
        owner, name = spec.resolve()
        self._patch_callable(owner, name, spec.phase, f"--phase-fn {spec}")

    def _late_patches(self) -> None:
        """What only exists once the program runs: its ``__main__`` names, the libraries it imported."""
        self._pending = False
        for spec in self._phase_fns:  # now sys.path[0] is the program's folder, as it sees it
            self._patch_phase_fn(spec)
        for module_name, class_name in LIBRARY_ENVS:
            cls = getattr(sys.modules.get(module_name), class_name, None)
            if isinstance(cls, type):
                self._patch_env_tree(cls)
        for module_name, class_name, method, phase in LIBRARY_BUFFERS:
            module = sys.modules.get(module_name)
            cls = getattr(module, class_name, None) if module is not None else None
            if isinstance(cls, type) and callable(getattr(cls, method, None)):
                self._patch_callable(cls, method, phase, f"{module_name}.{class_name}")
                # and the subclasses' own (Stable-Baselines3's HerReplayBuffer, a program's
                # buffer given as replay_buffer_class): a 2 ms hand-written sample() had been
                # charged to the actor step before each update (2.5-2.8 ms against 0.4)
                for sub in subclasses(cls):
                    if callable(vars(sub).get(method)):
                        self._patch_callable(sub, method, phase, f"{sub.__module__}.{sub.__name__}")

    def install(self) -> None:
        import torch
        from torch.optim import optimizer as torch_optimizer

        self._opt_stack: list[Any] = []
        self._patches.set(
            torch.nn.Module, "__call__", self._wrap_module_call(torch.nn.Module.__call__)
        )
        self._patches.set(
            torch.Tensor, "backward", self._wrap_phase(torch.Tensor.backward, "train_backward")
        )
        self._patches.set(
            torch.autograd,
            "backward",
            self._wrap_phase(torch.autograd.backward, "train_backward"),
        )
        self._removers.append(torch_optimizer.register_optimizer_step_pre_hook(self._optimizer_pre))
        self._removers.append(
            torch_optimizer.register_optimizer_step_post_hook(self._optimizer_post)
        )
        try:
            import gymnasium
        except ImportError:
            gymnasium = None
        if gymnasium is not None:
            self._patch_env_tree(gymnasium.Env)
            self._patch_env_tree(gymnasium.vector.VectorEnv)
        from archsim.capture.child_capture import patch_process_start
        from archsim.capture.own_profiler import patch_own_profilers

        patch_process_start(self._patches, self.counts, self._workers)
        patch_own_profilers(self._patches)  # a second profiler would take archsim's windows

    def uninstall(self) -> None:
        global _active
        for remover in self._removers:
            remover.remove()
        self._removers.clear()
        self._patches.undo()
        if _active is self:
            _active = None

    def forget(self) -> None:
        """In a forked child: undo the parent's patches; its open steps are the parent's, not ours."""
        self._actor = self._learner = None
        self._workers = None
        self.uninstall()


@contextlib.contextmanager
def auto_markers(
    on_tick: Callable[[], None], phase_fns: tuple[PhaseFn, ...] = (), **options: Any
) -> Iterator[AutoMarker]:
    """Patch the running process so that the block's RL loop is marked; undo everything after.
    ``options``: AutoMarker's ``actor``, ``ready``, ``workers`` and ``bare``."""
    global _active
    marker = AutoMarker(on_tick, phase_fns, **options)
    try:
        _active = marker
        marker.install()
        yield marker
    finally:
        try:
            marker.finish()
        finally:
            marker.uninstall()
