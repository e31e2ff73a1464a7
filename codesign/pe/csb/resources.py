"""What the CSB PE's RTL is built of, counted from its spec: RAMs (depth, width) and multipliers.

The RAM shapes are those of rtl/csb/csb_pe.v with the same localparams: the
index buffer and the packed 8-bit weight buffer W8 (a stream beat a row), the
wide weight buffer WA (one ``max(acc_bits, 24)``-bit word per entry and tap,
in one bank per 32-bit part of a beat), per MAC group the
result bank R (``batch`` accumulators a word) and the X and DY byte windows
(rtl/csb/csb_window.v: banks of 32-bit words), sized for the largest stride
the PE runs (``max_stride``). The multipliers are one
8 x 8 product per lane and group, or on a ``packed`` build one 25 x 8 product
(one DSP slice) per two lanes. A build with the LOSS unit (``loss``; rtl/csb/csb_loss.v) adds its element RAM
(the logits, then their exponentials: ``classes * batch`` words in a bank per part), its per-lane words (the
sums, read three ways; the reciprocals; the maxima) and three products: ``d * log2(e)`` (28 x 17 bits) and the
reciprocal's two halves times ``e - [label] * S`` (23 x 18). :mod:`codesign.hw.resource_model` turns
them into DSP and BRAM counts and fits LUT and FF to Yosys.
"""

from __future__ import annotations

from typing import List, Tuple

from codesign.hw.resource_model import distributed_bits
from codesign.pe.csb.spec import DATA_BITS, CsbSpec

PACKED_PAIR_BITS = 25  # b1 * 2^16 + b0 for two signed 8-bit codes: a DSP slice's long port on xc7 and xcup
LOSS_PRODUCTS = [(28, 17), (23, 18), (23, 18)]  # csb_loss: d * log2(e), and (e - [label] * S) * r in two halves
LOSS_MAX_CLASSES = 32


