"""A compressed conv network's fixed-point training step as call lists on the CSB PE, with every tensor in place.

What :class:`codesign.loops.csb_conv.CsbConvTrainer` computes, bit for bit: the products run as the conv lists
of :mod:`codesign.step.csb.conv_lists` (one arena for the network: each layer placed by
:func:`~codesign.step.csb.conv_arena.build_conv_arena`), and what the host did between them runs on the PE
and the shell's rounding stage:

* **ReLU into the next stage's input**: RELU(z) of a producer's sums through the rounding stage at
  ``fa[consumer] - (fw[l] + fa[l])`` (the loop's ``rescale`` of ``max(z, 0)``: rounding to nearest is monotone
  and keeps 0), written as codes straight into the consumer's padded grid; for the head, into its input
  flattened channel-major (channel ``c * h * w + y * w + x`` of a 1 x 1 map: a position a row of the out block);
* **the mask into the producer's errors**: SELECT(EB's sums at the input map's positions, the producer's sums)
  through the rounding stage at ``fe[producer] - (fw[l] + fe[l])``, into its error map;
* **a residual block's shortcut** (:mod:`codesign.step.csb.conv_net`), added in place: its FP onto conv2's sums,
  its EB onto conv1's, an identity as a constant 1 x 1 conv of ``2^j`` codes (:func:`write_identities`);
* **the update**, per stored block: UPD from the phase's buffer words and the step's gradients (three segments)
  into the other phase's, ``LEFT`` where the loop shifts the gradient left; then SHR by 16 through the rounding
  stage at shift 0 into the weights FP and EB read next step.

The head is the loop's dense layer, here a 1 x 1 conv on a 1 x 1 map that the PE runs under header ``K1``: one
tap a weight, as the loop holds it. Where the batch takes several lane chunks the head is *folded*
(:func:`~codesign.step.csb.conv_arena.head_fold`): chunk ``k``'s features and logits sit at position
``(k // f, k % f)`` of one ``f x f`` map, so one call computes every chunk.
A SELECT or RELU takes at most ``spec.ew_capacity`` elements: it runs over channels whole where a channel's map fits,
else over rows. Units: offsets in bytes, counts in elements.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterator, List, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RAW, RECORD_WORDS, ArenaLayout, Block
from codesign.numerics.records import keyword_record
from codesign.pe.csb.beats import padded
from codesign.pe.csb.format import CSBMatrix, encode
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import EwOp, Op, header_word
from codesign.step.csb.arena import BUFFER_EXTRA_BITS, EntryRange, words_of_bytes
from codesign.step.csb.conv_arena import ConvArena, ConvShape, build_conv_arena, folded_head, head_fold
from codesign.step.csb.conv_lists import layer_errors, layer_forward, layer_gradients
from codesign.step.csb.conv_net import ResidualBlock, Stage, net_stages, shortcut_shifts, stage_in, stage_out
from codesign.step.csb.lists import PE, CsbStepScales, code_rounding, draft_cycles
from codesign.step.share import Phase, PhasedLists, balanced, check_copies, placed, runs


@keyword_record
class MapView:
    """Where a map's ``(channels, rows, width)`` positions lie: per position ``lane_bytes`` (its ``b`` lanes),
    ``position_bytes`` apart along a row (``lane_bytes``: back to back), rows ``row_bytes`` apart, channels
    ``channel_bytes``."""

    base: int
    channel_bytes: int
    row_bytes: int
    position_bytes: int
    lane_bytes: int
    width: int

    def block(self, channel: int, channels: int, row: int, rows: int) -> Block:
        offset = self.base + channel * self.channel_bytes + row * self.row_bytes
        if self.position_bytes == self.lane_bytes:
            return Block(offset=offset, words=self.width * self.lane_bytes // 4, rows=rows, stride=self.row_bytes,
                         planes=channels, plane_stride=self.channel_bytes)
        return Block(offset=offset, words=self.lane_bytes // 4, rows=rows * self.width, stride=self.position_bytes,
                     planes=channels, plane_stride=self.channel_bytes)


def _out_map(a: ConvArena, base: int, size: int) -> MapView:
    """A layer's sums (``size`` 4) or error codes (1) over its output tiles."""
    spec, b = a.spec, a.spec.batch
    rows, cols = a.tiles[0] * spec.out_h, a.tiles[1] * spec.out_w
    return MapView(base=base, channel_bytes=rows * cols * b * size, row_bytes=cols * b * size,
                   position_bytes=b * size, lane_bytes=b * size, width=a.shape.out_map[1])


