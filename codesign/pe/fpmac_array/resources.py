"""What the FP-MAC array PE's RTL is built of, counted from its spec: RAMs (depth, width) and multipliers.

The RAM shapes are the ``fpmac_array_ram`` instances of
rtl/fpmac_array/fpmac_array_pe.v and fpmac_array_cell.v with the same
localparams: ``rows`` A banks of ``TM * max_k`` words, ``cols`` B banks of
``TN * max_k`` words and one C bank of ``TM * TN`` words per MAC, and the two
element RAMs of ``max_m * max_n`` words of fpmac_array_vector.v, each word one
container (``1 + exp_bits + max_fb`` bits). The multipliers are one
significand product per MAC, and one for each of the element-wise unit's
three FP-MACs. :mod:`codesign.hw.resource_model` turns them into
DSP and BRAM counts and fits LUT and FF to Yosys.
"""

from __future__ import annotations

from typing import List, Tuple

from codesign.pe.fpmac_array.spec import FpmacArraySpec

VECTOR_RAMS, VECTOR_MACS = 2, 3  # fpmac_array_vector.v: element RAMs G and P, the SGD chain's FP-MACs


def memories(spec: FpmacArraySpec) -> List[Tuple[int, int]]:
    """``(depth, width in bits)`` of every RAM of the RTL, one entry per instance."""
    tm, tn, width = spec.tile_rows, spec.tile_cols, spec.width
    return ([(tm * spec.max_k, width)] * spec.rows + [(tn * spec.max_k, width)] * spec.cols
            + [(tm * tn, width)] * spec.macs + [(spec.max_m * spec.max_n, width)] * VECTOR_RAMS)


def multipliers(spec: FpmacArraySpec) -> List[Tuple[int, int]]:
    """``(a_bits, b_bits)`` of every multiplier: the ``(max_fb + 1)``-bit significands' product of each MAC
    (rtl/fpmac/fpmac.v ``ma * mb``; Yosys maps the unsigned product like a signed one of these widths: 10 x 10
    in one slice, 24 x 24 in two, on both families, as the calibration grid shows)."""
    return [(spec.max_fb + 1, spec.max_fb + 1)] * (spec.macs + VECTOR_MACS)


def features(spec: FpmacArraySpec) -> dict:
    """What LUT and FF counts grow with: a constant (control, header, address arithmetic), the MACs, and the MACs'
    datapath bits (significand alignment, normalisation and rounding scale with the container width; the C
    select multiplexer with the MACs times the container). Held out on the calibration grid these three did
    better than with the LUT RAM bits or the A/B bank widths added (docs/design.md)."""
    macs = spec.macs + VECTOR_MACS  # the element-wise unit's FP-MACs are built like the array's
    return {"one": 1.0, "macs": float(macs), "mac_bits": float(macs * spec.width)}


def calibration_specs() -> List[FpmacArraySpec]:
    """The ABVS width (E8, fb <= 9) on arrays 1 x 1 to 4 x 4 and an FP32 container on 2 x 2, all with 32-deep
    buffers. Held to six builds a family: on two shared cores Yosys takes minutes per build."""
    s = FpmacArraySpec
    return [s(rows=1, cols=1, max_fb=9), s(rows=2, cols=2, max_fb=9), s(rows=4, cols=2, max_fb=9),
            s(rows=2, cols=4, max_fb=9), s(rows=2, cols=2), s(rows=4, cols=4, max_fb=9)]


__all__ = ["calibration_specs", "features", "memories", "multipliers"]