def _ceil(n: int, d: int) -> int:
    return -(-n // d)


def window_banks(lanes: int, words: int, parts: int = 1) -> List[Tuple[int, int]]:
    """The banks of one ``csb_window`` of ``words`` 32-bit words read ``lanes`` bytes at a time and written a beat
    of ``parts`` words at a time: NB banks of ``ceil(words / NB) + 1`` words (a read may span NW words; NB is NW, or
    the beat's words where more, rounded up to a power of two)."""
    max_off = 0 if lanes % 4 == 0 else (2 if lanes % 2 == 0 else 3)
    spanned = max((max_off + lanes - 1) // 4 + 1, parts)
    banks = 1 if spanned <= 1 else (2 if spanned <= 2 else (4 if spanned <= 4 else 8))
    return [(_ceil(words, banks) + 1, 32)] * banks


def memories(spec: CsbSpec) -> List[Tuple[int, int]]:
    """``(depth, width in bits)`` of every RAM of the RTL, one entry per instance."""
    capacity, kk = spec.capacity, spec.kk
    eb_depths = [spec.block_cols * in_h * stride * _ceil(_ceil(in_w, stride), spec.parallel)
                 for stride in range(1, spec.max_stride + 1) for in_h, in_w in [spec.in_tile(stride)]]
    r_depth = max(spec.block_rows * spec.out_h * _ceil(spec.out_w, spec.parallel), *eb_depths)
    x_words = _ceil(spec.block_cols * spec.in_pos_at(spec.max_stride) * spec.batch, 4)
    d_words = _ceil(spec.block_rows * spec.out_pos * spec.batch, 4)
    per_group = ([(r_depth, spec.acc_bits * spec.batch)] + window_banks(spec.batch, x_words, spec.parts)
                 + window_banks(spec.batch, d_words, spec.parts))
    beat_bytes, parts = 4 * spec.parts, spec.parts  # the index and W8 a beat a row; WA in one bank a part
    return ([(_ceil(capacity, beat_bytes), 32 * parts), (_ceil(capacity * kk, beat_bytes), 32 * parts)]
            + [(_ceil(capacity * kk, parts), max(spec.acc_bits, 24))] * parts + per_group * spec.parallel
            + loss_memories(spec))


def loss_memories(spec: CsbSpec) -> List[Tuple[int, int]]:
    """The LOSS unit's RAMs (none without it): the element RAM, the sums (three read ports: three copies), the
    reciprocals and the maxima (a bank a part)."""
    if not spec.loss:
        return []
    elements = min(spec.ew_capacity // spec.batch, LOSS_MAX_CLASSES) * spec.batch
    return ([(_ceil(elements, spec.parts), max(spec.acc_bits, 17) * spec.parts)] + [(spec.batch, 22)] * 3
            + [(spec.batch, 33)] + [(spec.batch // spec.parts, spec.acc_bits)] * spec.parts)


def multipliers(spec: CsbSpec) -> List[Tuple[int, int]]:
    """``(a_bits, b_bits)`` of every multiplier: one signed 8 x 8 product per lane of every MAC group
    (rtl/csb/csb_group.v), or packed one 25 x 8 product per two lanes (``b1 * 2^16 + b0`` times the shared code;
    rtl/csb/csb_group_packed.v)."""
    loss = LOSS_PRODUCTS if spec.loss else []
    if spec.packed:
        return [(PACKED_PAIR_BITS, DATA_BITS)] * (spec.batch // 2 * spec.parallel) + loss
    return [(DATA_BITS, DATA_BITS)] * (spec.batch * spec.parallel) + loss


def features(spec: CsbSpec) -> dict:
    """What LUT and FF counts grow with: a constant (control, header, counters, address arithmetic), the lanes
    (one product, saturating accumulator and WG lane sum each) and the RAM left in LUT RAM (per 64 bits: the result
    banks and byte windows of every group grow with lanes times the accumulator width). Held out on the FC
    calibration builds these three did better than lanes times accumulator bits or the groups (docs/design.md).
    A conv build (kernel > 1) adds per group the tile's position and tap address arithmetic (``conv_groups``) and
    per lane the window's tap select (``conv_lanes``); both are 0 on an FC build. A build with stride 2 adds per
    group its second input address and the halved result-bank mapping (``stride2_groups``). A packed build adds per
    lane the pair's packing, its high product's borrow and WG's half-lane select (``packed_lanes``). A wide stream
    adds per part past the first an update and an element-wise unit and the beat's multiplexers (``wide_parts``),
    and per part, group and lane the selects of a beat's lanes from the result banks (``wide_part_lanes``). The
    LOSS unit adds its datapath (``loss``: the exponent's shifter and table, the divider, the rounding) and per lane
    its labels and selects (``loss_lanes``)."""
    conv = float(spec.kernel > 1)
    wide = float(spec.parts - 1)
    return {"one": 1.0, "lanes": float(spec.batch * spec.parallel), "lutram": distributed_bits(memories(spec)) / 64,
            "conv_groups": conv * spec.parallel, "conv_lanes": conv * spec.batch * spec.parallel,
            "stride2_groups": float(spec.max_stride == 2) * spec.parallel,
            "packed_lanes": float(spec.packed) * spec.batch * spec.parallel,
            "wide_parts": wide, "wide_part_lanes": wide * spec.batch * spec.parallel,
            "loss": float(spec.loss), "loss_lanes": float(spec.loss) * spec.batch}


def calibration_specs() -> List[CsbSpec]:
    """FC blocks (kernel 1, one position: what the CSB MLP loop trains) from 8 x 8 to 16 x 16 with 1 to 16 lanes,
    1 to 4 groups, 16- and 32-bit sums; and 3 x 3 conv builds (a conv network's step) from a 1 x 1 to an 8 x 8
    output tile, three of them built with stride 2 (1, 2 and 4 groups); three packed builds (two FC, one
    stride-2 conv); three on wide streams (an FC block at 64 and at 128 bits, a stride-2 conv at 64); and three
    with the LOSS unit (16 and 4 lanes, and a wide stride-2 conv). Held to twenty-four builds a family: on two
    shared cores Yosys takes minutes per build."""
    s = CsbSpec
    return [s(), s(batch=16), s(block_rows=8, block_cols=8, batch=4),
            s(block_rows=16, block_cols=8, batch=2, parallel=2, acc_bits=16), s(block_rows=8, block_cols=16, batch=1),
            s(batch=16, parallel=4),
            s(kernel=3), s(kernel=3, out_h=4, out_w=4, batch=16, parallel=4),
            s(kernel=3, out_h=2, out_w=4, batch=4, parallel=2, block_rows=8, block_cols=8),
            s(kernel=3, out_h=8, out_w=8, batch=8),
            s(kernel=3, out_h=4, out_w=2, batch=16, parallel=2, acc_bits=16, block_cols=8),
            s(kernel=3, out_h=2, out_w=2, batch=2, block_rows=8),
            s(kernel=3, out_h=4, out_w=4, batch=4, parallel=2, block_rows=8, block_cols=8, max_stride=2),
            s(kernel=3, out_h=2, out_w=2, batch=8, parallel=4, max_stride=2),
            s(kernel=3, out_h=4, out_w=2, batch=2, block_rows=16, block_cols=8, max_stride=2),
            s(batch=16, packed=True), s(block_rows=8, block_cols=8, batch=4, parallel=2, packed=True),
            s(kernel=3, out_h=4, out_w=4, batch=8, parallel=2, max_stride=2, packed=True),
            s(stream_bits=64), s(batch=16, parallel=2, stream_bits=128),
            s(kernel=3, out_h=4, out_w=4, batch=8, parallel=2, max_stride=2, stream_bits=64),
            s(batch=16, loss=True), s(block_rows=8, block_cols=8, batch=4, loss=True),
            s(kernel=3, out_h=4, out_w=4, batch=16, parallel=2, max_stride=2, stream_bits=128, loss=True)]


__all__ = ["calibration_specs", "features", "memories", "multipliers", "window_banks"]