def _in_map(a: ConvArena, k: int, size: int, flat: Tuple[int, int] | None = None) -> MapView:
    """Lane chunk ``k``'s input codes (``size`` 1) or EB's sums (4) at the input map's positions of a layer's grid;
    ``flat`` ``(height, width)``: the head's 1 x 1 map (a folded head's position of chunk ``k``) read as the previous
    layer's map, channel-major."""
    (gh, gw), b, p = a.grid, a.spec.batch, a.shape.pad
    m, row, col = a.place(k)
    at = (a.x if size == 1 else a.dx)[m] + ((p + row) * gw + p + col) * b * size
    if flat is None:
        return MapView(base=at, channel_bytes=gh * gw * b * size, row_bytes=gw * b * size, position_bytes=b * size,
                       lane_bytes=b * size, width=a.shape.width)
    position = gh * gw * b * size  # one flattened feature a channel of the grid
    h, w = flat
    return MapView(base=at, channel_bytes=h * w * position, row_bytes=w * position, position_bytes=position,
                   lane_bytes=b * size, width=w)


def _pieces(channels: int, rows: int, row_elements: int, capacity: int) -> Iterator[Tuple[int, int, int, int]]:
    """``(channel, channels, row, rows)`` pieces of a map of at most ``capacity`` elements each."""
    if rows * row_elements <= capacity:
        step = capacity // (rows * row_elements)
        for c in range(0, channels, step):
            yield c, min(step, channels - c), 0, rows
        return
    step = capacity // row_elements
    if not step:
        raise ValueError(f"a map row of {row_elements} elements is more than one SELECT takes ({capacity})")
    for c in range(channels):
        for r in range(0, rows, step):
            yield c, 1, r, min(step, rows - r)


@keyword_record
class ConvNetArena:
    """A conv network's arena: its ``layers`` (the convs, the blocks' layers, then the head on a 1 x 1 map) placed
    in one image, a record slot per call of its longest list; its residual ``blocks`` and each identity block's
    constant shortcuts (``identities``: the FP and the EB copy, sharing the block's maps)."""

    spec: CsbSpec
    batch: int
    layers: Tuple[ConvArena, ...]
    records: int
    record_slots: int
    image: np.ndarray
    blocks: Tuple[ResidualBlock, ...] = ()
    identities: Tuple[Tuple[ConvArena, ...], ...] = ()  # per block: an identity's FP and EB shortcut; () projects

    @property
    def stages(self) -> List[Stage]:
        return net_stages(len(self.layers), self.blocks)

    @property
    def arena(self) -> np.ndarray:
        """The image a shell's ``arena`` call copies."""
        return self.image

    def chunks_of(self, n: int) -> int:
        return self.layers[0].chunks_of(n)


@keyword_record
class ConvNetLists(PhasedLists):
    """One step's lists for ``n`` samples in buffer ``phase`` on ``copies`` csb IPs: ``forward_phases`` (to the
    logits' sums) and ``backward_phases`` (gradients, masks, the update and the new weights), each phase's lists
    run side by side (see :func:`net_lists`)."""

    n: int
    phase: int
    copies: int
    forward_phases: Tuple[Phase, ...]
    backward_phases: Tuple[Phase, ...]


