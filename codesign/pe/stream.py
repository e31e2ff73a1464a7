"""The shared half of every stream PE (valid/ready word streams, transaction vector files).

A stream PE's stimulus is a list of transactions ``(words_in, expected_words_out)``
made by its golden model; the C testbench (``hls_templates/common/stream_testbench.cpp.j2``)
and the cocotb bench (:mod:`codesign.hw.stream_bench`) are the same for all of
them. A subclass supplies the spec-specific parts: its vector metadata, its
stimulus and an independent reference model for the golden level.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from codesign.contracts.constants import WORD_BITS
from codesign.hw.vectors import VectorFileError, read_transactions, write_transactions
from codesign.hw.protocol import LevelResult, ProcessingElement, RtlOutcome

Transaction = tuple[np.ndarray, np.ndarray]


class StreamPE(ProcessingElement):
    """A PE on 32-bit word streams. Its HLS project is the same for every stream PE, so it is written once here:
    the kernel pair ``hls_templates/stream/kernel.{h,cpp}.j2`` (the top calls ``pe_t::process``, ``pe_t`` being
    :attr:`cpp_type` instantiated with the spec's parameters in ``<name>_config``), the shared testbench and Tcl,
    and one :meth:`template_context`. A PE names its C++ class template, its tested headers (the library first),
    its docs page and what one transaction carries; its files are ``<name>.cpp``, ``<name>.h``,
    ``<name>_tb.cpp`` and ``run_hls.tcl``, its RTL top ``<name>_pe``.
    """

    handshake = "stream"
    interfaces = ("axis",)
    bench_module = "codesign.hw.stream_bench"
    kernel_header: ClassVar[str]  # project file declaring the top and ``stream_word_t``
    cpp_type: ClassVar[str]  # the C++ class template implementing the PE, e.g. ``codesign::csb::pe``
    doc: ClassVar[str]  # the docs page specifying the PE's stream, e.g. ``docs/csb.md``
    transaction: ClassVar[str]  # what one transaction carries in and out (the kernel header's comment)
    stateful: ClassVar[bool] = False  # an answer may depend on the transactions before it (its sessions keep that)
    # the PE chains a long sum across its own transactions (an accumulate flag, HOLD and CARRY), so no call list
    # for it holds sums in the shell's accumulation buffer: its IPs' shells are built without one unless a design
    # asks ([design.pe.<pe>] held_sums; codesign.shell.ip.render_accel_rtl)
    chains_own_sums: ClassVar[bool] = False
    # on a wide stream a list's call takes every part the PE sends after its status, the last beat's unused ones
    # too (the CSB PE's list model counts them: codesign.step.list_pe.csb_phases); a TT PE's calls count its results
    sends_whole_beats: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if name is None:  # a family's shared base (the TT PEs'), not a PE
            return
        files = {"kernel_cpp": f"{name}.cpp", "kernel_h": f"{name}.h", "tb": f"{name}_tb.cpp"}
        cls.templates = {files["kernel_cpp"]: "stream/kernel.cpp.j2", files["kernel_h"]: "stream/kernel.h.j2",
                         files["tb"]: "common/stream_testbench.cpp.j2", "run_hls.tcl": "common/run_hls.tcl.j2"}
        cls.kernel_files = (files["kernel_cpp"], files["kernel_h"], *cls.headers)
        cls.kernel_header = files["kernel_h"]
        cls.testbench_file = files["tb"]
        cls.rtl_top = f"{name}_pe"

    def vector_meta(self, spec) -> dict[str, object]:
        """Metadata every harness checks against its build (the spec fields that change results)."""
        return {key: value for key, value in spec.to_dict().items()}

    def reference_output(self, spec, words_in: np.ndarray) -> np.ndarray:
        """Expected output words of one transaction from a model independent of the golden one."""
        raise NotImplementedError

    def golden_output(self, spec, words_in: np.ndarray) -> np.ndarray:
        """Expected output words of one transaction by the PE's fastest model (a golden list runner takes it for
        a whole training step's calls); the reference unless a PE has a faster golden held equal to it."""
        return self.reference_output(spec, words_in)

    def reference_session(self, spec) -> Callable[[np.ndarray], np.ndarray]:
        """A function answering one transaction after another by :meth:`reference_output`; a PE that keeps state
        from one transaction to the next (the CSB PE's held sums) keeps it in the function."""
        return lambda words_in: self.reference_output(spec, words_in)

    def golden_session(self, spec) -> Callable[[np.ndarray], np.ndarray]:
        """As :meth:`reference_session`, by :meth:`golden_output`."""
        return lambda words_in: self.golden_output(spec, words_in)

    def transaction_cycles(self, spec, words_in: np.ndarray) -> int:
        """Clock cycles of one transaction on the RTL without input gaps or backpressure, from the first input
        handshake to the last output handshake (the figure :mod:`codesign.hw.stream_bench` reports), by the PE's
        cycle model; the RTL tests hold the RTL to it exactly."""
        raise NotImplementedError(f"PE {self.name} has no cycle model")

    # -- vectors ------------------------------------------------------------------
    def write_vectors(self, spec, stimulus: list[Transaction], path: Path) -> Path:
        return write_transactions(Path(path), pe=self.name, transactions=stimulus, meta=self.vector_meta(spec))

    def read_vectors(self, spec, path: Path) -> list[Transaction]:
        transactions, meta = read_transactions(Path(path), pe=self.name)
        wanted = {key: str(value) for key, value in self.vector_meta(spec).items()}
        wrong = {key: meta.get(key) for key, value in wanted.items() if meta.get(key) != value}
        if wrong:
            raise VectorFileError(f"{path} was written for {wrong}, but the spec has {wanted}")
        return transactions

    def check_vectors(self, spec, path: Path) -> int:
        return len(self.read_vectors(spec, path))

    def check_golden(self, spec, path: Path) -> LevelResult:
        """Every transaction's expected words against the reference, in the file's order (:meth:`reference_session`)."""
        start = time.perf_counter()
        transactions = self.read_vectors(spec, path)
        answer = self.reference_session(spec)
        mismatches = sum(not np.array_equal(np.asarray(answer(words_in)).astype(np.uint64), words_out)
                         for words_in, words_out in transactions)
        return LevelResult("golden", len(transactions), mismatches, time.perf_counter() - start,
                           "vs independent reference model")

    # -- HLS -----------------------------------------------------------------------
    def stream_context(self, spec) -> dict[str, Any]:
        """Template names the shared stream testbench (and the accelerator shell's) need, the stream word's width
        among them: a spec's ``stream_bits`` (the TT and CSB PEs' 32, 64 or 128; 32 for a spec without), whose
        words vector files and DMA buffers hold as ``word_parts`` consecutive 32-bit words."""
        bits = int(getattr(spec, "stream_bits", WORD_BITS))
        return {"kernel_header": self.kernel_header, "word_bits": WORD_BITS, "vector_meta": self.vector_meta(spec),
                "stream_word_bits": bits, "word_parts": bits // WORD_BITS}

    def template_context(self, spec, target) -> dict[str, Any]:
        """Everything the kernel pair and the stream testbench use: names, the spec as the C++ template's
        parameters (:meth:`rtl_parameters`, the Verilog module's too, in the same order), and the stream width."""
        parameters = self.rtl_parameters(spec)
        config = f"{self.name}_config"
        return {**self.stream_context(spec), "kernel_file": self.kernel_files[0], "library_header": self.headers[0],
                "title": self.title, "doc": self.doc, "transaction": self.transaction, "cpp_type": self.cpp_type,
                "summary": ", ".join(f"{key}={value}" for key, value in spec.to_dict().items()),
                "parameters": parameters, "config_namespace": config,
                "pe_type": f"{self.cpp_type}<" + ", ".join(f"{config}::{name}" for name in parameters) + ">",
                "guard": f"CODESIGN_{self.name.upper()}_KERNEL_H"}

    # -- RTL -----------------------------------------------------------------------
    def bench_environment(self, spec, vectors: Path, summary: Path, seed: int) -> dict[str, str]:
        return {"STREAM_VECTORS": str(vectors), "STREAM_SUMMARY": str(summary), "STREAM_SEED": str(seed),
                "STREAM_PE": self.name, "STREAM_WORD_PARTS": str(self.stream_context(spec)["word_parts"])}

    def rtl_outcome(self, spec, summary: dict, vectors: Path) -> RtlOutcome:
        # a word the RTL never produced, or one too many, is a mismatch as much as a wrong word
        missing, extra = int(summary.get("missing_words", 0)), int(summary.get("extra_words", 0))
        notes = [f"{missing} expected words never produced" + (" (bench timed out)" if summary.get("timed_out") else "")
                 ] if missing else []
        notes += [f"{extra} words produced beyond the expected stream"] if extra else []
        return RtlOutcome(vectors=int(summary["transactions"]), mismatches=int(summary["mismatches"]) + missing + extra,
                          first_mismatches=tuple(notes + [str(entry) for entry in summary.get("first_mismatches", [])]),
                          cycles=tuple(int(c) for c in summary.get("cycles", [])))
