"""The FB-float loop with every training step as call lists: the state on the device, the update on the PE.

:class:`FbListTrainer` is :class:`codesign.loops.fb.FbMlpTrainer` whose
steps run as the lists of :func:`codesign.step.fpmac_array.lists.step_lists`
on a *shell* (the golden shell model on the desktop, a board's fpmac_array
IP). Weights, biases and velocities live in the arena as container words
from the start and are never read back during training; per step the host

1. writes the batch (rounded to the FB once, as the loop does; unless it
   wrote it beside the step before: then the forward runs on it at once and
   the batch is checked beside it, :meth:`~codesign.loops.common.StateOnDevice._checked_forward`)
   and the three SGD scalars (weight decay, momentum, minus the scheduled
   learning rate, each rounded to the FB) and flushes them;
2. runs the forward list, reads the logits, computes the loss's gradient
   in float64 as the loop does, writes the gradient rounded to the FB and
   flushes it;
3. runs the backward list (gradients, mask, momentum SGD on the PE), which
   leaves the new parameters in the other phase's regions. Beside its last
   phase it takes the loss and, where the caller gives the next batch
   (``train_step(x, y, next_x=...)``; ``fit`` does), checks that batch and writes it into the
   other phase's input tiles (:attr:`~codesign.step.fpmac_array.arena.FbArena.inputs`),
   which no list of this step reads; the next step takes it where its batch
   is that one bit for bit at the same FB (a :class:`StagedBatch`).

On several fpmac_array IPs (the shell's ``ip_count``) the forward is a phase
of lists and the backward two, each phase's lists side by side
(:mod:`codesign.step.share`): the same results, bit for bit.

Evaluation, the FB rule and :meth:`read_weights` read the parameters back
(once an epoch, not a step) and run the loop's own code, so a run equals the
loop's bit for bit in every state word and every loss
(``tests/loops/test_fb_lists.py``).

A shell is any object with ``run_phase(phase, arena, beside=None) -> arena``
(``phase``: ``[(pe, calls)]``; ``beside``: host work it runs once while the
phase's lists compute), ``arena(lists, key)`` (the arena the object's ``arena``
image describes, kept under ``key``), ``flush(arena, ranges)`` and
``invalidate(arena, ranges)`` (word ranges ``(start, words)``),
``ip_count(pe)`` and ``specs["fpmac_array"]``, the IPs' build.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from codesign.loops.common import HwTrainError, StagedBatch, StateOnDevice, cross_entropy_of, softmax_gradient
from codesign.loops.fb import FbMlpTrainer, HwTrainSetup
from codesign.step.fpmac_array.lists import PE, FbStepLists, step_arena, step_lists



class FbListTrainer(StateOnDevice, FbMlpTrainer):
    """:class:`FbMlpTrainer` whose steps run as call lists on ``shell`` (see the module docstring)."""

    def __init__(self, setup: HwTrainSetup, shell) -> None:
        super().__init__(setup)
        spec = shell.specs.get(PE) if hasattr(shell, "specs") else None
        if spec != setup.spec:
            raise HwTrainError(f"the shell's {PE} build {spec} is not the set-up's {setup.spec}")
        self.shell, self.copies = shell, shell.ip_count(PE)
        self.layout = step_arena(setup.spec, setup.layers, setup.batch_size, self.copies)
        self.device = shell.arena(self.layout, key=("fb", setup.layers, setup.batch_size))
        self.phase = 0  # the regions holding the current P and V (the update writes the other phase's)
        self.list_steps = self.lists_built = 0
        self._built: Dict[Tuple[int, int, int], FbStepLists] = {}
        self._stale = False  # the host's copy of the state is older than the arena's
        self._scalars: Tuple = ()  # (FB, weight decay, momentum, -learning rate) the arena's scalar words hold
        self._staged: StagedBatch | None = None  # the next batch, written beside the last step
        self.inputs_staged = 0  # steps whose batch was written beside the step before
        self.beside_seconds: Dict[Tuple[int, int], float] = {}
        self._push()

    # -- the state between host and arena

    def _push(self) -> None:
        """The host's state into the current phase's regions (at the start, and after ``load_weights``)."""
        ranges = self.layout.write_params(self.device, self.phase, self.weights, self.biases, self.velocity)
        self.shell.flush(self.device, ranges)
        self._stale = False

    def _pull(self) -> None:
        """The arena's state into the host's copy, when a step has changed it since the last pull."""
        if not self._stale:
            return
        self.shell.invalidate(self.device, self.layout.param_ranges(self.phase))
        state = self.layout.read_params(self.device, self.phase)
        self.weights, self.biases, self.velocity = state["weights"], state["biases"], state["velocity"]
        self._stale = False

    def load_weights(self, state: Dict[str, Any]) -> None:
        self._pull()
        super().load_weights(state)
        self._push()

    # -- the step

    def lists(self, n: int) -> FbStepLists:
        """This step's lists for ``n`` rows: built once per rows, FB and phase."""
        return self._kept_lists((n, self.fb, self.phase), lambda: step_lists(self.layout, n, self.fb, self.phase,
                                                                           self.copies))

    def train_step(self, x, y, *, next_x=None) -> float:
        """One SGD step on a batch as call lists; returns the batch's mean cross-entropy (float64). ``next_x``: the
        batch the next call takes, if known, which the host writes while this step's last lists compute."""
        self.beside_seconds = {}
        layout = self.layout
        x, y, lists = self._checked_forward(
            x, y, key=(self.fb, self.phase), check=lambda x, y: self._batch(x, y, self.setup.batch_size),
            lists_for=self.lists, write=lambda x: layout.inputs[self.phase].write(self.device, self.to_words(x)),
            before=self._write_scalars)
        n = x.shape[0]
        logits_at = layout.logits
        self.shell.invalidate(self.device, logits_at.ranges(n))
        dz, chosen = softmax_gradient(self.to_values(logits_at.read(self.device, n)), y)
        self.shell.flush(self.device, layout.dz[-1].write(self.device, self.to_words(dz)))
        loss = self._run_backward(lists.backward_phases, lambda: cross_entropy_of(chosen), next_x,
                                  first=len(lists.forward_phases))
        self.phase = 1 - self.phase
        self._stale = True
        self.gemm.macs[self.fb] += lists.macs
        self.step += 1
        self.list_steps += 1
        return loss

    def _write_scalars(self) -> list:
        """The update's scalars (weight decay, momentum, minus the rate) as container words at the FB, where they
        moved since they were last written (with the FB and the rate's schedule, not every step): the ranges to
        flush."""
        scalars = (self.fb, self.setup.weight_decay, self.setup.momentum, -self.learning_rate())
        if scalars == self._scalars:
            return []
        ranges = self.layout.write_scalars(self.device, [self.to_words(value) for value in scalars[1:]])
        self._scalars = scalars
        return ranges

    def _stage(self, next_x) -> None:
        """Beside the step's last lists: the next batch checked (a copy of its own; labels are not known yet, so
        class 0 stands in) and written at the FB into the other phase's input tiles, the next step's; nothing staged
        for a batch that fails the check, which the next step then reports."""
        try:
            x = np.array(next_x, dtype=np.float64)
            x, _ = self._batch(x, np.zeros(len(x), np.int64), self.setup.batch_size)
        except Exception:  # whatever fails (a tensor that needs grad, ...), its own step says why
            return
        phase = 1 - self.phase
        self.shell.flush(self.device, self.layout.inputs[phase].write(self.device, self.to_words(x)))
        self._staged = StagedBatch(x=x, key=(self.fb, phase))


__all__ = ["FbListTrainer"]
