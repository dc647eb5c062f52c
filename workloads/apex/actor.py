"""An Ape-X actor: acts on real ALE Pong with its own copy of the network, keeps a local buffer of
n-step transitions with initial priorities from its own Q-values, and ships it to the replay.

Per agent step (one ``archsim::actor_step``): ``act`` (forward pass, epsilon-greedy at this actor's
fixed epsilon), ``env_step``, ``preprocess``, and every ``send_every`` transitions ``replay_insert``
(build, serialize and send the batch). Every ``param_fetch_frames`` frames the actor fetches the
learner's parameters (in the step, in none of its phase columns: the schema has no such phase; the
message log times it). Horgan et al. 2018, Algorithm 1.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any

import numpy as np

from archsim.capture.markers import phase, step
from workloads.apex import wire
from workloads.apex.channel import Channel
from workloads.apex.settings import ApexSettings


@dataclasses.dataclass
class _Step:
    obs: np.ndarray  # (4, 84, 84) uint8 stack the action was chosen on
    action: int
    q: np.ndarray  # the actor's Q-values of obs
    reward: float = 0.0
    done: bool = False


class NStepBuffer:
    """Turns agent steps into n-step transitions with priorities |R + discount max Q(s') - Q(s, a)|
    (the actor's own Q-values, as Ape-X actors compute initial priorities)."""

    def __init__(self, n: int, gamma: float):
        self.n, self.gamma = n, gamma
        self.pending: collections.deque[_Step] = collections.deque()
        self.ready: list[tuple] = []  # (obs, action, return, discount, next_obs, priority)

    def add(self, item: _Step) -> None:
        self.pending.append(item)
        while self.pending and self._emit():
            pass

    def _emit(self) -> bool:
        window = list(self.pending)[: self.n + 1]
        ret, discount = 0.0, 1.0
        for k in range(min(self.n, len(window))):
            ret += discount * window[k].reward
            discount *= self.gamma
            if window[k].done:
                return self._push(ret, 0.0, window[0].obs, 0.0)
        if len(window) <= self.n:
            return False
        last = window[self.n]
        return self._push(ret, discount, last.obs, float(last.q.max()))

    def _push(self, ret: float, discount: float, next_obs: np.ndarray, bootstrap: float) -> bool:
        first = self.pending.popleft()
        priority = abs(ret + discount * bootstrap - float(first.q[first.action]))
        self.ready.append((first.obs, first.action, ret, discount, next_obs, priority))
        return True

    def take(self) -> list[np.ndarray]:
        """The ready transitions as the INSERT arrays; empties the ready list."""
        obs, actions, returns, discounts, next_obs, priorities = zip(*self.ready, strict=True)
        self.ready = []
        return [
            np.stack(obs),
            np.asarray(actions, dtype=np.int64),
            np.asarray(returns, dtype=np.float32),
            np.asarray(discounts, dtype=np.float32),
            np.stack(next_obs),
            np.asarray(priorities, dtype=np.float32),
        ]


def run_actor(
    index: int,
    settings: ApexSettings,
    params: Channel,
    replay: Channel,
    stop: Any,
    ready: Any,
    poll: Any,
    stats: dict,
) -> None:
    """Act until ``stop``; ``params`` / ``replay`` are connected channels (maybe to one process)."""
    import torch

    from workloads.apex.learner import load_param_arrays
    from workloads.dqn.env import FRAME_SKIP, AtariEnv, FramePreprocessor
    from workloads.dqn.model import NatureDQN
    from workloads.r2d2.seed.inference import apex_epsilons

    env = AtariEnv(seed=settings.seed + 1000 * (index + 1))
    try:
        prep = FramePreprocessor(env.raw_shape)
        first = env.reset()
        obs = prep.reset(first.last, first.previous)
        model = NatureDQN(env.num_actions)
        epsilon = float(apex_epsilons(settings.actors)[index])
        stats["epsilon"] = epsilon
        rng = np.random.default_rng(settings.seed + index)
        buffer = NStepBuffer(settings.n_step, settings.gamma)
        fetch_every = max(1, settings.param_fetch_frames // FRAME_SKIP)

        def fetch() -> None:
            start_ns = time.time_ns()
            params.send(wire.PARAM_REQUEST, [])
            kind, arrays, record = params.recv()
            record["request_start_ns"] = start_ns  # the round trip as the actor sees it
            if kind != wire.PARAMS:
                raise wire.ProtocolError(f"apex: expected params, got {wire.KIND_NAMES[kind]}")
            load_param_arrays(model, arrays)
            stats["param_fetches"] += 1

        fetch()
        if not ready():
            return
        steps = 0
        while not stop.is_set():
            poll()
            with step("actor", actor=index, batch_size=1):
                with phase("act"), torch.no_grad():
                    q = model(torch.from_numpy(obs).unsqueeze(0))[0].numpy()
                    action = int(q.argmax())
                    if rng.random() < epsilon:
                        action = int(rng.integers(env.num_actions))
                current = _Step(obs, action, q)
                with phase("env_step"):
                    out = env.step_frames(action)
                    current.reward = out.reward
                    current.done = out.terminated or out.truncated
                    if current.done:
                        out = env.reset()
                with phase("preprocess"):
                    obs = (prep.reset if current.done else prep.push)(out.last, out.previous)
                buffer.add(current)
                if len(buffer.ready) >= settings.send_every:
                    with phase("replay_insert"):
                        arrays = buffer.take()
                        replay.send(wire.INSERT, arrays, items=len(arrays[1]))
                    stats["inserts"] += 1
                steps += 1
                stats["actor_steps"] = steps
                stats["episodes"] += int(current.done)
                if steps % fetch_every == 0:
                    fetch()
    finally:
        env.close()
