"""A compressed (CSB) MLP's fixed-point training step as call lists on the CSB PE, with every tensor in place.

Issue 40's CSB step: the index bytes, 8-bit weights and 24-bit weight buffers stay in the arena
(:mod:`codesign.step.csb.arena`), encoded once per pruning event; the host per step writes the batch's codes,
starts the *forward* list, reads the logits' accumulators, writes the loss gradient's codes and starts the
*backward* list. The lists compute what :class:`codesign.loops.csb.CsbMlpTrainer` computes, bit for bit:

* forward, per layer ``l``, lane chunk ``k`` and block row ``r``: FP over the row's stored blocks in column order
  (the golden sweep's order), the first with ``ZERO``, each later one with ``CARRY`` starting from the sums the
  call before held in the PE (``HOLD``); the last writes ``z`` raw. Hidden layers then run RELU(z)
  through the shell's rounding stage at ``fa[l+1] - (fw[l] + fa[l])``, which is the loop's ``rescale`` of
  ``max(z, 0)``: rounding to nearest is monotone and keeps 0, so rounding then clipping at 0 equals clipping
  then rounding. The packed codes are the next layer's X tile;
* backward: on a build with the LOSS unit (:func:`~codesign.step.csb.arena.loss_on_pe`) it starts with LOSS per
  lane chunk, the logits' accumulators and the chunk's ``P`` and labels in, the loss gradient's codes out through the
  rounding stage at shift 0 into the last layer's DY tile (the host then computes nothing between the lists); then
  per layer from the last: WG per stored block, a chain over the lane chunks held in the PE the same
  way (index, then X and DY as one block of two rows; the last writes the gradient after the index copy ``ig``);
  for ``l > 0`` EB per input tile over the blocks of its column in row order, chained alike and its sums left held,
  then SELECT with ``CARRY`` on them and ``z[l - 1]`` (the mask
  by the forward's sign) through the rounding stage at ``fe[l - 1] - (fw[l] + fe[l])``, into the previous
  layer's DY tile;
* the update, per stored block: UPD from the step's phase's buffer words and the final gradient (one block of two
  rows) into the other phase's, with the loop's shift (``LEFT`` where the loop shifts the gradient left first);
  then SHR by 16 through the rounding stage at shift 0 (exact), packing the new buffers' top bytes as the
  weights FP and EB read next step.

A list depends on the samples' lane chunks, the scales, the UPD shifts and the phase: the trainer keeps the
lists it built.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

from codesign.contracts.calls import RAW, Block
from codesign.numerics.records import keyword_record
from codesign.numerics.round_stage import RoundStageConfig
from codesign.pe.csb.cycles import FLAG_EW, compute_cycles
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import EwOp, Op, header_word, run_as
from codesign.numerics.loss_grad import exp_shift_of
from codesign.step.csb.arena import BUFFER_EXTRA_BITS, BlockSlots, CsbArena, build_arena, words_of_bytes
from codesign.step.share import Draft, Phase, PhasedLists, balanced, placed, runs

PE = "csb"
Upd = Tuple[int, bool]  # UPD's shift field and its LEFT flag, per layer


@keyword_record
class CsbStepScales:
    """What a step's lists take from the loop, per layer: ``relu`` (the rounding stage's shift from layer ``l``'s
    accumulators to layer ``l + 1``'s activation codes, hidden layers), ``mask`` (from ``W^T dy`` of layer ``l`` to
    layer ``l - 1``'s error codes, ``l > 0``; ``mask[0]`` is 0), ``upd`` (UPD's shift and LEFT flag) and ``loss``:
    on the PE, the LOSS calls' classes and exponent shift; empty where the host computes the loss gradient."""

    relu: Tuple[int, ...]
    mask: Tuple[int, ...]
    upd: Tuple[Upd, ...]
    loss: Tuple[int, ...] = ()

    @classmethod
    def of(cls, frac_bits: Sequence[dict], upd: Sequence[Upd], loss_classes: int = 0,
           pairs: Optional[Sequence[Tuple[int, int]]] = None) -> "CsbStepScales":
        """The scales of the loop's fractions; ``loss_classes``: the classes a LOSS call takes (0: none);
        ``pairs``: the ``(producer, consumer)`` layers whose ReLU and mask the step runs (None: a chain, each layer
        the next one's producer; a layer in no pair as producer or consumer keeps 0 there)."""
        fb = list(frac_bits)
        relu, mask = [0] * (len(fb) - 1), [0] * len(fb)
        for producer, consumer in [(l, l + 1) for l in range(len(fb) - 1)] if pairs is None else pairs:
            relu[producer] = fb[consumer]["activation"] - (fb[producer]["weight"] + fb[producer]["activation"])
            mask[consumer] = fb[producer]["error"] - (fb[consumer]["weight"] + fb[consumer]["error"])
        loss = (loss_classes, exp_shift_of(fb[-1]["weight"] + fb[-1]["activation"])) if loss_classes else ()
        return cls(relu=tuple(relu), mask=tuple(mask), upd=tuple((int(s), bool(left)) for s, left in upd), loss=loss)


