"""The FP-MAC array room on the PE protocol: a stream PE whose golden model is :mod:`codesign.pe.fpmac_array.golden`.

HLS: a thin top over ``codesign::fpmac_array::pe``
(``hls_templates/include/codesign_fpmac_array.h``, which reuses the MAC of
``codesign_fpmac.h``), AXI4-Stream in and out. RTL: ``rtl/fpmac_array`` (top
``fpmac_array_pe``) instantiating the ``rtl/fpmac`` MACs, checked by the
shared valid/ready bench with random gaps and backpressure. The golden level
compares every expected word with :mod:`codesign.pe.fpmac_array.reference`
(plain loops over exact-rational FP-MACs).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codesign.pe.fpmac_array import cycles, golden, reference, stimulus
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions
from codesign.hw.constants_gen import HEADER_NAME as CONSTANTS_HEADER
from codesign.hw.protocol import GridCase
from codesign.hw.rtl_deps import used_sources
from codesign.pe.stream import StreamPE, Transaction
from codesign.resources import data_dir

LIBRARY_HEADER = "codesign_fpmac_array.h"
FPMAC_HEADER = "codesign_fpmac.h"
# spec fields in the order of the C++ template's and the Verilog module's parameters
PARAMETER_ORDER = ("exp_bits", "max_fb", "rounding", "rows", "cols", "max_m", "max_n", "max_k")


class FpmacArrayPE(StreamPE):
    name = "fpmac_array"
    title = "FP-MAC array (accumulating GEMM)"
    spec_class = FpmacArraySpec
    stimulus_class = FpmacArrayStimulusOptions
    # the GEMM and its stream protocol, then the FP-MAC it calls and the word width and status codes
    headers = (LIBRARY_HEADER, FPMAC_HEADER, CONSTANTS_HEADER)
    cpp_type = "codesign::fpmac_array::pe"
    doc = "docs/fpmac_array.md"
    transaction = "header, A, B (, C_in) in; status and C out"
    estimate_abc9 = False  # resource counts are what the array estimates report
    chains_own_sums = True  # a GEMM cut along k streams its partial C back in (the header's accumulate flag)

    # -- golden model and vectors ------------------------------------------------------
    def build_stimulus(self, spec: FpmacArraySpec, options: FpmacArrayStimulusOptions) -> list[Transaction]:
        return stimulus.build(spec, options)

    def reference_output(self, spec: FpmacArraySpec, words_in) -> np.ndarray:
        return np.array(reference.reference_output(words_in, **spec.to_dict()), dtype=np.uint64)

    def golden_output(self, spec: FpmacArraySpec, words_in) -> np.ndarray:
        """The vectorised golden (:func:`codesign.pe.fpmac_array.golden.transaction_output`): a training step's
        thousands of transactions in seconds, where the exact-rational reference takes minutes."""
        return golden.transaction_output(spec, words_in)

    # -- HLS ---------------------------------------------------------------------------
    # -- RTL -----------------------------------------------------------------------------
    def rtl_sources(self) -> list[Path]:
        """``rtl/fpmac_array/*.v`` plus the FP-MAC it instantiates, ``rtl/fpmac/*.v`` (one module per file), those
        the top uses (:func:`~codesign.hw.rtl_deps.used_sources`)."""
        sources = sorted((data_dir("rtl") / self.name).glob("*.v")) + sorted((data_dir("rtl") / "fpmac").glob("*.v"))
        return used_sources(sources, self.rtl_top)

    def transaction_cycles(self, spec: FpmacArraySpec, words_in) -> int:
        return cycles.stream_cycles(spec, words_in)

    def rtl_parameters(self, spec: FpmacArraySpec) -> dict[str, int]:
        values = {**spec.to_dict(), "rounding": spec.rounding_code}
        return {key.upper(): int(values[key]) for key in PARAMETER_ORDER}

    def verification_grid(self) -> list[GridCase]:
        """Five formats (fp32-like to E=2/fb=1), all three roundings, arrays from 1 x 1 to 4 x 4, odd buffer sizes."""
        s = FpmacArraySpec
        return [
            GridCase("e8_fb23_rne_4x4", s(max_m=12, max_n=10, max_k=12)),
            GridCase("e5_fb10_rna_3x2", s(exp_bits=5, max_fb=10, rounding="nearest_away", rows=3, cols=2, max_m=9,
                                          max_n=7, max_k=12)),
            GridCase("e8_fb7_rtz_2x4", s(exp_bits=8, max_fb=7, rounding="toward_zero", rows=2, cols=4, max_m=7,
                                         max_n=9, max_k=16)),
            GridCase("e4_fb3_rne_1x1", s(exp_bits=4, max_fb=3, rows=1, cols=1, max_m=6, max_n=5, max_k=9)),
            GridCase("e2_fb1_rna_2x3", s(exp_bits=2, max_fb=1, rounding="nearest_away", rows=2, cols=3, max_m=5,
                                         max_n=7, max_k=6)),
        ]

    def estimate_specs(self) -> list[FpmacArraySpec]:
        return [FpmacArraySpec(), FpmacArraySpec(rows=8, cols=4, max_m=64, max_n=64, max_k=64)]

    def calibration_specs(self) -> list[FpmacArraySpec]:
        """The grid of :func:`codesign.pe.fpmac_array.resources.calibration_specs`."""
        from codesign.pe.fpmac_array import resources

        return resources.calibration_specs()

    def resource_parts(self, spec: FpmacArraySpec):
        """RAMs, multipliers and LUT/FF features of ``spec`` (:mod:`codesign.pe.fpmac_array.resources`)."""
        from codesign.pe.fpmac_array import resources

        self.check_spec(spec)
        return resources.memories(spec), resources.multipliers(spec), resources.features(spec)
