"""Learner steps of ``archsim capture run``'s AutoMarker (archsim.capture.auto_markers): one learner
step is one update, one minibatch drawn and trained on by however many optimizers step on it.

An RL update may step several optimizers on one draw: SAC steps its critics', actor's and
temperature's (Haarnoja et al. 2018, Alg. 1: one gradient step of each per minibatch; CleanRL's
sac_continuous_action.py steps the actor and temperature ``policy_frequency`` times every
``policy_frequency`` steps on the same ``data``), TD3 its critics' every update and its actor's every
second one on the same minibatch (Fujimoto et al. 2018, delayed policy updates), a script may step
an auxiliary loss's optimizer on the minibatch of its main one. So an optimizer step does not close
the learner step; after one, the update goes on while the loop works on the same draw and ends at:

* an environment step or an acting forward (the loop's order: archsim.capture.auto_markers);
* a replay ``sample`` (a library buffer's, or ``--phase-fn ...=replay_sample``): a new draw;
* a train forward none of whose tensor inputs is a live tensor that a forward or the replay sample of
  the update took or returned (same first element, shape and version): a new minibatch (PPO's next
  ``b_obs[mb_inds]``, DQN's next ``rb.sample()``). A forward without tensor inputs shows no draw,
  and is a new update too, as every optimizer step was before.

A backward with no forward since the update's optimizer step (a temperature loss on the actor's
log-probabilities) is part of the update. The update's batch is the minibatch drawn: the summed
batches of the backwards before its first optimizer step (gradient accumulation's micro-batches),
not those of every optimizer's backward on the same samples.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from archsim.capture import markers

_get_ident = threading.get_ident
# Key tag of a noted output's autograd node in LearnerMarking._draw.
_GRAD_FN = "grad_fn"
# Autograd nodes walked back from a forward's input to find a noted output's: the few ops between
# one forward's output and the next's input (a cat, a slice, an activation), not a whole network.
_MAX_GRAPH_NODES = 32


class _Held:
    """A strong reference that calls like a weakref (LearnerMarking._draw's values)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self) -> Any:
        return self.value


def tensors_of(values: Iterable[Any]) -> list[Any]:
    """The tensors among ``values`` and inside those that are tuples, lists or dicts (a forward's
    inputs, its ``(action, log_prob)`` output, a Dict observation)."""
    import torch

    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, tuple | list | dict):  # a dict: a Dict observation's tensors
            items = value.values() if isinstance(value, dict) else value
            found.extend(v for v in items if isinstance(v, torch.Tensor))
    return found


def _draw_key(tensor: Any) -> tuple[Any, ...]:
    """Which data a tensor holds: its first element's address (storage and offset: a sliced
    minibatch of the rollout is another draw), its shape and its version (an in-place refill of
    the same batch tensor is a new draw); an alias (``detach()``, ``as_tensor`` of the same array)
    has the same key. Tensors without data or version fall back to their object. About 1 us."""
    try:
        ptr = tensor.data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        ptr = 0
    if not ptr:  # no storage (a sparse, meta or empty tensor)
        return ("object", id(tensor))
    try:
        return (ptr, tensor.shape, tensor._version)
    except RuntimeError:  # an inference-mode tensor keeps no version
        return (ptr, tensor.shape)


class PreTraining(Exception):
    """Passed to a pre-training update's step marker as it closes: like an interrupted step,
    not a sample of the loop's unprofiled step times (archsim.capture.unprofiled), and no gap
    to the next step spans it."""


