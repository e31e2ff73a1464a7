"""The TT rooms on the PE protocol: stream PEs whose golden models are in :mod:`codesign.pe.tt.golden`.

HLS: a thin top over ``codesign::tt::pe1``, ``pe2`` or ``pe3``
(``hls_templates/include/codesign_tt.h``), AXI4-Stream in and out. RTL:
``rtl/tt`` (tops ``tt1_pe``, ``tt2_pe``, ``tt3_pe``), checked by the shared
valid/ready bench with random gaps and backpressure. The golden level compares
every expected word with :mod:`codesign.pe.tt.reference`, plain loops written
from docs/tt_pe.md.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import ClassVar

import numpy as np

from codesign.hw.constants_gen import HEADER_NAME as CONSTANTS_HEADER
from codesign.hw.protocol import GridCase
from codesign.hw.rtl_deps import used_sources
from codesign.pe.stream import StreamPE, Transaction
from codesign.pe.tt import golden, reference, resources, stimulus
from codesign.pe.tt.contract import MAX_DIM, STREAM_BITS_CHOICES, WORD_BITS
from codesign.pe.tt.cycles import stream_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions
from codesign.resources import data_dir

LIBRARY_HEADER = "codesign_tt.h"
LONG_CONTRACTIONS = 10_000  # contractions per configuration in the extended grid


WIDE_STREAMS = tuple(bits for bits in STREAM_BITS_CHOICES if bits > WORD_BITS)  # the widths beside the 32-bit grid
QUICK_WIDE = 1  # configurations of the main grid that ``make test`` runs at a quick wider width (the rest: ``long``)
# the wider widths whose quick points run at golden in ``make test`` (their C-sim and RTL in ``make test-slow``); the
# others' are ``slow``: the widest word takes the multi-part unpacker, packer and header check
QUICK_WIDE_STREAMS = (WIDE_STREAMS[-1],)


def header_top_cases(spec_class, stream_bits: int = WORD_BITS) -> list[GridCase]:
    """Builds whose limit on one of ``J``, ``K``, ``L`` is the top of its 8-bit header field, the other two small,
    so that every bit of every dimension field is read by some transaction (the directed set fills each buffer
    and sends ``I`` = 255) while buffers and results stay small enough for short RTL runs."""
    suffix = "" if stream_bits == WORD_BITS else f"_s{stream_bits}"
    return [GridCase(f"l16r8_top_k{suffix}", spec_class(max_j=1, max_k=MAX_DIM, max_l=3, stream_bits=stream_bits)),
            GridCase(f"l16r8_top_l{suffix}", spec_class(max_j=1, max_k=3, max_l=MAX_DIM, stream_bits=stream_bits)),
            GridCase(f"l4r2_top_j{suffix}", spec_class(lanes=4, rows=2, max_j=MAX_DIM, max_k=3, max_l=3,
                                                       stream_bits=stream_bits))]


def width_grid(main: list[GridCase], tops) -> list[GridCase]:
    """The 32-bit grid (``main``, then the header-top builds ``tops(32)``), each again with 10^4 contractions
    (``long``, :func:`with_long_twins`); then at every wider width the first :data:`QUICK_WIDE` configurations of
    ``main`` and every header-top build (quick at :data:`QUICK_WIDE_STREAMS`, else ``slow``) and with 10^4
    contractions, and the rest of ``main`` with 10^4 contractions only: every width has the directed
    header-field cases in the quick or slow grid and at least five configurations with 10^4 contractions in the
    extended one."""
    grid = with_long_twins(main + tops(WORD_BITS))
    for bits in WIDE_STREAMS:
        wide = [GridCase(f"{case.id}_s{bits}", replace(case.spec, stream_bits=bits), case.target, case.options)
                for case in main]
        quick, rest = wide[:QUICK_WIDE] + tops(bits), wide[QUICK_WIDE:]
        if bits not in QUICK_WIDE_STREAMS:
            quick = [replace(case, slow=True) for case in quick]
        grid += quick + with_long_twins(quick + rest, offset=len(grid))[len(quick) + len(rest):]
    return grid


def with_long_twins(cases: list[GridCase], offset: int = 0) -> list[GridCase]:
    """The grid, then every configuration again with at least :data:`LONG_CONTRACTIONS` contractions (``long``).

    The quick points check at least 10 000 MACs in a few dozen
    transactions; their twins add small random contractions until 10^4 are
    checked at every level (minutes of RTL simulation per point). ``offset``
    keeps the twins' seeds apart from those of earlier twins.
    """
    twins = [GridCase(f"{case.id}_10k", case.spec, case.target,
                      TtStimulusOptions(min_contractions=LONG_CONTRACTIONS, seed=3000 + offset + index), long=True)
             for index, case in enumerate(cases)]
    return cases + twins


SATURATING = dict(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16)  # 16-bit sums of 16 x 16-bit products
NARROW = dict(a_bits=3, b_bits=2, acc_bits=16)
EIGHTS = dict(lanes=8, rows=8, a_bits=8, b_bits=8, acc_bits=20)
LISTS = dict(lanes=8, rows=8, a_bits=16, b_bits=16, stream_bits=128)  # the call lists' build


def feature_grid(spec_class, suffix: str, fields: dict, builds: list[tuple[str, dict]], offset: int
                 ) -> list[GridCase]:
    """``builds`` (``(id, spec fields)``) of ``spec_class`` with ``fields`` set, each ``<id>_<suffix>``, quick and
    with 10^4 contractions (``long``; ``offset`` keeps the twins' seeds apart from the grid's before)."""
    cases = [GridCase(f"{name}_{suffix}", spec_class(**build, **fields)) for name, build in builds]
    return with_long_twins(cases, offset=offset)


def b_order_grid(offset: int) -> list[GridCase]:
    """PE1 built to take ``B`` ``j`` outer (``b_order="jl"``), quick and with 10^4 contractions (``long``): a row
    per bank (``rows`` 1) and partial row groups (3 and 8 rows), ``L`` and ``J`` at the top of their header fields
    (255 rows of one ``j``, so the write address crosses 32 row groups; 255 ``j`` blocks of 3 rows), and the
    call lists' build (8 x 8, 16-bit operands, 128-bit stream) with smaller buffers. Each row lands where the
    original order puts it, so every quick point checks the same sums as an ``"lj"`` build would."""
    return feature_grid(Tt1Spec, "jl", dict(b_order="jl"), [
        ("l4r3_a16b16_acc16", dict(SATURATING, max_j=5, max_k=9, max_l=7)),
        ("l1r1_a3b2_acc16", dict(NARROW, lanes=1, rows=1, max_j=3, max_k=5, max_l=4)),
        ("l8r8_a8b8_acc20", dict(EIGHTS, max_j=4, max_k=24, max_l=17)),
        ("l16r8_top_l", dict(max_j=2, max_k=3, max_l=MAX_DIM)),
        ("l4r2_top_j", dict(lanes=4, rows=2, max_j=MAX_DIM, max_k=3, max_l=3)),
        ("l8r8_a16b16_s128", dict(LISTS, max_j=9, max_k=24, max_l=19))], offset)


def j_pairs_grid(offset: int) -> list[GridCase]:
    """PE1 built to sum rows ``j`` in pairs, quick and with 10^4 contractions (``long``): ``K`` past half the
    lanes too, so that transactions run both with and without pairs; 2 lanes (one a row of a pair), the 16-bit
    saturating build (the pairs' order of additions shows), ``J`` at the top of its header field (255 rows: an
    odd last pair), and the call lists' build taking ``B`` ``j`` outer."""
    return feature_grid(Tt1Spec, "jp", dict(j_pairs=True), [
        ("l4r3_a16b16_acc16", dict(SATURATING, max_j=7, max_k=5, max_l=7)),
        ("l2r1_a3b2_acc16", dict(NARROW, lanes=2, rows=1, max_j=5, max_k=3, max_l=4)),
        ("l8r8_a8b8_acc20", dict(EIGHTS, max_j=9, max_k=9, max_l=17)),
        ("l4r2_top_j", dict(lanes=4, rows=2, max_j=MAX_DIM, max_k=3, max_l=3)),
        ("l8r8_a16b16_s128_jl", dict(LISTS, max_j=9, max_k=12, max_l=19, b_order="jl"))], offset)


