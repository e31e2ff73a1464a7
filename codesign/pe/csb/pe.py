"""The CSB room on the PE protocol: a stream PE whose golden model is :mod:`codesign.pe.csb.stream`.

HLS: a thin top over ``codesign::csb::pe`` (``hls_templates/include/codesign_csb.h``),
AXI4-Stream in and out. RTL: ``rtl/csb`` (top ``csb_pe``), checked by the
shared valid/ready bench with random gaps and backpressure. The golden level
compares every expected word with :mod:`codesign.pe.csb.reference`, a second
model written independently from docs/csb.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from codesign.pe.csb import cycles
from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import build_transactions, count_macs, top_up_updates
from codesign.pe.csb.stimulus_chain import chain_transactions
from codesign.pe.csb.stimulus_ext import ext_transactions
from codesign.pe.csb.stimulus_k1 import k1_transactions
from codesign.pe.csb.stimulus_loss import loss_transactions
from codesign.pe.csb.stimulus_stride import stride_transactions
from codesign.pe.csb.stimulus_wide import wide_transactions
from codesign.hw.constants_gen import HEADER_NAME as CONSTANTS_HEADER, LOSS_HEADER_NAME
from codesign.hw.protocol import GridCase
from codesign.pe.stream import StreamPE, Transaction
from codesign.numerics.inputs import check_seed

FILES = {
    "kernel_cpp": "csb.cpp",
    "kernel_h": "csb.h",
    "library_h": "codesign_csb.h",
    "testbench_cpp": "csb_tb.cpp",
    "tcl": "run_hls.tcl",
}
MAC_OPS = ("fp", "eb", "wg")
MAX_ROUNDS = 6  # stimulus doublings before giving up on the MAC target


@dataclass(frozen=True, kw_only=True)
class CsbStimulusOptions:
    """What ``codesign verify csb`` checks: the directed set plus random transactions until every op
    (FP, EB, WG) has at least ``min_macs_per_op`` MACs, then full-block UPDs until UPD has updated as many
    buffer words, then the header flags' and element-wise ops' set until each of them (ZERO, G_FIRST, LEFT,
    SELECT, SHR, RELU) has as many values (:mod:`codesign.pe.csb.stimulus_ext`), then chains of held sums until
    ``HOLD`` and ``CARRY`` have as many MACs (:mod:`codesign.pe.csb.stimulus_chain`), then on a PE with
    stride 2 stride-2 transactions until FP, EB and WG each have as many MACs at stride 2
    (:mod:`codesign.pe.csb.stimulus_stride`), then kernel-1 transactions (header ``K1``) until FP, EB and WG
    each have as many MACs and UPD as many buffer words under it (:mod:`codesign.pe.csb.stimulus_k1`), then
    LOSS transactions until as many codes are checked (:mod:`codesign.pe.csb.stimulus_loss`).
    """

    min_macs_per_op: int = 10_000
    seed: int = 2024

    def __post_init__(self) -> None:
        check_seed(self.seed)
        if isinstance(self.min_macs_per_op, bool) or not isinstance(self.min_macs_per_op, int) or self.min_macs_per_op < 0:
            raise ValueError(f"min_macs_per_op must be an int >= 0, got {self.min_macs_per_op!r}")


def _reached(spec: CsbSpec, transactions: list[Transaction], target: int) -> bool:
    macs = count_macs(spec, transactions)
    return all(macs[op] >= target for op in MAC_OPS)


class CsbPE(StreamPE):
    name = "csb"
    title = "sparse-CSB training PE"
    spec_class = CsbSpec
    stimulus_class = CsbStimulusOptions
    headers = (FILES["library_h"], "codesign_csb_loss.h", LOSS_HEADER_NAME, CONSTANTS_HEADER)
    cpp_type = "codesign::csb::pe"
    doc = "docs/csb.md"
    transaction = "header, index, sections in; status, results out"
    stateful = True  # HOLD leaves the sums in the PE for the next transaction's CARRY
    chains_own_sums = True  # HOLD and CARRY: a list's chains never reach the shell's accumulation buffer
    sends_whole_beats = True  # a wide build's calls take the last result beat's zeros too (docs/csb.md)

    def build_stimulus(self, spec: CsbSpec, options: CsbStimulusOptions) -> list[Transaction]:
        """Directed cases plus random transactions, doubling their number until the MAC target is met; on a wide
        stream the 32-bit build's set as beats, plus what only beats have (:mod:`codesign.pe.csb.stimulus_wide`)."""
        if spec.parts > 1:
            pairs = self.build_stimulus(replace(spec, stream_bits=32), options)
            return wide_transactions(spec, pairs, seed=options.seed)
        per_transaction = max(1, spec.capacity // 2 * spec.kk * spec.out_pos * spec.batch // 4)
        count = max(8, -(-2 * options.min_macs_per_op // per_transaction))
        for _ in range(MAX_ROUNDS):
            transactions = build_transactions(spec, count=count, seed=options.seed)
            if _reached(spec, transactions, options.min_macs_per_op):
                transactions = top_up_updates(spec, transactions, target=options.min_macs_per_op, seed=options.seed)
                target, seed = options.min_macs_per_op, options.seed
                return transactions + ext_transactions(spec, target=target, seed=seed) + \
                    chain_transactions(spec, target=target, seed=seed) + \
                    stride_transactions(spec, target=target, seed=seed) + \
                    k1_transactions(spec, target=target, seed=seed) + \
                    loss_transactions(spec, target=target, seed=seed)
            count *= 2
        raise ValueError(f"{count} random transactions did not reach {options.min_macs_per_op} MACs per op")

    def reference_output(self, spec: CsbSpec, words_in):
        return np.array(reference_output([int(w) for w in words_in], **spec.to_dict()), dtype=np.uint64)

    def reference_session(self, spec: CsbSpec):
        """The reference with the PE's held sums kept from one transaction to the next (``HOLD``, ``CARRY``)."""
        state: dict = {}
        return lambda words_in: np.array(reference_output([int(w) for w in words_in], **spec.to_dict(), state=state),
                                         dtype=np.uint64)

    def golden_session(self, spec: CsbSpec):
        """The NumPy golden with the PE's held sums (:class:`codesign.pe.csb.stream.CsbSession`), held equal to the
        reference at the golden level: a golden list runner takes it for a whole training step's calls."""
        from codesign.pe.csb.stream import CsbSession

        session = CsbSession(spec)
        return lambda words_in: session.answer(words_in).astype(np.uint64)

    def transaction_cycles(self, spec: CsbSpec, words_in) -> int:
        return cycles.stream_cycles(spec, words_in)

    def rtl_parameters(self, spec: CsbSpec) -> dict[str, int]:
        return {"BLOCK_ROWS": spec.block_rows, "BLOCK_COLS": spec.block_cols, "K": spec.kernel, "OUT_H": spec.out_h,
                "OUT_W": spec.out_w, "BATCH": spec.batch, "PARALLEL": spec.parallel, "ACC_BITS": spec.acc_bits,
                "MAX_STRIDE": spec.max_stride, "PACKED": int(spec.packed), "STREAM_BITS": spec.stream_bits,
                "LOSS": int(spec.loss)}

    # resource counts are what the CSB estimate reports; abc9 spends over ten minutes on a 16 x 16 block
    estimate_abc9 = False

    def verification_grid(self) -> list[GridCase]:
        """FC and CONV blocks from 1 x 1-entry corner cases to full 16 x 16, lanes 2..8, groups 1..4, 16/32-bit sums;
        the nine CONV points are built with stride 2 (kernels 1 and 3, groups 2..4, odd and even tile widths), one of
        them packed (two products a DSP slice) and the last two on 64- and 128-bit streams; five of them carry the
        LOSS unit (the others check that a build without it refuses LOSS).
        The three points whose RTL runs take minutes are ``slow``: make test-slow runs them at RTL under stalls at
        the quick stimulus (tests/pe/test_stream_rtl.py), and make test-long at the full one. make test runs the
        quick points at golden and the first, a full FC block, at C-sim; make test-slow the rest at C-sim and RTL
        (tests/pe/csb/test_csb_rtl_cases.py runs CSB's RTL in make test)."""
        return [
            GridCase("fc16_b8", CsbSpec(block_rows=16, block_cols=16, batch=8, loss=True)),
            GridCase("fc3x8_b2_acc16", CsbSpec(block_rows=3, block_cols=8, batch=2, acc_bits=16, loss=True),
                     slow=True),
            GridCase("conv4_k3_t4_b4_p2", CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=4, out_w=4, batch=4,
                                                  parallel=2, max_stride=2), slow=True),
            GridCase("conv2_k3_t2x3_b2_p4_acc16", CsbSpec(block_rows=2, block_cols=3, kernel=3, out_h=2, out_w=3,
                                                          batch=2, parallel=4, acc_bits=16, max_stride=2, loss=True)),
            GridCase("conv16_k1_t2_b4_p4", CsbSpec(block_rows=16, block_cols=16, kernel=1, out_h=2, out_w=2, batch=4,
                                                   parallel=4, max_stride=2), slow=True),
            GridCase("conv3x2_k3_t3x2_b2_p3_acc16", CsbSpec(block_rows=3, block_cols=2, kernel=3, out_h=3, out_w=2,
                                                            batch=2, parallel=3, acc_bits=16, max_stride=2)),
            GridCase("conv4_k1_t3_b3_p2", CsbSpec(block_rows=4, block_cols=4, kernel=1, out_h=3, out_w=3, batch=3,
                                                  parallel=2, max_stride=2), slow=True),
            # its 200 stride-2 EB sums fit one SELECT with CARRY
            GridCase("conv8_k3_t2_b1_p2", CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=2, out_w=2, batch=1,
                                                  parallel=2, max_stride=2), slow=True),
            # two products a DSP slice: FP's and EB's lanes in pairs, WG's steps in two halves
            GridCase("conv4_k3_t2_b4_p2_packed", CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2,
                                                         batch=4, parallel=2, max_stride=2, packed=True)),
            # wide streams: two and four 32-bit parts a beat (every section from a new beat)
            GridCase("conv4_k3_t3x2_b4_p2_w64", CsbSpec(block_rows=4, block_cols=3, kernel=3, out_h=3, out_w=2,
                                                        batch=4, parallel=2, max_stride=2, stream_bits=64, loss=True)),
            GridCase("conv3x5_k3_t2_b8_p2_acc16_w128", CsbSpec(block_rows=3, block_cols=5, kernel=3, out_h=2,
                                                               out_w=2, batch=8, parallel=2, acc_bits=16,
                                                               max_stride=2, stream_bits=128, loss=True)),
        ]

    def estimate_specs(self) -> list[CsbSpec]:
        return [CsbSpec(block_rows=16, block_cols=16, batch=8),
                CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=4, out_w=4, batch=4, parallel=2),
                CsbSpec(block_rows=16, block_cols=16, kernel=3, out_h=4, out_w=4, batch=4, parallel=4)]

    def calibration_specs(self) -> list[CsbSpec]:
        """The grid of :func:`codesign.pe.csb.resources.calibration_specs`."""
        from codesign.pe.csb import resources

        return resources.calibration_specs()

    def resource_parts(self, spec: CsbSpec):
        """RAMs, multipliers and LUT/FF features of ``spec`` (:mod:`codesign.pe.csb.resources`)."""
        from codesign.pe.csb import resources

        self.check_spec(spec)
        return resources.memories(spec), resources.multipliers(spec), resources.features(spec)
