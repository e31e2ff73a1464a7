"""The compressed (CSB) MLP loop with every fixed-point step as call lists: the state on the device, UPD on the PE.

:class:`CsbListTrainer` is :class:`codesign.loops.csb.CsbMlpTrainer` whose fixed-point steps run as the lists of
:func:`codesign.step.csb.lists.step_lists` on a *shell* (the golden shell model on the desktop, a board's csb IP).
The float warm-up and the pruning search run on the host as in the loop. At the pruning event the trainer builds
the arena for the kept structure and encodes every layer once: index bytes, 8-bit weights and 24-bit buffer words
go to the device and are never re-encoded by the host while the structure stands. Per step the host

1. writes the batch's 8-bit codes (rounded once, as the loop rounds them) and flushes them, unless it wrote them
   beside the step before: then the forward runs on those codes at once and the batch is checked beside it
   (:meth:`~codesign.loops.common.StateOnDevice._checked_forward`);
2. runs the forward list. On a build with the LOSS unit (:func:`~codesign.step.csb.arena.loss_on_pe`) it has
   written each lane chunk's labels and the LOSS calls' ``P`` beside (or before) it, and the backward list starts
   with LOSS on the PE; else it reads the last layer's accumulators, computes the loss gradient's codes as the
   loop does (:mod:`codesign.loops.loss_codes`), writes and flushes them;
3. runs the backward list (gradients, the mask, UPD and the new weights' top bytes, all on the PE), which leaves
   the new buffers in the other phase's slots. Beside its last phase it takes the loss (from the logits, read
   back there where the PE computed the codes), works out the next
   step's rate exponents and UPD fields (:meth:`CsbListTrainer._prepare_next`) and, where the caller
   gives the next batch (``train_step(x, y, next_x=...)``; ``fit`` does), checks that batch and writes its
   codes into the input tiles of the other phase (:attr:`~codesign.step.csb.arena.CsbArena.inputs`), which no
   list of this step reads; the next step takes them where its batch is that one bit for bit (a
   :class:`StagedBatch`).

On several csb IPs (the shell's ``ip_count``) the forward is a phase of lists and the backward two, each phase's
lists side by side (:mod:`codesign.step.share`): the same results, bit for bit.

Evaluation and :meth:`read_weights` read the buffers back (once an epoch, not a step) and run the loop's own code,
so a run equals the loop's bit for bit in every state word and every loss (``tests/loops/test_csb_lists.py``).
The lists are kept per (samples, UPD shifts, phase); a scheduled learning rate changes the shifts only where its
power of two moves.

A shell is any object with ``run_phase(phase, arena, beside=None) -> arena`` (``beside``: host work it runs once
while the phase's lists compute), ``arena(lists, key)``, ``flush(arena, ranges)``,
``invalidate(arena, ranges)`` (word ranges ``(start, words)``), ``ip_count(pe)`` and ``specs["csb"]``, the IPs'
build.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Tuple

import numpy as np

from codesign.loops.common import HwTrainError, StagedBatch, StateOnDevice
from codesign.loops.csb import BUFFER_EXTRA_BITS, CsbMlpTrainer, CsbTrainSetup, learning_rate_exponent, quantize
from codesign.loops.loss_codes import gradient_codes, loss_config, loss_of
from codesign.pe.csb import golden
from codesign.pe.csb.loss import param_word
from codesign.step.csb.lists import PE, CsbStepLists, CsbStepScales, step_arena, step_lists

_ARENAS = itertools.count()  # one arena key per pruning event (or state loaded)


def check_list_spec(spec) -> None:
    """Refuse, before anything is written, a CSB build the step lists cannot run (see
    :func:`codesign.step.csb.arena.build_arena`)."""
    if spec.block_rows != spec.block_cols or spec.batch > spec.block_cols:
        raise HwTrainError(f"the CSB step lists need square blocks and at most block_cols batch lanes, got "
                           f"{spec.block_rows} x {spec.block_cols} blocks and {spec.batch} lanes")
    if spec.block_rows * spec.batch % (4 * spec.parts):
        raise HwTrainError(f"a tile of {spec.block_rows} channels x {spec.batch} lanes of codes does not fill whole "
                           f"{spec.stream_bits}-bit beats: more lanes or a narrower stream")


def arena_batch(trainer, x, y) -> Tuple[Any, Any]:
    """A compressed list trainer's fixed-point batch ``(x, y)`` checked as its loop checks one, and refused past
    the arena's samples."""
    x, y = trainer._batch(x, y)
    if x.shape[0] > trainer.setup.batch_size:
        raise HwTrainError(f"batch of {x.shape[0]} samples: the arena holds {trainer.setup.batch_size}")
    return x, y


def list_step_batch(trainer, x, y) -> Tuple[Any, Any, int, Tuple[int, ...], Tuple[Tuple[int, bool], ...]]:
    """:func:`arena_batch`'s ``(x, y)``, its samples, and the step's rate exponents and UPD fields
    (:func:`upd_fields`)."""
    x, y = arena_batch(trainer, x, y)
    used, upd = upd_fields(trainer.frac_bits, learning_rate_exponent(trainer.learning_rate()))
    return x, y, x.shape[0], used, upd


