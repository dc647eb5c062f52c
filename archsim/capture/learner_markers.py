"""Learner steps of ``archsim capture run``'s AutoMarker (archsim.capture.auto_markers): a backward
adds its batch to the open learner step, an ``Optimizer.step`` (torch's global hooks) closes it, and
its batch and samples are counted as it closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from archsim.capture import markers

_get_ident = threading.get_ident


class LearnerMarking:
    """Mixin of AutoMarker: closes learner steps at optimizer steps and counts their samples."""

    # set by AutoMarker
    _thread: int
    _depth: int
    _learner: Any
    _learner_batch: tuple[int, bool]
    _learner_trained: bool
    _backward_samples: int
    _forward_max: int
    _opt_stack: list[Any]
    _workers: Any
    counts: Any
    seen_learner: bool
    _begin: Callable[..., None]
    _outermost: Callable[[], bool]

    def _close_learner(self) -> None:
        if self._learner is not None:
            learner, self._learner = self._learner, None
            batch, training = self._learner_batch
            if self._backward_samples and self._backward_samples != batch:
                batch = self._backward_samples  # measured over its micro-batches
                markers.step_batch(batch)
            learner.__exit__(None, None, None)
            if self._learner_trained:  # a forward alone (a shape probe at init) updates nothing
                self.counts.learner_steps += 1
                self.counts.samples += batch
                self.counts.samples_training += batch if training else 0

    def _note_backward(self) -> None:
        """A backward ended: it trained on the largest batch of the grad-on train forwards since
        the previous one (not their sum: DQN's online and target nets, SAC's twin critics and a
        recurrent net's per-time-step calls see the same samples), and a learner step's batch is
        the sum over its backwards (4 accumulated micro-batches of 8 make 32). A step whose
        backwards saw no such forward (A2C's loss from its acting forwards, SAC's temperature)
        keeps its first forward's or replay sample's batch."""
        self._backward_samples += self._forward_max
        self._forward_max = 0

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if _get_ident() != self._thread:  # a learner thread: counted, so the refusal can say so
            self.counts.other_thread_optimizer_steps += 1
        if not self._outermost():
            self._opt_stack.append(None)
            return
        self._begin("optimizer_step")
        self._depth += 1
        marker = markers.phase("optimizer_step")
        marker.__enter__()
        self._opt_stack.append(marker)

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        marker = self._opt_stack.pop() if self._opt_stack else None
        if marker is None:
            return
        marker.__exit__(None, None, None)
        self._depth -= 1
        self._learner_step_done()

    def _learner_step_done(self) -> None:
        """An optimizer step ended: it closes the learner step, and training has started."""
        self._close_learner()
        if not self.seen_learner and self._workers is not None:
            self._workers.learning_started()
        self.seen_learner = True