def row_pairs_grid(offset: int) -> list[GridCase]:
    """PE2 built with row pairs, quick and with 10^4 contractions (``long``): ``K`` past half the lanes too, so
    that transactions run both with and without pairs; rows 1 and 3 (a group of 2 and 6 rows, the upper half
    partial), 2 lanes (one a row), the 16-bit saturating build, ``L`` at the top of its header field (255 rows:
    the group base and the second bank's address cross 16 groups), and the call lists' build. Pairs move no
    number, so every point checks the sums a build without them gives."""
    return feature_grid(Tt2Spec, "rp", dict(row_pairs=True), [
        ("l4r3_a16b16_acc16", dict(SATURATING, max_j=5, max_k=5, max_l=13)),
        ("l2r1_a3b2_acc16", dict(NARROW, lanes=2, rows=1, max_j=3, max_k=3, max_l=5)),
        ("l8r8_a8b8_acc20", dict(EIGHTS, max_j=9, max_k=9, max_l=35)),
        ("l4r2_top_l", dict(lanes=4, rows=2, max_j=3, max_k=3, max_l=MAX_DIM)),
        ("l8r8_a16b16_s128", dict(LISTS, max_j=17, max_k=12, max_l=40))], offset)


def pe3_top_cases(stream_bits: int) -> list[GridCase]:
    """PE3's header-top build in the quick grid at a wider width (at 32 bits ``l8_a12b5`` of the main grid is
    quick): the paper's widths with ``J`` up to 255 (``I`` = 255 is in every directed set)."""
    if stream_bits == WORD_BITS:
        return []
    return [GridCase(f"l16_a8b16_top_j_s{stream_bits}", Tt3Spec(max_j=MAX_DIM, stream_bits=stream_bits))]


