"""Module forwards of ``archsim capture run``'s AutoMarker (archsim.capture.auto_markers): an outermost
``nn.Module.__call__`` is ``act`` or ``train_forward``, decided by its input batch against the
environment's (grad mode only before any environment was seen), and its batch is the learner batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from archsim.capture.learner_markers import tensors_of

_get_ident = threading.get_ident
# Autograd nodes walked from a loss to find an ambiguous forward's outputs (resolve_ambiguous):
# a design bound. An A2C loss over 5 steps of 4 CartPoles holds some hundreds; a graph larger than
# this keeps the old rule (a backward after such a forward trained it).
_MAX_BACKWARD_NODES = 20_000


def _batch(value: Any, obs_ndim: int | None) -> int:
    """The batch of an input tensor: its first dimension when it has more than one observation's
    (``obs_ndim``; unknown: more than one dimension), else 1."""
    if obs_ndim is not None:
        return int(value.shape[0]) if value.dim() > obs_ndim else 1
    return int(value.shape[0]) if value.dim() >= 2 else 1


def _graph_nodes(roots: list[Any]) -> set[int] | None:
    """The ids of the autograd nodes ``roots``' graph holds, or None past _MAX_BACKWARD_NODES
    (not known whole)."""
    todo = [t.grad_fn for t in roots if getattr(t, "grad_fn", None) is not None]
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if len(seen) > _MAX_BACKWARD_NODES:
            return None
        todo.extend(next_node for next_node, _ in node.next_functions)
    return seen


class ForwardMarking:
    """Mixin of AutoMarker: wraps ``nn.Module.__call__`` into ``act``/``train_forward`` phases."""

    # set by AutoMarker
    _depth: int
    _thread: int
    _learner: Any
    _forward_max: int
    _ambiguous: set[int]
    _trains_at_env_batch: dict[int, bool]
    env_batch: int | None
    env_batches: set[int]
    obs_ndim: int | None
    obs_key_ndim: dict[str, int]
    learner_batch: int
    _marked: Callable[..., Any]
    _learner_stepped: bool  # archsim.capture.learner_markers: an update goes on on its draw only
    _close_learner: Callable[[], None]
    _round: dict[int, int]
    close_round: Callable[[], None]  # archsim.capture.env_markers
    same_draw: Callable[[list[Any]], bool]
    note_draw: Callable[[list[Any]], None]
    # module id -> its first recurrent layer is time-first (set on first use, see _time_first)
    _rnn_time_first: dict[int, bool] | None = None
    # the batches of the grad-on acting forwards since the last backward (LearnerMarking)
    _act_grad_samples: int = 0
    # module id -> the autograd nodes of its ambiguous forwards' outputs (see resolve_ambiguous)
    _ambiguous_outputs: dict[int, tuple[int, list[Any]]] | None = None

    def _time_first(self, module: Any) -> bool:
        """Whether ``module``'s first recurrent layer (``nn.LSTM``/``GRU``/``RNN``, itself
        included) is time-first (``batch_first=False``); read once per module."""
        cache = self._rnn_time_first
        if cache is None:
            cache = self._rnn_time_first = {}
        time_first = cache.get(id(module))
        if time_first is None:
            import torch

            rnns = (m for m in module.modules() if isinstance(m, torch.nn.RNNBase))
            time_first = cache[id(module)] = not getattr(next(rnns, None), "batch_first", True)
        return time_first

    def _module_batch(self, module: Any, value: Any, obs_ndim: int | None) -> int:
        """The batch of ``module``'s input tensor ``value``: second when it has a time and a
        batch dimension beside the observation's and the module's recurrent layer is time-first
        (``nn.LSTM``'s default ``[T, B, ...]``: 16 sequences of 8 steps had read batch 8, half
        their samples per transition, and a burn-in of 4 on 4 vector envs had read as acting),
        else as :func:`_batch` reads it."""
        if value.dim() >= (1 if obs_ndim is None else obs_ndim) + 2 and self._time_first(module):
            return int(value.shape[1])
        return _batch(value, obs_ndim)

    def _batch_of(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
        import torch

        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor):
                return self._module_batch(module, value, self.obs_ndim)
            if isinstance(value, dict):  # a Dict observation: its first tensor, by its key's rank
                for key, item in value.items():
                    if isinstance(item, torch.Tensor):
                        return self._module_batch(module, item, self.obs_key_ndim.get(key))
            if isinstance(value, torch.nn.utils.rnn.PackedSequence):  # sequences of any lengths
                return int(value.batch_sizes[0])
        return None

    def resolve_ambiguous(self, trained: bool, roots: tuple[Any, ...] = ()) -> None:
        """A backward (``trained``) or an env step followed the grad-on forwards at the env's batch
        since the last of either: what those modules did, for their next such forward. A
        backward of ``roots`` trained a module's forward only if its outputs are in their
        autograd graph (when the graph is walked whole): A2C's bootstrap value, computed with grad
        on and detached, had made each rollout's first acting forward a train forward, an update
        of its own that trained nothing (half the recorded learner steps), and such a forward's
        batch is no sample of the backward's (LearnerMarking._note_backward)."""
        outputs, self._ambiguous_outputs = self._ambiguous_outputs or {}, None
        reached = _graph_nodes(tensors_of(roots)) if trained and outputs else None
        for key in self._ambiguous:
            samples, nodes = outputs.get(key, (0, None))
            if reached is not None and nodes is not None:
                trains = any(id(node) in reached for node in nodes)
                if not trains:
                    self._act_grad_samples = max(0, self._act_grad_samples - samples)
            else:
                trains = trained
            self._trains_at_env_batch[key] = trains
        self._ambiguous.clear()

    def _note_ambiguous_output(self, module: Any, result: Any, act_samples: int) -> None:
        """Hold the autograd nodes of an ambiguous forward's outputs until it is resolved, with
        the samples it added to _act_grad_samples."""
        if self._ambiguous_outputs is None:
            self._ambiguous_outputs = {}
        samples, nodes = self._ambiguous_outputs.get(id(module), (0, []))
        nodes.extend(t.grad_fn for t in tensors_of((result,)) if t.grad_fn is not None)
        self._ambiguous_outputs[id(module)] = (samples + act_samples, nodes)

    def _forward_phase(self, module: Any, batch: int | None, grad: bool, goes_on: bool) -> str:
        """The phase of an outermost module call on ``batch`` (None: no tensor input), ``grad``:
        grad mode on and not inference mode, ``goes_on``: part of the open update (before its
        optimizer step, or on its draw after it: archsim.capture.learner_markers)."""
        if goes_on:
            phase = "train_forward"
        elif self.env_batch is not None and batch is not None:
            # any env's batch: a loop that evaluates on a single env between its vector env's
            # steps acted at 4 after an evaluation, before its next step, and opened a learner step
            phase = "act" if batch in self.env_batches else "train_forward"
            if phase == "act" and grad:
                # acting with grad on (CleanRL's DQN), or training at the env's batch
                self._ambiguous.add(id(module))
                if self._trains_at_env_batch.get(id(module)):
                    phase = "train_forward"
        else:
            phase = "train_forward" if grad else "act"
        return phase

    def _wrap_module_call(self, original: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        def call(module: Any, *args: Any, **kwargs: Any) -> Any:
            if (
                self._depth or _get_ident() != self._thread
            ):  # nested (submodules): as fast as can be
                return original(module, *args, **kwargs)
            # read once per call: the hot path of every outermost forward
            if self._round:
                self.close_round()
            batch = self._batch_of(module, args, kwargs)
            grad = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
            stepped = self._learner is not None and self._learner_stepped
            inputs = tensors_of((*args, *kwargs.values())) if stepped else None
            goes_on = self._learner is not None and (not stepped or self.same_draw(inputs or []))
            phase = self._forward_phase(module, batch, grad, goes_on)
            if phase == "train_forward":
                if not goes_on:  # a new update (a stepped one ends): it trains on this batch
                    self._close_learner()
                    self.learner_batch = batch or self.learner_batch
                if inputs is None:
                    inputs = tensors_of((*args, *kwargs.values()))
            result = self._marked(phase, original, (module, *args), kwargs)
            act_samples = (batch or 1) if phase == "act" and grad else 0
            # its graph may be what the next backward trains (LearnerMarking._note_backward)
            self._act_grad_samples += act_samples
            if grad and id(module) in self._ambiguous:
                self._note_ambiguous_output(module, result, act_samples)
            if phase == "train_forward":
                if grad and self._learner is not None:
                    self._forward_max = max(self._forward_max, batch or 0)
                self.note_draw([*(inputs or ()), *tensors_of((result,))])
            return result

        return call