def upd_fields(frac_bits, exponent: int) -> Tuple[Tuple[int, ...], Tuple[Tuple[int, bool], ...]]:
    """Per layer the exponent the loop uses (capped so that UPD's shift <= 31) and UPD's shift and LEFT flag:
    where the loop shifts the gradient left by ``-s`` before a shift-0 update, LEFT does it on the PE (shifts past
    31 saturate every non-zero gradient, as 31 does)."""
    used, fields = [], []
    for fb in frac_bits:
        grad_frac, buffer_frac = fb["activation"] + fb["error"], fb["weight"] + BUFFER_EXTRA_BITS
        capped = min(exponent, golden.MAX_SHIFT + buffer_frac - grad_frac)
        shift = grad_frac + capped - buffer_frac
        used.append(capped)
        fields.append((shift, False) if shift >= 0 else (min(-shift, golden.MAX_SHIFT), True))
    return tuple(used), tuple(fields)


class CsbListTrainer(StateOnDevice, CsbMlpTrainer):
    """:class:`CsbMlpTrainer` whose fixed-point steps run as call lists on ``shell`` (see the module docstring)."""

    def __init__(self, setup: CsbTrainSetup, shell) -> None:
        spec = shell.specs.get(PE) if hasattr(shell, "specs") else None
        if spec != setup.spec:
            raise HwTrainError(f"the shell's {PE} build {spec} is not the set-up's {setup.spec}")
        check_list_spec(setup.spec)
        super().__init__(setup)
        self.shell, self.copies = shell, shell.ip_count(PE)
        self.layout = self.device = None
        self.buffer_phase = 0  # the slots holding the current buffer words (UPD writes the other phase's)
        self.list_steps = self.lists_built = 0
        self._built: Dict[Tuple[Any, ...], CsbStepLists] = {}
        self._stale = False  # the host's copy of the buffers is older than the arena's
        self._staged: StagedBatch | None = None  # the next batch, its codes written beside the last step
        self.inputs_staged = 0  # list steps whose batch was written beside the step before
        self.beside_seconds: Dict[Tuple[int, int], float] = {}
        self._upd: dict = {}  # UPD's fields per rate exponent, at this structure's fractions (_upd_fields)
        self._prepared: Tuple[Any, Any] = (None, None)  # ((step, steps an epoch), its fields): _step_fields
        self._loss_tiles: dict = {}  # per samples: the logits' AccTiles
        self._loss_fracs: dict = {}  # the loss codes' fraction bits (gradient_codes' keywords)

    # -- the state between host and arena

    def _set_fixed(self, masks, dense_buffers, frac_bits) -> None:
        """The loop's switch to fixed point, then the one encoding of this structure into a new arena."""
        super()._set_fixed(masks, dense_buffers, frac_bits)
        layout = step_arena(self.spec, self.setup.layers, self.setup.batch_size, self._structure)
        for layer, (structure, words) in enumerate(zip(self._structure, self.buffers)):
            layout.write_state(layout.image, layer, structure, words, 0)
        self.layout, self.buffer_phase, self._built, self._stale, self._staged = layout, 0, {}, False, None
        self._upd, self._prepared, self._loss_tiles = {}, (None, None), {}
        fb = self.frac_bits[-1]
        self._loss_fracs = {"logit_frac": fb["weight"] + fb["activation"], "error_frac": fb["error"]}
        nnz = [int(structure.nnz) for structure in self._structure]
        self._kept_weights = (sum(nnz), sum(nnz[1:]))  # every layer's, and past the first (EB's)
        self.device = self.shell.arena(layout, key=("csb", self.setup.layers, self.setup.batch_size, next(_ARENAS)))

    def _pull(self) -> None:
        """The arena's buffer words into the host's copy, when a step has changed them since the last pull."""
        if not self._stale:
            return
        layout, phase = self.layout, self.buffer_phase
        ranges = [r for layer in range(len(self.shapes)) for r in layout.buffer_ranges(layer, phase)]
        self.shell.invalidate(self.device, ranges)
        self.buffers = [layout.read_buffer(self.device, layer, phase) for layer in range(len(self.shapes))]
        self._stale = False

    def load_weights(self, state: Dict[str, Any]) -> None:
        self._pull()
        super().load_weights(state)

    # -- the step

    def lists(self, n: int, upd) -> CsbStepLists:
        """This step's lists for ``n`` samples: built once per samples' chunks, UPD shifts and phase."""
        classes = self.classes if self.layout.loss_in else 0
        return self._kept_lists((self.layout.chunks_of(n), upd, self.buffer_phase), lambda: step_lists(
            self.layout, n, CsbStepScales.of(self.frac_bits, upd, classes), self.buffer_phase, copies=self.copies))

    def _upd_fields(self, exponent: int) -> Tuple[Tuple[int, ...], Tuple[Tuple[int, bool], ...]]:
        """:func:`upd_fields` at this structure's fractions, kept per rate exponent (a schedule moves it seldom)."""
        kept = self._upd.get(exponent)
        if kept is None:
            kept = self._upd[exponent] = upd_fields(self.frac_bits, exponent)
        return kept

    def _step_fields(self, step: int) -> Tuple[Tuple[int, ...], Tuple[Tuple[int, bool], ...]]:
        """:meth:`_upd_fields` at step ``step``'s learning rate: prepared beside the step before
        (:meth:`_prepare_next`), else computed (a schedule's cosine and logarithm a step's start would wait on)."""
        key = (step, self.steps_per_epoch)
        if self._prepared[0] == key:
            return self._prepared[1]
        fields = self._upd_fields(learning_rate_exponent(self.learning_rate(step)))
        self._prepared = (key, fields)
        return fields

    def _prepare_next(self) -> None:
        try:
            self._step_fields(self.step + 1)
        except Exception:  # a rate the next step refuses (past the schedule's end): it computes it and says why
            pass

    def train_step(self, x, y, *, next_x=None) -> float:
        """One SGD step (float64 on the host in the warm-up; call lists after); returns the loss. ``next_x``: the
        batch the next call takes, if known, whose codes the host writes while this step's last lists compute."""
        self.beside_seconds = {}
        if self.phase == "warmup":
            return super().train_step(x, y)
        used, upd = self._step_fields(self.step)
        fb, layout = self.frac_bits, self.layout
        x, y, lists = self._checked_forward(
            x, y, key=(fb[0]["activation"], self.buffer_phase), check=self._checked_batch,
            lists_for=lambda n: self.lists(n, upd),
            write=lambda x: layout.write_codes(self.device, layout.inputs[self.buffer_phase],
                                               quantize(x, fb[0]["activation"])))
        n = x.shape[0]
        loss = self._run_backward(lists.backward_phases, self._loss_codes(n, y), next_x,
                                  first=len(lists.forward_phases))
        self.buffer_phase, self._stale = 1 - self.buffer_phase, True
        self.lr_exponents.extend(used)
        kept, past_first = self._kept_weights
        for op, count in (("FP", n * kept), ("EB", n * past_first), ("WG", n * kept), ("UPD", kept)):
            self.backend.macs[op] += count
        self.fixed_steps += 1
        self.step += 1
        self.list_steps += 1
        return loss

    def _checked_batch(self, x, y) -> Tuple[Any, Any]:
        """:func:`arena_batch`'s ``(x, y)``; on a build with the LOSS unit each lane chunk's labels and the LOSS
        calls' ``P`` written and flushed too (where the step before staged the batch, beside the forward's lists;
        no list before the backward reads them)."""
        x, y = arena_batch(self, x, y)
        if self.layout.loss_in:
            n = x.shape[0]
            config = loss_config(n, self.classes, self._loss_fracs["logit_frac"], self._loss_fracs["error_frac"])
            param = param_word(recip_shift=config.recip_shift, batch=n)
            self.shell.flush(self.device, self.layout.write_loss_inputs(self.device, y, param))
        return x, y

    def _logit_tiles(self, n: int):
        """The logits' accumulator tiles for ``n`` samples (:meth:`~codesign.step.csb.arena.CsbArena.acc_tiles`),
        kept per samples."""
        kept = self._loss_tiles.get(n)
        if kept is None:
            kept = self._loss_tiles[n] = self.layout.acc_tiles(self.layout.z[-1], n, self.classes)
        return kept

    def _loss_codes(self, n: int, y) -> Callable[[], float]:
        """Between the forward and the backward, on a build without the LOSS unit: the logits' accumulators read,
        the loss gradient's codes written into the last layer's error tiles and flushed (every IP waits on this).
        Returns the step's loss, taken beside the backward's last lists (where the PE computed the codes, from the
        logits read back there: the backward does not change them)."""
        accs, logit_frac = self._logit_tiles(n), self._loss_fracs["logit_frac"]

        def logits() -> np.ndarray:
            self.shell.invalidate(self.device, accs.ranges)
            return accs.read(self.device)

        if self.layout.loss_in:
            return lambda: loss_of(logits(), y, logit_frac=logit_frac)
        z = logits()
        ranges = self.layout.write_codes(self.device, self.layout.dy[-1], gradient_codes(z, y, **self._loss_fracs))
        self.shell.flush(self.device, ranges)
        return lambda: loss_of(z, y, logit_frac=logit_frac)

    def _stage(self, next_x) -> None:
        """Beside the step's last lists: the next batch checked (a copy of its own) and its codes written into the
        input tiles of the other buffer phase, the next step's; nothing staged for a batch that fails the check or
        does not fit the arena, which the next step then reports."""
        try:
            x, _ = self._batch(np.array(next_x, dtype=np.float64))
        except Exception:  # whatever fails (a tensor that needs grad, ...), its own step says why
            return
        if x.shape[0] > self.setup.batch_size:
            return
        phase, frac = 1 - self.buffer_phase, self.frac_bits[0]["activation"]
        self.shell.flush(self.device, self.layout.write_codes(self.device, self.layout.inputs[phase],
                                                              quantize(x, frac)))
        self._staged = StagedBatch(x=x, key=(frac, phase))


__all__ = ["CsbListTrainer", "check_list_spec", "upd_fields"]