CALIBRATION_ARRAYS = ((2, 1), (4, 2), (8, 1), (8, 4), (16, 2), (4, 8), (2, 4), (16, 1), (16, 4))  # (lanes, rows) the resource model is fitted on
# (lanes, rows, stream_bits) of the wider-stream builds beside the 32-bit arrays: each width at a small and a
# large array, so the fit separates the stream term from the array terms (docs/design.md)
WIDE_CALIBRATION = ((4, 2, 64), (8, 4, 64), (4, 2, 128), (8, 4, 128), (16, 2, 128), (2, 1, 128))
JL_CALIBRATION = ((2, 1, 32), (2, 4, 32), (8, 4, 32), (8, 4, 128))  # (lanes, rows, stream_bits) of PE1's jl builds
# (lanes, rows, stream_bits, b_order) of PE1's builds summing rows j in pairs
JP_CALIBRATION = ((2, 1, 32, "lj"), (4, 2, 32, "lj"), (8, 4, 32, "lj"), (8, 4, 128, "jl"), (8, 8, 128, "jl"))
# (lanes, rows, stream_bits) of PE2's row-pair builds
RP_CALIBRATION = ((2, 1, 32), (4, 2, 32), (8, 4, 32), (8, 4, 128), (8, 8, 128))
WIDE_CALIBRATION_PE3 = ((2, 64), (4, 64), (16, 64), (2, 128), (16, 128))  # (lanes, stream_bits) of PE3's wide builds


class _TtPE(StreamPE):
    """What the TT PEs share: templates, the RTL directory, parameters named after the spec fields."""

    stimulus_class = TtStimulusOptions
    cpp_struct: ClassVar[str]  # the codesign::tt template implementing this PE
    reference_model: ClassVar  # the plain-loop model of :mod:`codesign.pe.tt.reference` for this PE
    # spec fields in the order of the C++ template's and the Verilog module's parameters
    parameter_order: ClassVar[tuple[str, ...]] = ("lanes", "rows", "a_bits", "b_bits", "acc_bits", "max_j", "max_k",
                                                  "max_l", "stream_bits")
    headers = (LIBRARY_HEADER, CONSTANTS_HEADER)
    estimate_abc9 = False  # resource counts are what the TT estimates report

    doc = "docs/tt_pe.md"
    transaction = "header and operand sections in; status and results out"

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.cpp_type = f"codesign::tt::{cls.cpp_struct}"

    def build_stimulus(self, spec, options: TtStimulusOptions) -> list[Transaction]:
        return stimulus.build(spec, options)

    def transaction_cycles(self, spec, words_in) -> int:
        """Clock cycles of one transaction without stalls (:func:`codesign.pe.tt.cycles.transaction_cycles`), from
        its header word at the build's stream width."""
        return stream_cycles(spec, words_in)

    def reference_output(self, spec, words_in) -> np.ndarray:
        return np.array(self.reference_model(words_in, **spec.to_dict()), dtype=np.uint64)

    def golden_output(self, spec, words_in) -> np.ndarray:
        """The vectorised golden's answer (:func:`codesign.pe.tt.golden.answer`), equal to the reference's."""
        return golden.answer(spec, words_in)

    def resource_parts(self, spec):
        self.check_spec(spec)
        return resources.memories(spec), resources.multipliers(spec), resources.features(spec)

    def rtl_sources(self) -> list[Path]:
        """The files of ``rtl/tt`` (shared by the TT PEs, one module per file) that this PE's top uses
        (:func:`~codesign.hw.rtl_deps.used_sources`): another top's file is neither read nor hashed, so a change to
        ``tt1_pe.v`` leaves PE2's and PE3's Yosys reports and calibrations current."""
        sources = sorted((data_dir("rtl") / "tt").glob("*.v"))
        if not any(path.stem == self.rtl_top for path in sources):
            raise FileNotFoundError(f"no {self.rtl_top}.v in {data_dir('rtl') / 'tt'}")
        return used_sources(sources, self.rtl_top)

    def rtl_parameters(self, spec) -> dict[str, int]:
        return {key.upper(): int(getattr(spec, key)) for key in self.parameter_order}