def conv_structures(spec: CsbSpec, masks: Sequence[np.ndarray],
                    shapes: Sequence[ConvShape] | None = None) -> List[CSBMatrix]:
    """The stored structure of every layer on ``spec``: each ``(outputs, channels)`` kernel mask as CSB blocks, of
    the layer's kernel in ``shapes`` (None: a network without blocks, the PE's kernel for the convs and 1 for the
    head, the last; with blocks, pass the shapes: a projection's kernel is 1)."""
    kernels = [spec.kernel] * (len(masks) - 1) + [1] if shapes is None else [shape.kernel for shape in shapes]
    return [encode(np.broadcast_to(np.asarray(mask, bool)[:, :, None, None], (*np.shape(mask), k, k)).astype(np.int8),
                   block_rows=spec.block_rows, block_cols=spec.block_cols) for mask, k in zip(masks, kernels)]


def identity_structure(spec: CsbSpec, channels: int) -> CSBMatrix:
    """An identity shortcut's stored structure: the diagonal kernels of a ``channels``-square 1 x 1 conv."""
    return encode(np.eye(channels, dtype=np.int8)[:, :, None, None], block_rows=spec.block_rows,
                  block_cols=spec.block_cols)


def _place(spec: CsbSpec, shapes: Sequence[ConvShape], batch: int, structures: Sequence[CSBMatrix],
           record_slots: int, blocks: Sequence[ResidualBlock]) -> ConvNetArena:
    layout, fold = ArenaLayout(), head_fold(spec, batch)
    *convs, head = shapes
    shapes = [*convs, folded_head(head, fold) if fold else head]
    projections = {block.projection: block for block in blocks if block.projection is not None}
    layers: List[ConvArena] = []
    for index, (shape, csb) in enumerate(zip(shapes, structures)):
        block = projections.get(index)  # placed after its block's conv1 and conv2, whose maps it shares
        shared = {} if block is None else dict(reads=layers[block.first], adds_to=layers[block.second])
        layers.append(build_conv_arena(spec, shape, batch, csb, record_slots=0, layout=layout,
                                       fold=fold if index == len(shapes) - 1 else 0, **shared))
    identities = tuple(() if block.projection is not None else tuple(  # the FP copy, then the EB copy
        build_conv_arena(spec, dataclasses.replace(shapes[block.first], kernel=1), batch,
                         identity_structure(spec, shapes[block.first].channels), record_slots=0, layout=layout,
                         reads=layers[block.first], adds_to=layers[block.second]) for _ in range(2)) for block in blocks)
    records = layout.reserve(RECORD_WORDS * max(record_slots, 1))
    return ConvNetArena(spec=spec, batch=batch, layers=tuple(layers), records=records, record_slots=record_slots,
                        image=layout.image(), blocks=tuple(blocks), identities=identities)


def net_arena(spec: CsbSpec, shapes: Sequence[ConvShape], batch: int, structures: Sequence[CSBMatrix],
              blocks: Sequence[ResidualBlock] = ()) -> ConvNetArena:
    """The network's arena (``blocks``: its residual blocks, :func:`codesign.step.csb.conv_net.resnet_shapes`),
    with a record slot per call of its longest list (a full batch's on one IP: on several, a phase's lists share
    out those calls)."""
    sized = _place(spec, shapes, batch, structures, 1, blocks)
    zero = CsbStepScales(relu=(0,) * (len(shapes) - 1), mask=(0,) * len(shapes), upd=((0, False),) * len(shapes))
    calls = [sum(len(items) for lists in phases for items in lists) for phases in _phases(sized, batch, zero, 0, 1)]
    return _place(spec, shapes, batch, structures, max(calls), blocks)  # the forward's and the backward's calls