@keyword_record
class CsbStepLists(PhasedLists):
    """One step's lists for ``n`` samples in ``phase`` on ``copies`` csb IPs: ``forward_phases`` (up to the logits'
    accumulators) and ``backward_phases`` (gradients, mask, update, new weights), each phase's lists side by side
    (:mod:`codesign.step.share`; one IP: a list each); ``macs``: FP, EB and WG products (``nnz`` a sample)."""

    n: int
    phase: int
    copies: int
    forward_phases: Tuple[Phase, ...]
    backward_phases: Tuple[Phase, ...]
    macs: int


def draft_cycles(spec: CsbSpec) -> Callable[[Draft], int]:
    """A drafted call's cycles on the PE without stalls, as far as its words and products say (to deal lists among
    copies): its header, operand and result words, and its compute steps (one tap a step under ``K1``)."""
    def cycles(item: Draft) -> int:
        header, segments, _, count, _ = item
        words = -(-(1 + sum(block.total_words for block in segments) + count) // spec.parts)  # beats
        if header & FLAG_EW:
            return words
        return words + compute_cycles(run_as(spec, header), op=header & 3, nnz=(header >> 16) & 0x1FF)
    return cycles


def code_rounding(values: int, shift: int, parts: int = 1) -> RoundStageConfig:
    """``values`` accumulators to 8-bit codes four to a word (the PE's byte sections) at ``shift``, in groups of a
    stream beat (``parts`` words, the last one zero-padded: a section's whole beats)."""
    return RoundStageConfig(enable=True, shift=shift, bits=8, lanes=4 * parts, group_words=parts, row_values=values)


class _Drafts:
    """The calls of one list before their record slots are known."""

    def __init__(self, arena: CsbArena, n: int, phase: int) -> None:
        self.arena, self.n, self.phase = arena, n, phase
        self.chunks = arena.chunks_of(n)
        self.items: List[Draft] = []

    def add(self, header: int, segments: Sequence[Block], out: Block, count: int,
            rounding: RoundStageConfig = RAW) -> None:
        self.items.append((header, tuple(segments), out, count, rounding))

    def x(self, layer: int) -> Tuple[Tuple[int, ...], ...]:
        """Layer ``layer``'s input tiles: the network input's are this phase's (the next step's batch goes into the
        other phase's while this step's lists compute)."""
        return self.arena.inputs[self.phase] if layer == 0 else self.arena.x[layer]

    def block(self, offset: int, words: int) -> Block:
        return Block(offset=offset, words=words, rows=1)

    def chain(self, op: Op, slots: Sequence[BlockSlots], data: Sequence[int], target: Optional[int]) -> None:
        """FP (``data``: the X tiles of ``slots``) or EB (the DY tiles) over ``slots`` in order, the first from zero:
        every call but the last holds its sums in the PE (``HOLD``) and the next starts from them (``CARRY``), so
        only the last sends them, to ``target`` (``None``: it holds them too, for a SELECT)."""
        a, last = self.arena, len(slots) - 1
        for j, s in enumerate(slots):
            segments = (self.block(s.iw, 2 * s.index_words), self.block(data[j], a.code_words))
            sends = j == last and target is not None
            self.add(header_word(op, s.nnz, zero=not j, carry=bool(j), hold=not sends), segments,
                     self.block(target or 0, a.acc_words if sends else 0), a.acc_words if sends else 0)

    def relu(self, v: int, out: int, shift: int) -> None:
        """RELU(``v``) through the rounding stage at ``shift``: a hidden layer's activation, as codes."""
        a = self.arena
        self.add(header_word(EwOp.RELU, a.acc_words, ew=True), (self.block(v, a.acc_words),),
                 self.block(out, a.code_words), a.acc_words, code_rounding(a.acc_words, shift, a.spec.parts))

    def loss(self, k: int, classes: int, exp_shift: int) -> None:
        """LOSS of lane chunk ``k``: its ``P`` and labels, then the logits' first ``classes`` rows, in; the loss
        gradient's codes through the rounding stage at shift 0 into the last layer's DY tile."""
        a, values = self.arena, classes * self.arena.spec.batch
        self.add(header_word(EwOp.LOSS, classes, exp_shift, ew=True),
                 (self.block(a.loss_in[k], a.loss_in_words), self.block(a.z[-1][0][k], values)),
                 self.block(a.dy[-1][0][k], words_of_bytes(values, a.spec.parts)), values,
                 code_rounding(values, 0, a.spec.parts))

    def select_held(self, z: int, out: int, shift: int) -> None:
        """SELECT(held sums, ``z``) through the rounding stage at ``shift``: the mask of the chain's sums the PE
        holds by the forward's sign, as codes."""
        a = self.arena
        self.add(header_word(EwOp.SELECT, a.acc_words, ew=True, carry=True), (self.block(z, a.acc_words),),
                 self.block(out, a.code_words), a.acc_words, code_rounding(a.acc_words, shift, a.spec.parts))

def _forward(d: _Drafts, scales: CsbStepScales, chunks: Sequence[int]) -> None:
    """FP of the lane ``chunks`` through every layer, ReLU between."""
    a = d.arena
    last = len(a.blocks) - 1
    for layer, slots in enumerate(a.blocks):
        for k in chunks:
            for r, line in enumerate(a.z[layer]):
                row = [s for s in slots if s.row == r]
                if not row:
                    continue  # no stored entry: z and the next layer's X tile stay 0
                d.chain(Op.FP, row, [d.x(layer)[s.col][k] for s in row], line[k])
                if layer < last:
                    d.relu(line[k], a.x[layer + 1][r][k], scales.relu[layer])


def _gradient(d: _Drafts, layer: int, s: BlockSlots) -> None:
    """WG of one block, chained over the lane chunks through the PE's held sums; the last writes the gradient
    after the index in ``ig``, where UPD reads index and gradient as one segment."""
    a, last = d.arena, d.chunks - 1
    for k in range(d.chunks):
        x, dy = d.x(layer)[s.col][k], a.dy[layer][s.row][k]
        operands = Block(offset=x, words=a.code_words, rows=2, stride=dy - x)
        count = s.value_words if k == last else 0  # on a wide stream the last beat's unused parts too
        d.add(header_word(Op.WG, s.nnz, zero=not k, carry=bool(k), hold=k < last),
              (d.block(s.ig, s.index_words), operands), d.block(s.ig + 4 * s.index_words, count), count)


def _errors(d: _Drafts, scales: CsbStepScales, chunks: Sequence[int]) -> None:
    """LOSS of the lane ``chunks`` where the PE runs it, then EB and the mask of them, from the last layer down to
    the second."""
    a = d.arena
    for k in chunks if scales.loss else ():
        d.loss(k, *scales.loss)
    for layer in range(len(a.blocks) - 1, 0, -1):
        slots = a.blocks[layer]
        for k in chunks:
            for c in range(len(a.x[layer])):
                column = [s for s in slots if s.col == c]
                if not column:
                    continue  # no stored entry: the previous layer's DY tile stays 0
                d.chain(Op.EB, column, [a.dy[layer][s.row][k] for s in column], None)
                d.select_held(a.z[layer - 1][c][k], a.dy[layer - 1][c][k], scales.mask[layer])


def _update(d: _Drafts, s: BlockSlots, upd: Upd) -> None:
    """UPD of stored block ``s`` into the other phase's buffer words, then SHR into the weights."""
    p = d.phase
    shift, left = upd
    grads, values = s.ig + 4 * s.index_words, s.value_words
    operands = Block(offset=s.b[p], words=values, rows=2, stride=grads - s.b[p])
    d.add(header_word(Op.UPD, s.nnz, shift, left=left), (d.block(s.iw, s.index_words), operands),
          d.block(s.b[1 - p], values), values)
    d.add(header_word(EwOp.SHR, s.nnz, BUFFER_EXTRA_BITS, ew=True), (d.block(s.b[1 - p], values),),
          d.block(s.iw + 4 * s.index_words, s.index_words), values, code_rounding(values, 0, s.parts))


def _phases(arena: CsbArena, n: int, scales: CsbStepScales, phase: int, copies: int) -> Tuple[list, list]:
    """The drafted forward phase and the two backward phases, each a list of drafted lists: FP and ReLU and then
    EB and the masks by runs of lane chunks (a chunk's tiles go through every layer on their own); per stored
    block, WG over every chunk, UPD and SHR, the blocks dealt by cycles."""
    if phase not in (0, 1):
        raise ValueError(f"phase {phase!r}: 0 or 1")
    layers = len(arena.blocks)
    if len(scales.relu) != layers - 1 or len(scales.mask) != layers or len(scales.upd) != layers:
        raise ValueError(f"scales for {len(scales.upd)} layers; the arena has {layers}")
    if scales.loss and not arena.loss_in:
        raise ValueError("LOSS calls on an arena without LOSS inputs (a build without the LOSS unit)")
    forward, errors, updates = [], [], []
    for part in runs(arena.chunks_of(n), copies):
        forward.append(_Drafts(arena, n, phase))
        _forward(forward[-1], scales, part)
        errors.append(_Drafts(arena, n, phase))
        _errors(errors[-1], scales, part)
    for layer, slots in enumerate(arena.blocks):
        for s in slots:
            updates.append(_Drafts(arena, n, phase))
            _gradient(updates[-1], layer, s)
            _update(updates[-1], s, scales.upd[layer])
    return [[d.items for d in forward]], [[d.items for d in errors],
                                          balanced([d.items for d in updates], copies, draft_cycles(arena.spec))]


def step_arena(spec: CsbSpec, layers: Sequence[int], batch: int, structures) -> CsbArena:
    """The arena of ``layers`` with the stored ``structures`` trained ``batch`` samples a step on ``spec``, with a
    record slot per call of its longest list (a full batch's on one IP: on several, a phase's lists share out
    those calls)."""
    sized = build_arena(spec, layers, batch, structures, record_slots=1)
    count = len(layers) - 1
    scales = CsbStepScales(relu=(0,) * (count - 1), mask=(0,) * count, upd=((0, False),) * count,
                           loss=(layers[-1], 0) if sized.loss_in else ())
    calls = [sum(len(items) for lists in phases for items in lists) for phases in _phases(sized, batch, scales, 0, 1)]
    return build_arena(spec, layers, batch, structures, record_slots=max(calls))  # the forward's, the backward's


def step_lists(arena: CsbArena, n: int, scales: CsbStepScales, phase: int,
               nnz: Optional[Sequence[int]] = None, copies: int = 1) -> CsbStepLists:
    """The lists of a step of ``n`` samples in ``phase`` on ``copies`` csb IPs, checked against the arena: on one
    IP a forward and a backward list; on several, a forward phase and two backward phases (see :func:`_phases`)
    whose lists run side by side. Every result is the one-IP step's, bit for bit."""
    forward, backward = (placed(phases, copies, PE, arena.records, arena.record_slots, 4 * arena.image.size,
                                arena.spec.stream_bits)
                         for phases in _phases(arena, n, scales, phase, copies))
    stored = [sum(s.nnz for s in slots) for slots in arena.blocks] if nnz is None else list(nnz)
    macs = n * (2 * sum(stored) + sum(stored[1:]))
    return CsbStepLists(n=n, phase=phase, copies=copies, forward_phases=forward, backward_phases=backward,
                        macs=macs)


__all__ = ["PE", "CsbStepLists", "CsbStepScales", "code_rounding", "draft_cycles", "step_arena", "step_lists"]
