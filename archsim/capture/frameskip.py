"""Emulator frames per env step of a captured program's environment, read from the environment itself
(``archsim capture run``): the ALE env's own frameskip times the skip of every frame-skipping wrapper
around it, written to meta as ``workload.frames_per_env_step`` with ``frames_per_env_step_source``.

Only what the capture can know for sure counts:

- the base env must be ale_py's ``AtariEnv``: its ``_frameskip`` is an int (``PongNoFrameskip-v4``: 1;
  the v5 envs: 4), or a ``(low, high)`` tuple, a stochastic skip that ``AtariEnv.step`` draws with
  numpy's ``Generator.integers(low, high)``, uniform on low..high-1, whose mean is recorded (and said);
- skipping wrappers: Stable-Baselines3's ``MaxAndSkipEnv`` (and its copies of the same name, as in
  single-file programs, and gymnasium's ``MaxAndSkipObservation``: ``_skip``), gymnasium's
  ``AtariPreprocessing`` (``frame_skip``) and ``RepeatAction`` (``num_repeats``);
- every other wrapper must step its inner env once per step: its ``step`` is gymnasium's
  ``Wrapper``/``ObservationWrapper``/``RewardWrapper``/``ActionWrapper`` one, or the class is one of
  gymnasium's or Stable-Baselines3's own (none of which repeats a step besides those above), or one
  of the step-once Atari wrappers of Stable-Baselines3 and OpenAI Baselines
  (``common/atari_wrappers.py``) by name, which single-file programs copy.

Any other wrapper with its own ``step`` may repeat it: the figure is then unknown and the capture
leaves 1 frame per env step, saying which wrapper. A vector env is read through its first
sub-env (gymnasium's ``SyncVectorEnv.envs``, SB3's ``DummyVecEnv.envs``, through SB3's ``VecEnvWrapper``
and gymnasium's ``VectorWrapper``); one whose envs live in worker processes (``AsyncVectorEnv``,
``SubprocVecEnv``) is read by the workers, which capture themselves (archsim.capture.child_capture);
ale_py's ``AtariVectorEnv`` by the frameskip of its ``gym.make_vec`` spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Wrappers of this name, from the Atari wrapper modules of Stable-Baselines3
# (stable_baselines3/common/atari_wrappers.py) and OpenAI Baselines (baselines/common/atari_wrappers.py),
# whose step calls the inner env's step once (or only resets differently); the skipping one,
# MaxAndSkipEnv, is read by its ``_skip``.
STEP_ONCE_NAMES = frozenset(
    {
        "ClipRewardEnv",
        "EpisodicLifeEnv",
        "FireResetEnv",
        "FrameStack",
        "Monitor",
        "NoopResetEnv",
        "ScaledFloatFrame",
        "StickyActionEnv",
        "WarpFrame",
    }
)
# Libraries whose own wrappers step their inner env once, except the skipping ones read below.
STEP_ONCE_MODULES = ("gymnasium.", "stable_baselines3.")
# How deep a wrapper chain (or vector-env nesting) is followed; real stacks are about ten deep.
MAX_DEPTH = 64
# When a vector env's sub-envs run in worker processes.
IN_WORKERS = "its vector env steps its environments in worker processes"
# frames_per_env_step_source's reason when the program's own process stepped no environment
NO_ENV_STEPPED = "no gymnasium env was stepped"


@dataclass(frozen=True)
class FrameSkip:
    """Frames per env step (None: not an ALE env, or not known for sure) and how it was found."""

    frames_per_env_step: float | None
    source: str


def _name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def first_sub_env(env: Any) -> Any:
    """The single env a (possibly wrapped) vector env steps first; ``env`` itself when it is not a
    vector env; None when its sub-envs live in worker processes."""
    for _ in range(MAX_DEPTH):
        if not isinstance(getattr(env, "num_envs", None), int):
            return env
        envs = getattr(env, "envs", None)
        if isinstance(envs, (list, tuple)) and envs:
            return envs[0]
        inner = getattr(env, "venv", None) or getattr(env, "env", None)
        if inner is None or inner is env:
            return None
        env = inner
    return None


def _vector_frameskip(env: Any) -> FrameSkip:
    """A vector env with no sub-env to read. Its workers read theirs (``processes``: gymnasium's
    AsyncVectorEnv, SB3's SubprocVecEnv); ale_py's AtariVectorEnv (what ``gym.make_vec`` builds for
    an ALE id: C++ threads in this process) keeps its frameskip only in the spec make_vec gave it;
    any other steps its envs itself (gymnasium's CartPoleVectorEnv) and says nothing. Either
    in-process kind was said to step "in worker processes"."""
    for _ in range(MAX_DEPTH):
        inner = getattr(env, "venv", None) or getattr(env, "env", None)
        if inner is None or inner is env:
            break
        env = inner
    if isinstance(getattr(env, "processes", None), list):
        return FrameSkip(None, IN_WORKERS)
    if type(env).__module__.startswith("ale_py") and type(env).__name__ == "AtariVectorEnv":
        kwargs = getattr(getattr(env, "spec", None), "kwargs", None)
        skip = kwargs.get("frameskip") if isinstance(kwargs, dict) else None
        if isinstance(skip, int) and not isinstance(skip, bool) and skip > 0:
            return FrameSkip(
                float(skip), f"ale_py AtariVectorEnv frameskip {skip} (its make_vec spec)"
            )
        return FrameSkip(None, "ale_py AtariVectorEnv without a make_vec spec: frameskip not known")
    return FrameSkip(
        None, f"its vector env {_name(env)} steps its environments itself, with no sub-env to read"
    )


def _skip_of(layer: Any) -> int | None:
    """A skipping wrapper's skip; None when ``layer`` is not one of them."""
    from gymnasium.wrappers import AtariPreprocessing, RepeatAction

    if isinstance(layer, AtariPreprocessing):
        return int(layer.frame_skip)
    if isinstance(layer, RepeatAction):
        return int(layer.num_repeats)
    name = type(layer).__name__
    if name in ("MaxAndSkipEnv", "MaxAndSkipObservation") and isinstance(
        getattr(layer, "_skip", None), int
    ):
        return int(layer._skip)
    return None


def _steps_once(layer: Any) -> bool:
    import gymnasium as gym

    cls = type(layer)
    owner = next((c for c in cls.__mro__ if "step" in vars(c)), None)
    if owner in (gym.Wrapper, gym.ObservationWrapper, gym.RewardWrapper, gym.ActionWrapper):
        return True
    return cls.__module__.startswith(STEP_ONCE_MODULES) or cls.__name__ in STEP_ONCE_NAMES


def _ale_frameskip(base: Any) -> tuple[float, str] | None:
    cls = type(base)
    if not (cls.__module__.startswith("ale_py") and cls.__name__ == "AtariEnv"):
        return None
    skip = getattr(base, "_frameskip", None)
    if isinstance(skip, int) and not isinstance(skip, bool) and skip > 0:
        return float(skip), f"ale_py AtariEnv frameskip {skip}"
    if isinstance(skip, tuple) and len(skip) == 2 and all(isinstance(s, int) for s in skip):
        low, high = skip
        if 0 < low < high:  # Generator.integers(low, high): uniform on low..high-1
            mean = (low + high - 1) / 2
            return (
                mean,
                f"ale_py AtariEnv stochastic frameskip {low}..{high - 1}: its mean {mean:g}",
            )
    return None


def env_frameskip(env: Any) -> FrameSkip:
    """Frames per env step of ``env`` (a single or vector env, wrapped or not); see the docstring."""
    try:
        return _frameskip(env)
    except Exception as exc:  # the program's env answered oddly: say so rather than guess
        return FrameSkip(None, f"reading its env's wrappers failed ({type(exc).__name__})")


def _frameskip(env: Any) -> FrameSkip:
    import gymnasium as gym

    single = first_sub_env(env)
    if single is None:
        return _vector_frameskip(env)
    skips: list[str] = []
    product = 1
    layer = single
    for _ in range(MAX_DEPTH):
        if not isinstance(layer, gym.Wrapper):
            break
        skip = _skip_of(layer)
        if skip is not None:
            product *= skip
            skips.append(f"{type(layer).__name__} skip {skip}")
        elif not _steps_once(layer):
            return FrameSkip(
                None,
                f"wrapper {_name(layer)} has its own step, which may repeat the inner step: "
                "frames per env step not known",
            )
        layer = layer.env
    else:
        return FrameSkip(None, f"its wrapper chain is over {MAX_DEPTH} deep")
    ale = _ale_frameskip(layer)
    if ale is None:
        return FrameSkip(None, f"its env {_name(layer)} is not an ALE AtariEnv")
    frames, source = ale
    return FrameSkip(frames * product, " x ".join([source, *skips]))


def set_frames(workload: dict[str, Any], frameskip: Any) -> None:
    """``frames_per_env_step`` where the env says it for sure, else 1; and where it came from.
    (``settings.counts.frames`` counts ALE frames as stepped, resets' no-op and fire frames too.)"""
    frameskip = frameskip or FrameSkip(None, NO_ENV_STEPPED)
    if frameskip.frames_per_env_step is None:
        workload["frames_per_env_step"] = 1.0
        workload["frames_per_env_step_source"] = f"1 frame per env step: {frameskip.source}"
    else:
        workload["frames_per_env_step"] = float(frameskip.frames_per_env_step)
        workload["frames_per_env_step_source"] = frameskip.source