def write_identities(net: ConvNetArena, image: np.ndarray, frac_bits: Sequence[dict]) -> None:
    """Every identity shortcut's constant codes into ``image``: ``2^jf`` on the diagonal its FP reads, ``2^jb`` on
    the one its EB reads (:func:`codesign.step.csb.conv_net.shortcut_shifts`)."""
    for block, arenas in zip(net.blocks, net.identities):
        if arenas:
            csb = identity_structure(net.spec, arenas[0].shape.channels)
            for a, shift in zip(arenas, shortcut_shifts(frac_bits, block)):
                a.write_weights(image, dataclasses.replace(csb, values=np.full_like(csb.values, 1 << shift)))


def net_step_scales(frac_bits: Sequence[dict], upd: Sequence[Tuple[int, bool]],
                    blocks: Sequence[ResidualBlock] = ()) -> CsbStepScales:
    """The rounding stage's shifts of a network's step (:meth:`CsbStepScales.of`): ReLU and mask between each stage
    and the next (a block's output is its conv2's, its input its conv1's grid, whose EB sums hold the shortcut's)
    and within each block, conv1 to conv2; a projection's are unused (0)."""
    stages = net_stages(len(frac_bits), blocks)
    pairs = [(stage_out(before), stage_in(after)) for before, after in zip(stages, stages[1:])]
    return CsbStepScales.of(frac_bits, upd, pairs=pairs + [(block.first, block.second) for block in blocks])


def _selects(items: list, spec: CsbSpec, v: MapView, z: MapView | None, out: MapView, dims: Tuple[int, int],
             shift: int) -> None:
    """SELECT(``v``, ``z``), or RELU(``v``) where ``z`` is None, over a ``dims`` = (channels, rows) map through
    the rounding stage into ``out``."""
    b = spec.batch
    for c, nc, r, nr in _pieces(*dims, v.width * b, spec.ew_capacity):
        count = nc * nr * v.width * b
        sources = (v.block(c, nc, r, nr),) + (() if z is None else (z.block(c, nc, r, nr),))
        items.append((header_word(EwOp.RELU if z is None else EwOp.SELECT, count, ew=True), sources,
                      out.block(c, nc, r, nr), count, code_rounding(b, shift, spec.parts)))


def _relu(items: list, net: ConvNetArena, layer: int, consumer: int, k: int, shift: int) -> None:
    """RELU of ``layer``'s sums into ``consumer``'s input grid (the head's: flattened)."""
    a, nxt = net.layers[layer], net.layers[consumer]
    (oh, ow), z = a.shape.out_map, _out_map(a, a.z[k], 4)
    head = consumer == len(net.layers) - 1
    out = _in_map(nxt, k, 1, (oh, ow) if head else None)
    _selects(items, net.spec, z, None, out, (a.shape.outputs, oh), shift)


def _mask(items: list, net: ConvNetArena, layer: int, producer: int, k: int, shift: int) -> None:
    """SELECT of ``layer``'s EB sums on its input grid by ``producer``'s sums, into ``producer``'s errors."""
    a, prev = net.layers[layer], net.layers[producer]
    (oh, ow) = prev.shape.out_map
    head = layer == len(net.layers) - 1
    v = _in_map(a, k, 4, (oh, ow) if head else None)
    _selects(items, net.spec, v, _out_map(prev, prev.z[k], 4), _out_map(prev, prev.dy[k], 1),
             (prev.shape.outputs, oh), shift)