class LearnerMarking:
    """Mixin of AutoMarker: ends an update (learner step) when its loop moves on to a new draw,
    and counts its samples."""

    # set by AutoMarker
    _thread: int
    _depth: int
    _learner: Any
    _learner_batch: tuple[int, bool]
    _learner_trained: bool
    _backward_samples: int
    _forward_max: int
    _act_grad_samples: int  # archsim.capture.forward_markers
    _opt_stack: list[Any]
    _workers: Any
    counts: Any
    seen_learner: bool
    _learner_stepped: bool  # the open learner step ran an optimizer step: a new draw ends it
    # the open update's tensors (forward inputs and outputs), weakly: a freed one draws no match
    _draw: dict[tuple[Any, ...], weakref.ref]
    _begin: Callable[..., None]
    _outermost: Callable[[], bool]

    def _close_learner(self) -> None:
        if self._learner is not None:
            learner, self._learner = self._learner, None
            self._learner_stepped = False
            self._draw.clear()
            batch, training = self._learner_batch
            if self._backward_samples and self._backward_samples != batch:
                batch = self._backward_samples  # measured over its micro-batches
                markers.step_batch(batch)
            if self._pre_training():  # not the loop: no sample of its unprofiled step times
                learner.__exit__(PreTraining, PreTraining(), None)
            else:
                learner.__exit__(None, None, None)
            if self._learner_trained:  # a forward alone (a shape probe at init) updates nothing
                self.counts.learner_steps += 1
                self.counts.samples += batch
                self.counts.samples_training += batch if training else 0

    def _pre_training(self) -> bool:
        """Updates so far are pre-training: no update since the program first acted, and no
        worker processes that act (see _learner_step_done)."""
        return not self.seen_learner and not (
            self.counts.actor_steps or self.counts.worker_processes
        )

    def _note_backward(self) -> None:
        """A backward ended: it trained on the largest batch of the grad-on train forwards since
        the previous one (not their sum: DQN's online and target nets, SAC's twin critics and a
        recurrent net's per-time-step calls see the same samples), and a learner step's batch is
        the sum over its backwards before its first optimizer step (4 accumulated micro-batches
        of 8 make 32; SAC's actor and temperature backwards after its critics' step are on the
        same 32). A backward that saw no such forward trains on the graphs of the grad-on acting
        forwards since the previous one: REINFORCE's episode of log-probs, A2C/A3C's rollout
        (REINFORCE on CartPole had read 1 sample an update of a whole episode, 0.028 samples per
        transition for 1); with none either, its step keeps its first forward's or replay
        sample's batch."""
        if not self._learner_stepped:
            self._backward_samples += self._forward_max or self._act_grad_samples
        self._forward_max = self._act_grad_samples = 0

    def same_draw(self, tensors: list[Any]) -> bool:
        """Whether one of ``tensors`` holds data of the open update's draw (see the module), or
        was computed from a tensor a forward of the update returned (its autograd graph reaches
        that output's: Stable-Baselines3's TD3 and DDPG score their actor with
        ``critic.q1_forward``, whose Q-net is called on ``cat([features, actor(obs)])``, a new
        tensor; each such actor step had been an update of its own, 1.5x the TD3's 70 updates
        and pacing, 2x a DDPG's)."""
        for tensor in tensors:
            ref = self._draw.get(_draw_key(tensor))
            if ref is not None and ref() is not None:
                return True
        return any(self._from_draw(getattr(tensor, "grad_fn", None)) for tensor in tensors)

    def _from_draw(self, node: Any) -> bool:
        """Whether the autograd graph from ``node`` reaches a noted output's ``grad_fn`` within
        _MAX_GRAPH_NODES nodes (the ops between a forward's output and the next forward's input)."""
        todo, seen = [node], 0
        while todo and seen < _MAX_GRAPH_NODES:
            node = todo.pop()
            if node is None:
                continue
            seen += 1
            if (_GRAD_FN, id(node)) in self._draw:
                return True
            todo.extend(next_node for next_node, _ in getattr(node, "next_functions", ()))
        return False

    def note_draw(self, tensors: list[Any]) -> None:
        """A train forward of the open update took or returned ``tensors``."""
        if self._learner is None:
            return
        for tensor in tensors:
            self._draw[_draw_key(tensor)] = weakref.ref(tensor)
            grad_fn = tensor.grad_fn
            if grad_fn is not None:  # held until the update ends, so its id stays its own
                self._draw[(_GRAD_FN, id(grad_fn))] = _Held(grad_fn)

    def end_done_update(self) -> None:
        """End the open update if its optimizer has stepped: the loop drew a new minibatch (a
        replay sample), or the program is ending (or was stopped) before its loop moved on, and
        that update was done, and counts."""
        if self._learner_stepped:
            self._close_learner()

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        if _get_ident() != self._thread:  # a learner thread: counted, so the refusal can say so
            self.counts.other_thread_optimizer_steps += 1
        if not self._outermost():
            self._opt_stack.append(None)
            return None
        self._begin("optimizer_step")
        self._depth += 1
        marker = markers.phase("optimizer_step")
        marker.__enter__()
        self._opt_stack.append(marker)
        return self._mark_closure(args, kwargs)

    def _mark_closure(self, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        """``optimizer.step(closure)`` (LBFGS, SAM, any optimizer given one) runs the update's
        forward and backward inside the optimizer step: unmarked there, a closure's update of 32
        was all ``optimizer_step`` at batch 1 (pacing 1 for 32). Its closure is wrapped so that
        they are the step's ``train_forward``/``train_backward`` (the ``optimizer_step`` phase
        paused around them); a closure evaluated again in the same step (LBFGS's line search)
        re-reads the same draw, and its batch counts once."""
        # torch's hooks get the step's own arguments: (optimizer, closure) or closure=...
        closure = kwargs.get("closure") if "closure" in kwargs else (args[1:2] or (None,))[0]
        if not callable(closure):
            return None
        calls = [0]
        samples_after_first = [0]

        def marked_closure(*c_args: Any, **c_kwargs: Any) -> Any:
            marker = self._opt_stack[-1]
            marker.__exit__(None, None, None)
            self._depth -= 1
            try:
                return closure(*c_args, **c_kwargs)
            finally:
                calls[0] += 1
                if calls[0] == 1:
                    samples_after_first[0] = self._backward_samples
                else:
                    self._backward_samples = samples_after_first[0]
                self._depth += 1
                resumed = markers.phase("optimizer_step")
                resumed.__enter__()
                self._opt_stack[-1] = resumed

        if "closure" in kwargs:
            return args, {**kwargs, "closure": marked_closure}
        return (args[0], marked_closure, *args[2:]), kwargs

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        marker = self._opt_stack.pop() if self._opt_stack else None
        if marker is None:
            return
        marker.__exit__(None, None, None)
        self._depth -= 1
        self._learner_step_done()

    def _learner_step_done(self) -> None:
        """An optimizer step ended: the update may go on (another optimizer on its draw) until
        the loop moves on (see the module), and training has started, unless the program has
        not acted yet: updates before its first actor step, with no worker processes that act,
        pre-train (on demonstrations, DQfD-style, or an offline data set before fine-tuning
        online). They are not the loop: its schedule starts at the first update after it acts,
        and their samples are not its pacing (200 pre-training updates of 64 before a CartPole
        loop's 1 update of 32 every 4 env steps read 102.4 samples per transition, not 8, and
        its first window held pre-training updates only)."""
        if self._learner is not None:
            self._learner_stepped = True
            self.counts.optimizer_steps += 1
        if self._pre_training():
            return
        if not self.seen_learner and self._workers is not None:
            self._workers.learning_started()
        self.seen_learner = True