class Tt1PE(_TtPE):
    name = "tt1"
    title = "TT PE1 (contraction over the last two axes)"
    spec_class = Tt1Spec
    cpp_struct = "pe1"
    reference_model = staticmethod(reference.pe1_reference)

    def rtl_parameters(self, spec) -> dict[str, int]:
        """The shared parameters, then ``B_ORDER`` (0 for ``B`` rows ``l`` outer, 1 for ``j`` outer) and ``J_PAIRS``
        (1 where the build sums rows ``j`` in pairs): the C++ template's last parameters and the Verilog module's."""
        return {**super().rtl_parameters(spec), "B_ORDER": int(spec.b_jl), "J_PAIRS": int(spec.j_pairs)}

    def verification_grid(self) -> list[GridCase]:
        """Paper widths forward (8 x 4) and backward (16 x 4), the 16 x 8 array and smaller ones, 16-bit sums; each
        again with 10^4 contractions (``long``); the same at 64- and 128-bit streams (:func:`width_grid`); then
        the builds that take ``B`` ``j`` outer (:func:`b_order_grid`) and those that sum rows ``j`` in pairs
        (:func:`j_pairs_grid`)."""
        grid = width_grid([
            GridCase("l16r8_a8b4_acc32", Tt1Spec()),
            GridCase("l16r8_a16b4_acc32", Tt1Spec(a_bits=16, max_j=8, max_k=40, max_l=20)),
            GridCase("l4r3_a16b16_acc16", Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5,
                                                  max_k=9, max_l=7)),
            GridCase("l1r1_a3b2_acc16", Tt1Spec(lanes=1, rows=1, a_bits=3, b_bits=2, acc_bits=16, max_j=3, max_k=5,
                                                max_l=4)),
            GridCase("l8r8_a8b8_acc20", Tt1Spec(lanes=8, rows=8, a_bits=8, b_bits=8, acc_bits=20, max_j=4,
                                                max_k=24, max_l=17)),
        ], partial(header_top_cases, Tt1Spec))
        grid += b_order_grid(len(grid))
        return grid + j_pairs_grid(len(grid))

    def estimate_specs(self) -> list[Tt1Spec]:
        return [Tt1Spec(), Tt1Spec(a_bits=16), Tt1Spec(lanes=8, rows=4)]

    def calibration_specs(self) -> list[Tt1Spec]:
        """The training widths (16-bit gradients by 8-bit states), lanes 2..16 and rows 1..8 at 32-bit streams,
        :data:`WIDE_CALIBRATION` at 64 and 128 bits, then :data:`JL_CALIBRATION` built to take ``B`` ``j`` outer
        (its extra address logic scales with the ``B`` address bits: 14, 12, 10 and 10 there) and
        :data:`JP_CALIBRATION` summing rows ``j`` in pairs."""
        return [Tt1Spec(lanes=lanes, rows=rows, a_bits=16, b_bits=8, stream_bits=bits, b_order=order, j_pairs=pairs)
                for lanes, rows, bits, order, pairs in
                [(lanes, rows, WORD_BITS, "lj", False) for lanes, rows in CALIBRATION_ARRAYS]
                + [(*build, "lj", False) for build in WIDE_CALIBRATION]
                + [(*build, "jl", False) for build in JL_CALIBRATION] + [(*build, True) for build in JP_CALIBRATION]]