def _update(items: list, a: ConvArena, upd: Tuple[int, bool], phase: int, part: EntryRange) -> None:
    """UPD of the entry range ``part`` of a stored block from the phase's buffer words and its gradients into the
    other phase's, then SHR into the weights."""
    shift, left = upd
    parts, taps, words = a.spec.parts, part.nnz * part.kk, part.value_words
    cap = a.spec.ew_capacity // (4 * parts) * 4 * parts  # SHR pieces of whole beats of codes
    new = part.buffer(1 - phase)
    segments = (Block(offset=part.index(part.slots.iw), words=part.index_words, rows=1),
                Block(offset=part.buffer(phase), words=words, rows=1),
                Block(offset=part.gradients, words=words, rows=1))
    items.append((header_word(Op.UPD, part.nnz, shift, left=left, k1=a.k1), segments,
                  Block(offset=new, words=words, rows=1), words, RAW))
    for start in range(0, taps, cap):
        n = min(cap, taps - start)
        values = padded(n, parts)  # the PE's results and the last beat's zeros, rounded to zero codes
        items.append((header_word(EwOp.SHR, n, BUFFER_EXTRA_BITS, ew=True),
                      (Block(offset=new + 4 * start, words=values, rows=1),),
                      Block(offset=part.weights + start, words=words_of_bytes(n, parts), rows=1), values,
                      code_rounding(values, 0, parts)))


def _block_updates(net: ConvNetArena, n: int, upd: Sequence[Tuple[int, bool]], phase: int, copies: int) -> list:
    """Per stored block, WG over every chunk and tile, then UPD and SHR: a group of drafts each, to be dealt to the
    IPs. On several IPs a block costlier than an even share of them all is cut into entry ranges, each its own WG,
    UPD and SHR (an entry's gradient and update are its own, so the results are the whole block's), so that no IP
    waits on one block while the others idle."""
    def group(layer: int, part: EntryRange) -> list:
        items: list = []
        layer_gradients(net.layers[layer], n, items, [part])
        _update(items, net.layers[layer], upd[layer], phase, part)
        return items

    wholes = [(layer, EntryRange.whole(s, a.shape.kernel ** 2)) for layer, a in enumerate(net.layers) for s in a.blocks]
    groups = [group(layer, part) for layer, part in wholes]
    if copies == 1:
        return groups
    cost = draft_cycles(net.spec)
    costs = [sum(map(cost, items)) for items in groups]
    share = sum(costs) / copies
    out = []
    for (layer, part), items, spent in zip(wholes, groups, costs):
        pieces = min(copies, math.ceil(spent / share))
        out += [items] if pieces < 2 else [group(layer, piece) for piece in part.split(pieces)]
    return out


def _stage_forward(items: list, net: ConvNetArena, n: int, scales: CsbStepScales, part: Sequence[int]) -> None:
    """A run of lane chunks through every stage but the head: FP and the ReLU into the next stage's input; a block's
    conv1, ReLU, conv2 and then its shortcut's FP onto conv2's sums."""
    stages = net.stages
    for stage, after in zip(stages[:-1], stages[1:]):
        if isinstance(stage, ResidualBlock):
            first, second = net.layers[stage.first], net.layers[stage.second]
            layer_forward(first, n, items, part)
            for k in part:
                _relu(items, net, stage.first, stage.second, k, scales.relu[stage.first])
            layer_forward(second, n, items, part)
            shortcut = _shortcut(net, stage, 0)
            layer_forward(shortcut, n, items, part, onto={s.row for s in second.blocks})
        else:
            layer_forward(net.layers[stage], n, items, part)
        for k in part:
            _relu(items, net, stage_out(stage), stage_in(after), k, scales.relu[stage_out(stage)])


def _shortcut(net: ConvNetArena, block: ResidualBlock, direction: int) -> ConvArena:
    """A block's shortcut: its projection, or its identity's FP (``direction`` 0) or EB (1) arena."""
    identity = net.identities[net.blocks.index(block)]
    return identity[direction] if identity else net.layers[block.projection]


