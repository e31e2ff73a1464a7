"""What a TT PE's RTL is built of, counted from its spec: RAMs (depth, width) and multipliers.

The RAM shapes are the ``tt_ram`` instances of rtl/tt/tt{1,2,3}_pe.v with
the same localparams (chunks of ``lanes`` values; buffers sized by the
header limits ``max_j``, ``max_k``, ``max_l``); the multipliers are one per
lane and row. :mod:`codesign.hw.resource_model` turns them into DSP and
BRAM counts and fits LUT and FF to Yosys.
"""

from __future__ import annotations

from typing import List, Tuple

from codesign.pe.tt.contract import WORD_BITS, chunks
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec


def memories(spec) -> List[Tuple[int, int]]:
    """``(depth, width in bits)`` of every RAM the PE's RTL holds, one entry per instance."""
    if isinstance(spec, Tt1Spec):
        # j pairs: A and every B bank in two RAMs of half a chunk, written apart
        kc, halves = chunks(spec.max_k, spec.lanes), 2 if spec.j_pairs and spec.lanes > 1 else 1
        return ([(2 * spec.max_j * kc, spec.lanes * spec.a_bits // halves)] * halves  # A's two banks: one loads,
                # one computes
                + [(chunks(spec.max_l, spec.rows) * spec.max_j * kc, spec.lanes * spec.b_bits // halves)]
                * (spec.rows * halves))
    if isinstance(spec, Tt2Spec):
        kc, jc = chunks(spec.max_k, spec.lanes), chunks(spec.max_j, spec.lanes)
        copies = 2 if spec.row_pairs and spec.lanes > 1 else 1  # row pairs read each B bank twice a cycle
        return ([(2 * spec.max_j * kc, spec.lanes * spec.a_bits)]  # A's two banks: one loads, one computes
                + [(chunks(spec.max_l, spec.rows) * jc, spec.lanes * spec.b_bits)] * (spec.rows * copies)
                + [(2 * kc, spec.lanes * spec.acc_bits)] * spec.rows)  # two result banks: one fills, one sends
    if isinstance(spec, Tt3Spec):
        return [(chunks(spec.max_j, spec.lanes), spec.lanes * spec.b_bits)]
    raise TypeError(f"not a TT PE spec: {type(spec).__name__}")


def multipliers(spec) -> List[Tuple[int, int]]:
    """``(a_bits, b_bits)`` of every multiplier: ``lanes`` per row. PE3 has one row, and Yosys maps one more
    product to a DSP slice there (its lane select ``iv * A_BITS``; seen in the calibration: lanes + 1 DSP). PE1
    built to take ``B`` ``j`` outer (``b_order="jl"``) also multiplies the header's ``J`` by the chunks per row
    (8 x 8 bits, once per transaction: a row group's chunks, ``jkc`` in rtl/tt/tt1_pe.v)."""
    if isinstance(spec, Tt3Spec):
        return [(spec.a_bits, spec.b_bits)] * spec.lanes + [(8, 8)]
    jl = [(8, 8)] if isinstance(spec, Tt1Spec) and spec.b_jl else []
    return [(spec.a_bits, spec.b_bits)] * (spec.lanes * spec.rows) + jl


def b_address_bits(spec: Tt1Spec) -> int:
    """Bits of PE1's ``B`` bank address (``BAW`` of rtl/tt/tt1_pe.v): the j-outer build's two extra registers
    (``jbase``, ``jkc``) and their adders are this wide."""
    depth = chunks(spec.max_l, spec.rows) * spec.max_j * chunks(spec.max_k, spec.lanes)
    return max(1, (depth - 1).bit_length())


def features(spec) -> dict:
    """What LUT and FF counts grow with: a constant (control, header), one accumulator and adder per multiplier,
    the lane datapath (unpacking, lane selects), for the PEs with rows the lanes squared and times the
    multipliers (each row's sum of ``lanes`` products: the row PEs' LUTs grow faster than linearly at 16 lanes,
    most on UltraScale+; PE3's nine builds are too few for these terms held out), and the stream bits above
    32, alone and times the lanes.

    A wider stream adds its width and three in FF (the held output word, its
    fill count and the flag of a last word still to send in ``tt_pack_out``,
    which at 32 bits passes results straight through: hence the step
    ``wide_stream``) and LUTs per extra bit that grow with the
    lanes (PE1 on xc7 at 128 bits: 800 more LUTs at 2 x 1, 1,087 at 4 x 2,
    1,338 at 8 x 4, 2,285 at 16 x 2: the wider header check, chunk gather, lane
    unpacking and output packing), while RAMs and multipliers stay as they
    are. Fewer terms extrapolate better (held-out errors over the calibration
    grid: docs/design.md).

    PE1 built to take ``B`` ``j`` outer (``b_order="jl"``) keeps two more
    ``B``-address registers with their adders and selects
    (:func:`b_address_bits` wide each): ``jl_address_bits``, 0 in the
    original build.

    PE2 built with row pairs (``row_pairs``) selects, per upper lane, its A
    value and its row's weight between the pair's and the plain group's, and
    per row the upper row's weight from the bank's copy:
    ``row_pairs_x_multipliers``, 0 in a build without them. PE1 summing
    rows ``j`` in pairs (``j_pairs``) selects the upper half's write data of
    ``A`` and of every ``B`` bank and works out a pair's ``A`` address:
    ``j_pairs_x_lanes``, 0 without."""
    rows = getattr(spec, "rows", None)
    multipliers = spec.lanes * (rows or 1)
    wide = spec.stream_bits - WORD_BITS
    out = {"one": 1.0, "multipliers": float(multipliers), "lanes": float(spec.lanes),
           "wide_stream": float(wide > 0), "wide_stream_bits": float(wide),
           "wide_stream_bits_x_lanes": float(wide * spec.lanes)}
    if rows is not None:
        out["lanes_squared"] = float(spec.lanes * spec.lanes)
        out["lanes_x_multipliers"] = float(spec.lanes * multipliers)
    if isinstance(spec, Tt1Spec):
        out["jl_address_bits"] = float(b_address_bits(spec) if spec.b_jl else 0)
        out["j_pairs_x_lanes"] = float(spec.lanes * (spec.rows + 1) if spec.j_pairs and spec.lanes > 1 else 0)
    if isinstance(spec, Tt2Spec):
        out["row_pairs_x_multipliers"] = float(multipliers if spec.row_pairs and spec.lanes > 1 else 0)
    return out


__all__ = ["b_address_bits", "features", "memories", "multipliers"]
