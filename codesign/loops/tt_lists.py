"""The golden TT loop with every layer step as call lists: the step on the PL, the host left with the loss and Adam.

:class:`TtListTrainer` is :class:`codesign.loops.tt.TtMlpTrainer` taking each
training step as paper 003 runs it: each layer's forward and backward
contractions as the call lists of :func:`codesign.step.tt.step_lists.step_lists`,
run by a *shell* (the golden shell model on the desktop, the IPs of a
board), every intermediate tensor rounded on the PE at its tracked scale.
The host quantises the input batch and the output gradients, adds the
bias, applies ReLU and its derivative, takes the loss, reads the records'
sums to move the scales on, and runs Adam and the prior as the loop does.

The host works while the IPs compute where the data allow. Under the tracked
rule a tensor is rounded at the scale its tracker holds, so a layer's scales,
lists and core codes are known before its input, and only the next step's
scales wait for a tensor's mean |x|:

- before a step's first list the host writes only the codes of the cores
  the first phase reads (where the batch was staged); beside that phase,
  which takes no other work where at least two others are left, it checks
  the other cores' codes written the step before (writing changed ones
  again), and beside a later phase it makes the layer's state and book;
- beside a layer's longest forward phase, the next layer's cores are quantised,
  its lists taken (re-aimed where a scale moved) and its core codes written;
- beside the longest backward phase of the layer below, a layer's core
  gradients, records and update run (only its input gradient is waited for);
  the first layer's update ends the step, so beside its own second last phase
  the host reads what the phases before that wrote, updates those cores and
  the bias and writes the cores' next codes (that phase reads only the core
  whose input gradient it takes), beside its last the rest but the last
  phase's core, and those cores' codes (the last phase reads none), and after
  it only the last phase's core and tracker;
- each bias is quantised beside the forward phases of the layer below (the
  first layer's beside its own), its gradient taken beside the backward ones
  (both need neither input nor result);
- the loss itself is taken beside the last layer's longest backward phase:
  the backward waits only for its gradient;
- given the batch the next call takes (``next_x``), the host checks it, takes
  its mean |x| and its codes beside the first layer's next longest backward
  phase and writes them into the rows only the forward reads, so the next step
  starts its lists on those codes at once and checks its batch against the
  staged one while they compute (a batch that is not the one staged has its
  first layer's forward run again on its own codes); the first core's gradient
  reads a copy of its own, which the host writes beside the first phase;
- between two layers' lists, where the float32 hand-off allows it, the host
  writes the receiving layer's codes rounded straight from the sums
  (:mod:`codesign.loops.tt_hand_off`) and works out the values the loop hands
  on beside the receiving layer's lists;
- beside the next longest phase after those (the longest where none is
  taken), the first layer's input tracker moves on in its forward, each
  output-gradient tracker in its backward; a hidden layer's input tracker in
  its update, and where its input gradient passes beside its backward (its
  forward phases are short).

A step that fails on the way changes no state (cores, biases, Adam's moments,
the prior's λ, trackers, means).

Only the tracked scale rule lets a PE round before the tensor is whole, and
only after every scale was aimed once: the first step (and a step after
rank pruning, which leaves scales set) with an unset tracker runs the loop's
own step on the host. Every other step is equal, bit for bit, to the loop's
(``tests/loops/test_tt_lists.py``).

A shell is any object with ``run_phase(phase, arena, beside=None) -> arena`` (a phase's
lists, ``(pe, calls)`` each, ``pe`` "tt1" or "tt2", which write disjoint words,
read none another writes and may run side by side; ``arena`` uint32 words;
``beside``: the host's work to run between the IPs' starts and the wait,
which writes no word the phase reads), ``arena(lists, key)`` (the arena a built
:class:`~codesign.step.tt.step_lists.StepLists` runs in: a copy of its
image, or a device buffer kept under ``key``, which lists of equal layout
share), ``flush(arena, ranges)`` and
``invalidate(arena, ranges)`` (word ranges ``(start, words)`` the host wrote
or will read), the two PE builds as ``spec1``/``spec2``, ``copies`` (the IPs of each a phase's lists
are shared among) and ``share_products`` (the fewest products a shared list takes,
:func:`codesign.step.tt.step_lists.share`), and may have ``held_sums`` (``{pe: bool}``: whether the shells of
that PE's IPs keep the accumulation buffer; all do where it is absent): lists that hold sums on IPs without it
are refused as they are built, before anything is written.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from functools import lru_cache, partial
from typing import Callable, Dict, Sequence, Tuple

import numpy as np

from codesign.loops.common import HwTrainError, cross_entropy_of, softmax_gradient
from codesign.loops.tt import TtMlpTrainer, TtTrainSetup
from codesign.loops.tt_hand_off import Handed, hand_backward, hand_forward, hand_forward_early, resolved
from codesign.loops.tt_list_input import ListInputs
from codesign.loops.tt_list_prep import Prepared, StagedInput, list_fracs, same_bits
from codesign.loops.tt_update import slice_lambdas, slice_squares
from codesign.numerics.scales import UNSET
from codesign.step.tt.rounding import code_dtype, frac_of_values, quantize_values
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.list_finish import bias_gradient, bias_values, finish, input_grad, layer_output, read_early
from codesign.step.tt.list_layout import flat_cores
from codesign.step.tt.step_lists import Fracs, check_specs, reshift, step_lists

ON_PES = ("act_frac_bits", "grad_frac_bits", "core_grad_frac_bits")  # the trackers a PE rounds at
_ARENAS = itertools.count()  # one token per trainer in its arenas' keys
KEPT_AIMS = 8  # lists kept per layer and shapes, at the latest distinct tracked scales


class TtListTrainer(ListInputs, TtMlpTrainer):
    """:class:`TtMlpTrainer` whose steps run as call lists on ``shell`` (see the module docstring)."""

    def __init__(self, setup: TtTrainSetup, shell) -> None:
        super().__init__(setup)
        if setup.precision["scale_rule"] != "tracked":
            raise HwTrainError("a step as call lists needs precision.scale_rule = 'tracked' (a PE rounds at a "
                               "scale known before the step)")
        if setup.precision["core_grad_route"] != "direct":
            raise HwTrainError("the step's call lists take the direct core-gradient route (core_grad_route = "
                               "'direct'); the dense route runs on the loop's own steps")
        self.lanes = check_specs(shell.spec1, shell.spec2)
        self.shell = shell
        self.list_steps = self.lists_built = self.lists_reshifted = 0
        self._built: dict = {}
        self.current_lists: dict = {}  # layer index -> the lists its last step ran
        # (layer, phase) -> seconds of host work the last step did while that phase's lists computed
        self.beside_seconds: dict = {}
        self._staged: StagedInput | None = None
        self.inputs_staged = 0  # list steps whose input batch was staged beside the step before
        # layers' results handed on as the receiving layer's codes, written straight from sums (a failed step's too)
        self.handed_on = 0
        self._arena_token = next(_ARENAS)  # trainers sharing a shell never share an arena
        # the first layer's cores whose next codes the last step wrote beside its last phases: the arena, and per
        # core a copy of the values written and their scale (taken only where the core is still those values)
        self._written_early: Tuple[object, dict] | None = None

    def _ready(self) -> bool:
        return all(v != UNSET for trackers in self.trackers for name in ON_PES for v in trackers[name])

    def train_step(self, x, y, *, next_x=None) -> float:
        self.beside_seconds = {}
        if not self._ready():
            self._staged = None
            return super().train_step(x, y)
        x, y = self._batch(x, y)
        staged = self._staged is not None and np.shape(x) == self._staged.x.shape  # a staged batch of its shape
        layers, prepared, ahead = [], self._prepare(0, x.shape[0], deferred=staged), {}
        for index in range(len(self.cores)):
            layer, prepared = self._forward_layer(index, x, prepared, ahead)
            layers.append(layer)
            # a hidden layer's output goes on before its ReLU, which the next layer's codes take (written by the
            # layer itself where it rounds them straight from its sums: a Handed)
            x = layer[-1]
        grad, chosen = softmax_gradient(x, y)  # the logits widened to float64 there
        grad, taken = grad.astype(x.dtype, copy=False), {}  # the hand-off type, as the loop's
        kept = self._kept_state()
        try:
            rates, rest = self._begin_update(), None
            for index in range(len(self.cores) - 1, -1, -1):
                # the layer above's host work but its input gradient runs while this layer's lists compute (beside
                # the last layer's, the loss), and beside the first layer's, the next batch is staged
                works = [lambda: taken.update(loss=cross_entropy_of(chosen))] if rest is None else [rest]
                if index == 0 and next_x is not None:
                    works.append(lambda: self._stage_input(next_x, layers[0][0], layers[0][3], layers[0][5]))
                # the input gradient comes masked: where the input saturated and where the ReLU below cut
                rest, grad = self._backward_layer(index, layers[index], grad, rates, beside=works,
                                                  below=layers[index - 1] if index else None)
            rest()
        except BaseException:
            self._restore_state(kept)
            raise
        self.step += 1
        self.list_steps += 1
        return taken["loss"]

    def _kept_state(self) -> tuple:
        """What a step's updates change, as it was (the updates make new arrays, so references do): a layer is
        updated while the layers below still run their lists, and a step that fails must change nothing."""
        return (list(self.cores), list(self.biases), list(self.lambdas), list(self.trackers), list(self.means),
                self.optimizer.snapshot())

    def _restore_state(self, kept: tuple) -> None:
        self.cores, self.biases, self.lambdas, self.trackers, self.means, optimizer = kept
        self._written_early = None  # what the failed step wrote early: the next step writes every core
        self.optimizer.restore(optimizer)

    def _prepare(self, index: int, batch: int, *, deferred: bool = False) -> Prepared:
        """What layer ``index``'s forward on ``batch`` samples needs but its input: its fractions (each tensor
        rounded at the scale its tracker holds, which the tracked rule sets before the step), its lists at them, its
        arena with every core's codes written (each core quantised at its own scale in one pass; codes only packed,
        so in their narrowest type), but those the last step wrote there beside its last phases
        (:meth:`_write_early`) of cores that still hold the values written, bit for bit, and its state and scale
        book. With ``deferred`` (the first layer at a step's start, its input staged) only the cores its first
        phase reads are checked and written before it, the others beside it (:class:`Prepared`'s ``settle``), and
        the state and book are made when first asked, beside a later phase: they took half of the 180 us before
        the first list at paper 003's rank 8."""
        tr, widths = self.trackers[index], self.setup.precision
        cores = [np.asarray(core, np.float32) for core in self.cores[index]]  # as the layer's state copies them
        core_frac = [int(frac_of_values(core, bits=widths["core_bits"], headroom_bits=widths["core_headroom_bits"],
                                        current=int(tr["core_frac_bits"][k]), update=False))
                     for k, core in enumerate(cores)]
        fracs = list_fracs({**tr, "core_frac_bits": core_frac}, widths)
        lists = self._lists(index, [core.shape for core in cores], batch, fracs)
        arena = self._arena(index, lists, cores, batch)
        written = {}
        if self._written_early is not None and self._written_early[0] is arena:
            written, self._written_early = self._written_early[1], None

        def write(into: np.ndarray, which) -> None:  # those of cores ``which`` not written as they are now
            unwritten = [k for k in which if k not in written or written[k][1] != core_frac[k]
                         or not same_bits(written[k][0], cores[k])]
            if unwritten:
                self._write_cores(into, lists, cores, core_frac, unwritten, widths["core_bits"])
        read_first = lists.cores_read_in(0) if deferred else range(len(cores))
        write(arena, read_first)
        parts = lru_cache(maxsize=None)(lambda: self._parts(index, core_frac))
        if not deferred:
            parts()
            return Prepared(parts, fracs, lists, arena)
        return Prepared(parts, fracs, lists, arena,
                        settle=lambda start: write(start, [k for k in range(len(cores)) if k not in read_first]))

    def _parts(self, index: int, core_frac: Sequence[int]) -> Tuple:
        """Layer ``index``'s state at the step's start and its scale book, its cores' trackers at ``core_frac``."""
        state = self.layer_state(index)
        book = ScaleBook(state.tracker_values(), state.mean_values(), rule="tracked", momentum=state.scale_momentum)
        book.trackers["core_frac_bits"] = list(core_frac)
        return state, book

    def _write_cores(self, arena, lists, cores: Sequence[np.ndarray], fracs: Sequence[int], which: Sequence[int],
                     bits: int) -> None:
        """The codes of cores ``which`` (of ``cores``, each at its fraction in ``fracs``) written into ``arena`` in
        every layout a PE reads them in, from one quantising pass (codes only packed, so in their narrowest
        type)."""
        chosen = [fracs[k] for k in which]  # one scale for all (a table of powers for several: the same products)
        scale = chosen[0] if len(set(chosen)) == 1 else np.repeat(chosen, [cores[k].size for k in which])
        codes = quantize_values(flat_cores([cores[k] for k in which]), scale, bits, code_dtype(bits))
        self.shell.flush(arena, lists.write(arena, core_codes=codes, cores=tuple(which)))

    def _write_early(self, index: int, state, lists, fracs: Fracs, cores: Sequence[int], phase: int) -> None:
        """Beside the first layer's backward phase ``phase``: the next step's codes of the cores Adam has updated
        (``cores``) that this step has not written yet, written into the layer's arena where neither that phase
        nor a later one reads their layouts (the last phase reads none; the one before it, only the core whose
        input gradient it takes), so that the next step writes only the rest before its first list (every core's
        took 140 of the 270 us there at paper 003's rank 16)."""
        unread = [k for k in sorted(cores) if lists.cores_unread_from(phase, (k,))]
        if not unread:
            return
        current = self.cores[index]
        arena = self._arena(index, lists, current, lists.batch)
        # what an earlier phase of this step wrote (the step's first list took any earlier step's for this arena)
        written = self._written_early[1] if self._written_early and self._written_early[0] is arena else {}
        cores = tuple(k for k in unread if k not in written)
        if not cores:
            return
        self._write_cores(arena, lists, current, fracs.core, cores, state.core_bits)
        written.update({k: (np.array(current[k]), fracs.core[k]) for k in cores})
        self._written_early = (arena, written)

    def _arena(self, index: int, lists, cores, batch: int):
        """Layer ``index``'s arena on the shell: one per trainer, layer and shapes, as lists rebuilt at other scales
        lay their tensors out alike (a scale is a descriptor's shift), so a board keeps the buffer and writes only
        the inputs into it."""
        return self.shell.arena(lists, key=(self._arena_token, index, tuple(core.shape for core in cores), batch))

    def _forward_layer(self, index: int, x, prepared: Prepared, ahead: dict) -> Tuple[Tuple, Prepared | None]:
        """Layer ``index``'s input (the batch, or the layer below's output before its ReLU: an array, or a
        :class:`Handed` where the layer below wrote its codes) written and its forward lists run (the output
        gradient's room left for later);
        while they compute, the next layer prepared and its bias quantised, this layer's bias quantised (where the
        layer below did not) and, for the first layer, its input's
        tracker moved on by its mean |x|. A hidden layer's forward phases are short (its input is the narrow
        output below), so its input's tracker moves on in its update (:meth:`_backward_layer`'s rest, beside the
        layer below's backward) and where its input gradient passes (the input within its codes' bounds, and the
        ReLU below passed) is worked out beside its backward, as ``later`` works; the output handed to it is worked
        out beside these lists. After them, the next layer's input codes are written
        (:func:`~codesign.loops.tt_hand_off.hand_forward`); where the phase before the last completes the first
        samples' output (``early_samples``), theirs beside the last.
        ``prepared``: :meth:`_prepare`'s for this layer; ``ahead``: by layer, the bias as its output adds it, where the
        layer below quantised it beside its own lists (the next layer's is taken with its :meth:`_prepare`, which it
        follows: a hidden layer's short phases would wait for it). Returns what the backward needs of this layer,
        and the next layer's :meth:`_prepare` (None for the last)."""
        fracs, lists, arena = prepared.fracs, prepared.lists, prepared.arena
        following: list = []
        beside = []
        taken: dict = {}  # the bias as the output adds it; the staged batch's check
        if index + 1 < len(self.cores):

            def prepare_next() -> None:
                following.append(self._prepare(index + 1, lists.batch))
                ahead[index + 1] = bias_values(following[0].state, following[0].book)
            beside.append(prepare_next)
        given = x
        x, x_codes, later, staged, works = self._input(index, prepared, x, taken)
        beside += works

        def bias() -> None:
            taken["bias"] = bias_values(prepared.state, prepared.book)
        if index in ahead:
            taken["bias"] = ahead[index]
        else:
            beside.append(bias)

        def first(start: np.ndarray) -> None:  # beside the first phase, on the arena it starts from
            if prepared.settle is not None:
                prepared.settle(start)
            # the first core's gradient reads the codes from a copy of its own
            self.shell.flush(start, lists.write(start, x_cg=x_codes))
        tail, early = {0: first}, []
        if index + 1 < len(self.cores) and lists.early_samples:

            def hand_early(start: np.ndarray) -> None:  # the first samples' codes beside the last phase
                state, book = prepared.parts()
                early.append(hand_forward_early(self.shell, state, lists, start, book, fracs, taken["bias"],
                                                following[0]))
            tail[lists.forward_phases - 1] = hand_early
        counted = self.runner.transactions, self.runner.macs
        # the first layer's first phase, given the cores it does not read to write, is kept for them (the state
        # made beside a later phase)
        arena = self._run(lists, range(lists.forward_phases), arena, beside=beside, tail=tail, layer=index,
                          first_alone=prepared.settle is not None)
        if staged is not None:
            if not taken.get("staged"):  # a bad batch, or another than the one staged: that forward is not counted
                self.runner.transactions, self.runner.macs = counted
                if "error" in taken:
                    raise taken["error"]
                return self._forward_layer(index, given, self._prepare(index, given.shape[0]), ahead)  # its own codes
            self.inputs_staged += 1
        part = early[0] if early else None  # the first samples' codes, written beside the last phase
        self.shell.invalidate(arena, lists.read_ranges(forward=True, samples=None if part is None else (
            lists.early_samples, lists.batch)))
        (state, book), nxt = prepared.parts(), following[0] if following else None
        out = None if nxt is None else hand_forward(self.shell, state, lists, arena, book, fracs, taken["bias"], nxt,
                                                    early=part)
        self.handed_on += out is not None
        if out is None:  # of the hand-off type, as the loop's
            out = layer_output(state, lists, arena, book, fracs, bias=taken["bias"])
        return (state, x, later, book, fracs, lists, arena, out), nxt

    def _lists(self, index: int, shapes: Sequence[Tuple[int, ...]], batch: int, fracs: Fracs):
        """Layer ``index``'s lists at these core shapes, batch and scales (:meth:`_aimed`), which its step runs."""
        lists = self.current_lists[index] = self._aimed(index, shapes, batch, fracs)
        return lists

    def _aimed(self, index: int, shapes: Sequence[Tuple[int, ...]], batch: int, fracs: Fracs):
        """Layer ``index``'s lists at these shapes and scales: built once per shapes (pruning changes them at epoch
        ends), their rounding shifts changed when a tracked scale moves (:func:`reshift`). Tracked scales wander
        among a few values, so the :data:`KEPT_AIMS` latest aims of each layer and shapes are kept: a step at
        scales seen lately takes its lists as they were, not re-aimed again (a board's shell re-aims the
        descriptors it keeps in place, rewriting only the moved rounding words)."""
        key, layer = (index, tuple(tuple(shape) for shape in shapes), batch), self.setup.layers[index]
        aims = self._built.get(key)
        lists = None if aims is None else aims.get(fracs)
        if lists is not None:
            aims.move_to_end(fracs)
        elif aims is not None:
            lists = aims[fracs] = reshift(next(reversed(aims.values())), fracs)
            self.lists_reshifted += 1
            if len(aims) > KEPT_AIMS:
                aims.popitem(last=False)
        else:
            zeros = [np.zeros(shape, np.int64) for shape in shapes]
            lists = step_lists(np.zeros((batch, layer["in_features"]), np.int64), zeros,
                               np.zeros((batch, layer["out_features"]), np.int64), fracs, spec1=self.shell.spec1,
                               spec2=self.shell.spec2, need_grad_x=not layer["is_network_input"],
                               copies=self.shell.copies, share_products=self.shell.share_products)
            self._check_held(index, lists)
            if len(self._built) >= 4 * len(self.cores):
                self._built.pop(next(iter(self._built)))
            self._built[key] = OrderedDict([(fracs, lists)])
            self.lists_built += 1
        return lists

    def _check_held(self, index: int, lists) -> None:
        held = getattr(self.shell, "held_sums", None) or {}
        for pe in ("tt1", "tt2"):
            if not held.get(pe, True) and lists.holds(pe):
                raise HwTrainError(f"layer {index}'s {pe} lists hold sums across calls (a contraction longer than "
                                   f"the PE's buffers), but the shells of the {pe} IPs have no accumulation buffer "
                                   "(held_sums): build them with it, or the PE with larger buffers")

    def _backward_layer(self, index: int, layer: Tuple, grad_y, rates: Tuple[float, float],
                        beside: Sequence[Callable[[], None]], below: Tuple | None = None
                        ) -> Tuple[Callable[[], None], object]:
        """Layer ``index``'s backward lists run (``beside``: host work for while its lists compute, as :meth:`_run`
        places it; the output gradient's tracker moves on and the bias gradient is taken after it), its input
        gradient read; returns the rest of its host work (the records, core gradients, its update and its next λ)
        as a callable, and the input gradient. The first layer's rest ends the step, so what of it the last
        phase does not feed runs beside the phases before: the other phases' core gradients and records read, and
        Adam on those cores and the bias (beside the second last phase what the ones before it wrote, with the
        bias; beside the last the rest). A hidden layer's ``later`` works (:meth:`_forward_layer`): where its input
        gradient passes, beside its backward phases, and its input's tracker, in its rest. ``grad_y``: an array, or a
        :class:`Handed` where the layer above wrote the codes; ``below``: the layer below's forward part, whose
        output-gradient codes the input gradient is rounded to (:func:`~codesign.loops.tt_hand_off.hand_backward`;
        the input gradient is then a :class:`Handed`)."""
        state, _, later, book, fracs, lists, arena, out = layer
        d, dtype = len(state.cores), code_dtype(state.grad_bits)
        if isinstance(grad_y, Handed):  # written: its integer codes and its values are the host's for later
            g_codes = lru_cache(maxsize=None)(lambda: grad_y.codes.astype(dtype))
        else:
            codes = quantize_values(grad_y, fracs.grad[d - 1], state.grad_bits, dtype)
            self.shell.flush(arena, lists.write(arena, gy=codes))
            g_codes = lambda: codes  # noqa: E731
        aim = partial(self._aim, book, "grad_frac_bits", d - 1, bits=state.grad_bits,
                      headroom_bits=state.grad_headroom_bits)  # the output gradient's tracker, beside the lists
        # what the host took beside the lists: where the input gradient passes, the bias gradient, the early cores'
        taken: dict = {"passes": None}

        def bias() -> None:
            taken["bias_grad"] = bias_gradient(state, g_codes(), book, fracs)
        works = [*beside, lambda: aim(resolved(grad_y), fracs.grad[d - 1]), bias]
        if "passes" in later:
            works.append(lambda: taken.update(passes=later["passes"]()))
        tail: dict = {}  # the first layer's update, in parts beside the phases its gradients are done by
        if index == 0:
            last = len(lists.phases) - 1
            first_part = lists.reads_ending(0, last - 1)
            if last - 1 > lists.forward_phases and first_part.cores:  # some done before the second last phase
                tail[last - 1] = partial(self._update_part, index, state, lists, book, fracs, rates, taken,
                                         first_part, last - 1)
            tail[last] = partial(self._update_early, index, state, lists, book, fracs, rates, taken)
        arena = self._run(lists, range(lists.forward_phases, len(lists.phases)), arena, beside=works, tail=tail,
                          layer=index)
        self.shell.invalidate(arena, lists.backward_reads[2 if "early" in taken else 0].ranges)
        grad_x = None if below is None else hand_backward(self.shell, state, lists, arena, fracs, taken["passes"],
                                                          below)
        self.handed_on += grad_x is not None
        if grad_x is None:
            grad_x = input_grad(state, lists, arena, fracs, inside=taken["passes"])

        def rest() -> None:
            if "aim" in later:
                later["aim"]()
            step = finish(state, None, g_codes(), lists, arena, book, fracs, y=resolved(out),
                          grad_x=resolved(grad_x), bias_grad=taken["bias_grad"], early=taken.get("early"))
            self._keep_scales(index, step)
            early = taken.get("early")  # the cores (and the bias) updated beside the last phases
            cores = [k for k in range(d) if early is None or k not in early]
            self._adam(index, cores, [step.core_grads[k] for k in cores], step.bias_grad if early is None else None,
                       rates, fracs.core)
            known = taken.get("lambdas", {})  # the ranks' next λ worked out beside the last phases, and the rest
            known.update(self._lambdas(index, [k for k in range(1, d) if k not in known], taken.get("squares")))
            if known:
                self.lambdas[index] = [known[k] for k in range(1, d)]
        return rest, grad_x

    def _lambdas(self, index: int, ranks: Sequence[int], squares: dict | None = None) -> dict:
        """The next step's λ of layer ``index``'s inner ranks ``ranks`` from its cores as they stand, by rank (none
        without the prior, which keeps them unused); ``squares``: the terms of cores already updated, taken before
        (:func:`~codesign.loops.tt_update.slice_lambdas`)."""
        if self.setup.prior_weight <= 0:
            return {}
        return dict(zip(ranks, slice_lambdas(self.cores[index], only=ranks, squares=squares)))

    def _update_part(self, index: int, state, lists, book: ScaleBook, fracs: Fracs, rates: Tuple[float, float],
                     taken: dict, reads, phase: int, arena: np.ndarray, *, with_bias: bool = True) -> None:
        """Beside backward phase ``phase``: what ``reads`` names, which the phases before it wrote, read from
        ``arena`` (core gradients, records moved into ``book``), Adam run on those cores (and, ``with_bias``, the
        bias, its gradient in ``taken``, where the core gradients gather under ``"early"``), their next codes
        written (:meth:`_write_early`) and the next λ of the ranks between cores updated so far (under
        ``"lambdas"``). Adam is element-wise, so cores updated in parts get the bits of one update."""
        self.shell.invalidate(arena, reads.ranges)
        grads = read_early(state, lists, arena, book, fracs, reads=reads)
        self._adam(index, list(grads), list(grads.values()), taken["bias_grad"] if with_bias else None, rates,
                   fracs.core)
        early, known = taken.setdefault("early", {}), taken.setdefault("lambdas", {})
        early.update(grads)
        self._write_early(index, state, lists, fracs, list(early), phase)
        known.update(self._lambdas(index, [k for k in range(1, len(state.cores)) if k not in known
                                           and k - 1 in early and k in early]))

    def _update_early(self, index: int, state, lists, book: ScaleBook, fracs: Fracs, rates: Tuple[float, float],
                      taken: dict, arena: np.ndarray) -> None:
        """Beside a layer's last backward phase: what the phases before it wrote (less what was taken beside the
        phase before, where it was, with the bias) read from ``arena`` and Adam run on those cores (and the bias,
        where not taken before) (:meth:`_update_part`: their codes and the λ of the ranks between them too) and the
        next step's lists aimed."""
        last, before = len(lists.phases) - 1, "early" in taken  # the bias updated with the part before, if any
        reads = lists.reads_ending(last - 1 if before else 0, last)
        self._update_part(index, state, lists, book, fracs, rates, taken, reads, last, arena, with_bias=not before)
        late = set(range(len(state.cores))) - set(taken["early"])  # the cores the last phase's gradients update
        if self.setup.prior_weight > 0:  # of a rank between an updated core and a late one, the updated one's term
            taken["squares"] = {(k, j): slice_squares(self.cores[index], k, j) for k in range(1, len(state.cores))
                                if {k - 1, k} & late for j in (k - 1, k) if j not in late}
        # the next step's lists at the scales as the book holds them: where the last phase's records move none,
        # the next step finds them aimed
        self._aimed(index, lists.cores, lists.batch, list_fracs(book.trackers, self.setup.precision))

    def _run(self, lists, phases: range, arena: np.ndarray, *, beside: Sequence[Callable[[], None]] = (),
             tail: Dict[int, Callable[[np.ndarray], None]] | None = None, layer: int = 0,
             first_alone: bool = False) -> np.ndarray:
        """The lists of ``phases`` (indices) on the shell, ``beside``'s first work run while the longest computes
        (the phase whose longest list has the most products), the next while the next longest does, and so on,
        works past the last with it; ``tail[i]`` while phase ``i`` computes (after its share of ``beside``),
        given the arena the phases before it left (work that reads what they wrote); the last phase, given one,
        has it alone, and so has the first with ``first_alone`` where at least two others are left to take
        ``beside``. Each phase's seconds of them kept in :attr:`beside_seconds` under ``(layer, phase)``; their
        calls and products counted as the loop's runner counts a step's (``throughput``, the history's MACs)."""
        tail = tail or {}
        ranked = sorted(phases, key=lambda index: max(lists.products[index], default=0), reverse=True)  # stable
        if phases[-1] in tail and len(ranked) > 1:  # the last phase kept for the work only it can hide
            ranked.remove(phases[-1])
        if first_alone and len(ranked) > 2:
            ranked.remove(phases[0])
        works: dict = {}
        for rank, work in enumerate(beside):
            works.setdefault(ranked[min(rank, len(ranked) - 1)], []).append(work)
        for index in phases:
            if index in tail:
                works.setdefault(index, []).append(partial(tail[index], arena))
            if index not in works:
                arena = self.shell.run_phase(lists.phases[index], arena)
            else:
                arena = self.shell.run_phase(lists.phases[index], arena,
                                             beside=self._timed(works[index], (layer, index)))
                if (layer, index) not in self.beside_seconds:
                    raise HwTrainError("the shell did not run the host's work it was given beside a phase "
                                       "(run_phase(phase, arena, beside=...) must call beside once)")
            self.runner.transactions += sum(len(calls) for _, calls in lists.phases[index])
            self.runner.macs += sum(lists.products[index])
        return arena

    def _timed(self, works: Sequence[Callable[[], None]], key: Tuple[int, int]) -> Callable[[], None]:
        """``works`` run in turn, which then note their seconds in :attr:`beside_seconds` under ``key``."""
        def timed() -> None:
            started = time.perf_counter()
            for work in works:
                work()
            self.beside_seconds[key] = time.perf_counter() - started
        return timed


__all__ = ["TtListTrainer"]