def _stage_errors(items: list, net: ConvNetArena, n: int, scales: CsbStepScales, part: Sequence[int]) -> None:
    """A run of lane chunks back through the stages, the head's EB done: each stage's EB and the mask into the
    errors of the stage before; a block's conv2 EB and mask into conv1's errors, then conv1's EB and its shortcut's
    onto the same sums."""
    stages = net.stages  # the first a plain conv (conv_net.resnet_shapes): the network's input takes no error
    for index in range(len(stages) - 1, 0, -1):
        stage = stages[index]
        if isinstance(stage, ResidualBlock):
            first = net.layers[stage.first]
            layer_errors(net.layers[stage.second], n, items, part)
            for k in part:
                _mask(items, net, stage.second, stage.first, k, scales.mask[stage.second])
            layer_errors(first, n, items, part)
            layer_errors(_shortcut(net, stage, 1), n, items, part, onto={s.col for s in first.blocks})
        elif index < len(stages) - 1:  # the head's EB is a phase of its own
            layer_errors(net.layers[stage], n, items, part)
        for k in part:
            _mask(items, net, stage_in(stage), stage_out(stages[index - 1]), k, scales.mask[stage_in(stage)])


def _phases(net: ConvNetArena, n: int, scales: CsbStepScales, phase: int, copies: int) -> Tuple[list, list]:
    """The drafts of the forward and backward phases, each a list of drafted lists (see :func:`net_lists`)."""
    if phase not in (0, 1):
        raise ValueError(f"phase {phase!r}: 0 or 1")
    layers, chunks = len(net.layers), net.chunks_of(n)
    if len(scales.relu) != layers - 1 or len(scales.mask) != layers or len(scales.upd) != layers:
        raise ValueError(f"scales for {len(scales.upd)} layers; the arena has {layers}")
    head, convs = net.layers[-1], layers > 1
    parts, head_parts = runs(chunks, copies), runs(head.chunks_of(n), copies)
    convs_forward, head_forward, head_errors, errors = [], [], [], []
    for part in parts:  # a lane chunk's maps through every conv, ReLU included, on one IP
        convs_forward.append([])
        _stage_forward(convs_forward[-1], net, n, scales, part)
    for part in head_parts:  # a folded head's one map reads every chunk's features
        head_forward.append([])
        layer_forward(head, n, head_forward[-1], part)
    for columns in runs(head.column_blocks, copies) if convs else ():  # its EB shared by block columns
        head_errors.append([])
        layer_errors(head, n, head_errors[-1], columns=columns)
    for part in parts if convs else ():
        errors.append([])
        _stage_errors(errors[-1], net, n, scales, part)
    updates = _block_updates(net, n, scales.upd, phase, copies)
    backward = [head_errors, errors, balanced(updates, copies, draft_cycles(net.spec))]
    return [convs_forward, head_forward], backward


def net_lists(net: ConvNetArena, n: int, scales: CsbStepScales, phase: int, copies: int = 1) -> ConvNetLists:
    """The forward and backward lists of a step of ``n`` samples in ``phase`` on ``copies`` IPs, checked against
    the arena. On one IP, a list each. On several, the lane chunks (and the head's, where it is not folded) are
    shared out in runs, and the step is five phases whose lists run side by side:

    1. every conv's FP and ReLU (a block's shortcut's FP onto its conv2's sums), a run of chunks each;
    2. the head's FP (a folded head is one list: it reads every chunk);
    3. the head's EB, a run of block columns each;
    4. the masks and the convs' EB (a block's shortcut's EB onto its conv1's sums), a run of chunks each;
    5. per stored block, WG over every chunk and tile, then UPD and SHR, the blocks dealt by cycles.

    Every product and sum is the one-IP step's, in the same order per result, so the results are its bit for
    bit."""
    forward, backward = (placed(phases, copies, PE, net.records, net.record_slots, 4 * net.image.size,
                                net.spec.stream_bits)
                         for phases in _phases(net, n, scales, phase, check_copies(copies)))
    return ConvNetLists(n=n, phase=phase, copies=copies, forward_phases=forward, backward_phases=backward)


__all__ = ["ConvNetArena", "ConvNetLists", "MapView", "conv_structures", "identity_structure", "net_arena", "net_lists",
           "net_step_scales", "write_identities"]
