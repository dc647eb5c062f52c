"""Environment steps of ``archsim capture run``'s AutoMarker (archsim.capture.auto_markers): gymnasium
``Env.step``/``reset``, vector envs' and Stable-Baselines3 VecEnvs' ``step``, and ale_py's AtariEnv (its
frameskip counts emulator frames), patched on every subclass, also those defined later. The env's frames
per step are read from its wrapper chain when first stepped (archsim.capture.frameskip).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from archsim.capture.bare_stretches import BARE_DEPTH
from archsim.capture.frameskip import env_frameskip
from archsim.capture.patches import subclasses

# Called at the start of every marked env step, outside the profiler's bookkeeping: a captured
# worker raises its deferred SIGTERM there (archsim.capture.child_capture).
before_env_step: Callable[[], None] | None = None


class EnvMarking:
    """Mixin of AutoMarker: wraps env classes' ``step``/``reset`` into actor steps' ``env_step``."""

    # set by AutoMarker
    _patches: Any
    _thread: int
    _env_id: int
    _actor: Any
    _depth: int
    counts: Any
    env_batch: int | None
    env_batches: set[int]  # of every env stepped or reset so far
    # the envs stepped since the last outermost forward: {id: batch} (see close_round)
    _round: dict[int, int]
    frameskip: Any  # archsim.capture.frameskip.FrameSkip of the env last stepped
    _bare: Any  # archsim.capture.bare_stretches.BareStretches, or None
    obs_ndim: int | None
    obs_key_ndim: dict[str, int]  # a Dict observation space's rank of each key's observation
    other_env_threads: set[int]
    seen_learner: bool
    steady: bool
    _actor_stepped: bool
    _outermost: Callable[[], bool]
    _marked: Callable[..., Any]
    resolve_ambiguous: Callable[..., None]

    def _note_env(self, env: Any) -> None:
        if id(env) == self._env_id:
            return
        self._env_id = id(env)
        num_envs = getattr(env, "num_envs", None)
        vector = isinstance(num_envs, int) and num_envs >= 1
        self.env_batch = num_envs if vector else 1
        self.env_batches.add(self.env_batch)
        # gymnasium vector envs batch observation_space; SB3's VecEnv keeps it per env
        space = getattr(env, "single_observation_space", None) if vector else None
        space = space or getattr(env, "observation_space", None)
        shape = getattr(space, "shape", None)
        self.obs_ndim = len(shape) if isinstance(shape, tuple) else None
        # gymnasium's Dict space (and SB3's MultiInputPolicy's): each key's own rank; a module fed
        # a dict of a batch of 24 read batch 1 (no tensor argument), and its pacing 1 for 24
        spaces = getattr(space, "spaces", None)
        self.obs_key_ndim = {
            key: len(sub.shape)
            for key, sub in (spaces.items() if isinstance(spaces, dict) else ())
            if isinstance(getattr(sub, "shape", None), tuple)
        }
        self.frameskip = env_frameskip(env)

    def _wrap_env_step(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def step(env: Any, *args: Any, **kwargs: Any) -> Any:
            if before_env_step is not None:
                before_env_step()
            if not self._outermost():
                if self._depth >= BARE_DEPTH and threading.get_ident() == self._thread:
                    return self._bare.bare_env_step(self, original, (env, *args), kwargs)
                if threading.get_ident() != self._thread:  # an actor thread: not marked
                    self._note_other_thread()
                return original(env, *args, **kwargs)
            self._note_env(env)
            result = self._marked("env_step", original, (env, *args), kwargs)
            self.env_stepped(env)
            if self._bare is not None:  # archsim.capture.bare_stretches
                self._bare.after_env_step(self)
            return result

        return step

    def close_round(self) -> None:
        """An outermost forward starts: the envs stepped since the last one were a round of the
        loop. Several distinct envs in a round (a Python list of envs, stepped one by one) are
        acted for together: their summed batch is an acting batch too (a forward on the stacked
        observations of 4 CartPoles, batch 4, had opened learner steps of batch 4 that trained
        nothing and took the acting out of the actor steps). The first round's forward comes
        before any round ended, before training."""
        if len(self._round) > 1:
            self.env_batches.add(sum(self._round.values()))
        self._round.clear()

    def env_stepped(self, env: Any = None) -> None:
        """An outermost env step of ``env`` ended (a gymnasium env's, or a function marked
        ``env_step``; None: not a method of an env): the open actor step has stepped, and its
        transitions count."""
        if env is not None:
            self._round[id(env)] = self.env_batch or 1
        self.resolve_ambiguous(False)  # the grad-on forwards before it acted
        self._actor_stepped = True
        self.counts.env_steps += 1
        self.counts.transitions += self.env_batch or 1
        if self.seen_learner:
            self.steady = True
            self.counts.transitions_training += self.env_batch or 1

    def _note_other_thread(self) -> None:
        """An env stepped on a thread that is not marked: counted, so the refusal can say so."""
        ident = threading.get_ident()
        if ident not in self.other_env_threads:
            self.other_env_threads.add(ident)
            self.counts.other_env_threads = len(self.other_env_threads)

    def _wrap_env_reset(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def reset(env: Any, *args: Any, **kwargs: Any) -> Any:
            if not self._outermost():
                return original(env, *args, **kwargs)
            self._note_env(env)
            if self._actor is None:  # the loop's first reset: not inside an actor step
                self._depth += 1  # its no-op/fire steps are the reset's, not the loop's
                try:
                    return original(env, *args, **kwargs)
                finally:
                    self._depth -= 1
            # an episode's reset after its last step (``if term or trunc: obs = env.reset()``) is
            # env work of the step that ended it, not an actor step of its own: one was opened per
            # episode (a CartPole loop counted 403 actor steps for its 382 env steps)
            return self._marked("env_step", original, (env, *args), kwargs, boundary=False)

        return reset

    def _wrap_ale_step(self, original: Callable[..., Any]) -> Callable[..., Any]:
        wrapped_step = self._wrap_env_step(original)

        def step(env: Any, *args: Any, **kwargs: Any) -> Any:
            skip = getattr(env, "_frameskip", None)
            if isinstance(skip, int) and threading.get_ident() == self._thread:
                self.counts.frames += skip
            return wrapped_step(env, *args, **kwargs)

        return step

    def _patch_env_class(self, cls: type) -> None:
        own = vars(cls)
        ale = cls.__module__.startswith("ale_py") and cls.__name__ == "AtariEnv"
        if "step" in own and callable(own["step"]):
            wrap = self._wrap_ale_step if ale else self._wrap_env_step
            self._patches.set(cls, "step", wrap(own["step"]))
        if "reset" in own and callable(own["reset"]):
            self._patches.set(cls, "reset", self._wrap_env_reset(own["reset"]))

    def _patch_env_tree(self, base: type) -> None:
        for cls in (base, *subclasses(base)):
            self._patch_env_class(cls)
        marker = self
        previous = vars(base).get("__init_subclass__")

        def init_subclass(cls: type, **kwargs: Any) -> None:
            if previous is not None:
                previous.__get__(None, cls)(**kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            marker._patch_env_class(cls)

        self._patches.set(base, "__init_subclass__", classmethod(init_subclass))