class Tt2PE(_TtPE):
    name = "tt2"
    title = "TT PE2 (contraction along a non-last axis)"
    spec_class = Tt2Spec
    cpp_struct = "pe2"
    reference_model = staticmethod(reference.pe2_reference)

    def rtl_parameters(self, spec) -> dict[str, int]:
        """The shared parameters, then ``ROW_PAIRS``: 1 where the build has row pairs (the C++ template's last
        parameter and the Verilog module's; the C++ computes the same words either way)."""
        return {**super().rtl_parameters(spec), "ROW_PAIRS": int(spec.row_pairs)}

    def verification_grid(self) -> list[GridCase]:
        """Paper widths forward (8 x 4) and backward (16 x 4), the 16 x 8 array and smaller ones, 16-bit sums; each
        again with 10^4 contractions (``long``); the same at 64- and 128-bit streams (:func:`width_grid`); then
        the builds with row pairs (:func:`row_pairs_grid`)."""
        grid = width_grid([
            GridCase("l16r8_a8b4_acc32", Tt2Spec(max_j=20, max_k=40, max_l=20)),
            GridCase("l16r8_a16b4_acc32", Tt2Spec(a_bits=16, max_j=12, max_k=33, max_l=17)),
            GridCase("l4r3_a16b16_acc16", Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5,
                                                  max_k=9, max_l=7)),
            GridCase("l1r1_a3b2_acc16", Tt2Spec(lanes=1, rows=1, a_bits=3, b_bits=2, acc_bits=16, max_j=3, max_k=5,
                                                max_l=4)),
            GridCase("l8r8_a8b8_acc20", Tt2Spec(lanes=8, rows=8, a_bits=8, b_bits=8, acc_bits=20, max_j=9,
                                                max_k=24, max_l=17)),
        ], partial(header_top_cases, Tt2Spec))
        return grid + row_pairs_grid(len(grid))

    def estimate_specs(self) -> list[Tt2Spec]:
        return [Tt2Spec(), Tt2Spec(a_bits=16), Tt2Spec(lanes=8, rows=4)]

    def calibration_specs(self) -> list[Tt2Spec]:
        """The training widths (16-bit gradients by 4-bit cores), lanes 2..16 and rows 1..8 at 32-bit streams,
        :data:`WIDE_CALIBRATION` at 64 and 128 bits, then :data:`RP_CALIBRATION` built with row pairs."""
        return [Tt2Spec(lanes=lanes, rows=rows, a_bits=16, b_bits=4, stream_bits=bits, row_pairs=pairs)
                for lanes, rows, bits, pairs in
                [(lanes, rows, WORD_BITS, False) for lanes, rows in CALIBRATION_ARRAYS]
                + [(*build, False) for build in WIDE_CALIBRATION] + [(*build, True) for build in RP_CALIBRATION]]


class Tt3PE(_TtPE):
    name = "tt3"
    title = "TT PE3 (outer product of the weight gradient)"
    spec_class = Tt3Spec
    cpp_struct = "pe3"
    reference_model = staticmethod(reference.pe3_reference)
    parameter_order = ("lanes", "a_bits", "b_bits", "max_j", "stream_bits")

    def verification_grid(self) -> list[GridCase]:
        """Paper widths (8-bit inputs x 16-bit gradients, 16 lanes), 16 x 16 and narrow codes, 1..8 lanes; each again
        with 10^4 contractions (``long``); the same at 64- and 128-bit streams, where the 255-long ``B`` of
        ``l8_a12b5`` (and ``I`` = 255 in every directed set) puts both header fields at their top
        (:func:`width_grid`)."""
        return width_grid([
            GridCase("l16_a8b16", Tt3Spec()),
            GridCase("l16_a16b16", Tt3Spec(a_bits=16, max_j=40)),
            GridCase("l4_a4b8", Tt3Spec(lanes=4, a_bits=4, b_bits=8, max_j=9)),
            GridCase("l1_a2b3", Tt3Spec(lanes=1, a_bits=2, b_bits=3, max_j=5)),
            GridCase("l8_a12b5", Tt3Spec(lanes=8, a_bits=12, b_bits=5, max_j=255)),
        ], pe3_top_cases)

    def estimate_specs(self) -> list[Tt3Spec]:
        return [Tt3Spec(), Tt3Spec(a_bits=16), Tt3Spec(lanes=8)]

    def calibration_specs(self) -> list[Tt3Spec]:
        """8-bit activations by 16-bit gradients, 2..16 lanes at 32-bit streams, and :data:`WIDE_CALIBRATION_PE3`."""
        return [Tt3Spec(lanes=lanes, a_bits=8, b_bits=16, stream_bits=bits) for lanes, bits in
                [(lanes, WORD_BITS) for lanes in (2, 4, 8, 16)] + list(WIDE_CALIBRATION_PE3)]
