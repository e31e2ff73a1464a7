"""The FP-MAC room on the PE protocol: files, ports, vectors and RTL bench of the FB-configurable FP-MAC.

The HLS project is flat and self-contained: the kernel, its header, the copied
arithmetic header ``codesign_fpmac.h``, the shared vector reader, the C
testbench, the golden vector file and ``run_hls.tcl`` sit side by side, so
``vitis_hls -f run_hls.tcl`` and the g++ C-sim compile the same sources. The
RTL (``rtl/fpmac``, top ``fpmac``) is a fixed-latency pipeline checked by
:mod:`codesign.pe.fpmac.bench`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codesign.hw.rtlsim import RtlSimError
from codesign.hw.target import BuildTarget
from codesign.hw.vectors import VectorFileError, read_vectors, write_vectors
from codesign.numerics import FloatFormat
from codesign.numerics.reference import reference_mac
from codesign.pe.fpmac.golden import clamp_fb, from_container, to_container
from codesign.contracts.constants import WORD_BITS
from codesign.pe.fpmac.spec import LATENCY, FpmacSpec
from codesign.pe.fpmac.stimulus import COLUMNS, Stimulus, build_stimulus
from codesign.hw.protocol import GridCase, LevelResult, ProcessingElement, RtlOutcome
from codesign.numerics.inputs import check_seed

GOLDEN_SAMPLE = 3000  # vectors the golden level re-derives with the exact Fraction reference
# Project file names.
FILES = {
    "kernel_cpp": "fpmac.cpp",
    "kernel_h": "fpmac.h",
    "library_h": "codesign_fpmac.h",
    "testbench_cpp": "fpmac_tb.cpp",
    "tcl": "run_hls.tcl",
}
# Top-function arguments in order. Signature, INTERFACE pragmas and the testbench call
# are all rendered from this list, so they cannot name different ports.
COUNT_PORT, FB_PORT, OUTPUT_PORT = "n", "fb", "out"
PORTS = (
    {"name": "a", "role": "input"},
    {"name": "b", "role": "input"},
    {"name": "c", "role": "input"},
    {"name": OUTPUT_PORT, "role": "output"},
    {"name": COUNT_PORT, "role": "scalar", "ctype": "count_t"},
    {"name": FB_PORT, "role": "scalar", "ctype": "fb_t"},
)


@dataclass(frozen=True, kw_only=True)
class FpmacStimulusOptions:
    """What ``codesign verify fpmac`` checks: random MACs per run-time FB value, plus the directed set.

    ``fb_values`` empty means six values spread over [3, max_fb]; fb = 1 and 2
    and the fb-clamp cases are always added.
    """

    fb_values: tuple[int, ...] = ()
    random_per_fb: int = 10_000
    seed: int = 2024

    def __post_init__(self) -> None:
        check_seed(self.seed)
        if isinstance(self.random_per_fb, bool) or not isinstance(self.random_per_fb, int) or self.random_per_fb < 1:
            raise ValueError(f"random_per_fb must be a positive int, got {self.random_per_fb!r}")
        if any(isinstance(fb, bool) or not isinstance(fb, int) or fb < 0 for fb in self.fb_values):
            raise ValueError(f"fb_values must be non-negative ints, got {self.fb_values!r}")


def vector_meta(spec: FpmacSpec) -> dict[str, object]:
    """The metadata line of FP-MAC vector files; every harness checks it against its build."""
    return {"exp_bits": spec.exp_bits, "max_fb": spec.max_fb, "rounding": spec.rounding}


class FpmacPE(ProcessingElement):
    name = "fpmac"
    title = "FP-MAC"
    spec_class = FpmacSpec
    stimulus_class = FpmacStimulusOptions
    interfaces = ("m_axi", "axis")
    handshake = "pipeline"
    templates = {
        FILES["kernel_cpp"]: "fpmac/kernel.cpp.j2",
        FILES["kernel_h"]: "fpmac/kernel.h.j2",
        FILES["testbench_cpp"]: "fpmac/testbench.cpp.j2",
        FILES["tcl"]: "common/run_hls.tcl.j2",
    }
    headers = (FILES["library_h"],)
    kernel_files = (FILES["kernel_cpp"], FILES["kernel_h"], FILES["library_h"])
    testbench_file = FILES["testbench_cpp"]
    rtl_top = "fpmac"
    bench_module = "codesign.pe.fpmac.bench"
    latency = LATENCY

    # -- golden model and vectors ------------------------------------------------
    def check_stimulus(self, spec: FpmacSpec, options: FpmacStimulusOptions) -> None:
        above = [fb for fb in options.fb_values if fb > spec.max_fb]
        if above:
            raise ValueError(f"fb_values {above} exceed the spec's max_fb={spec.max_fb}")

    def build_stimulus(self, spec: FpmacSpec, options: FpmacStimulusOptions) -> Stimulus:
        return build_stimulus(spec, fb_values=list(options.fb_values) or None, random_per_fb=options.random_per_fb,
                              seed=options.seed)

    def write_vectors(self, spec: FpmacSpec, stimulus: Stimulus, path: Path) -> Path:
        return write_vectors(Path(path), pe=self.name, columns=stimulus.columns(), meta=vector_meta(spec))

    def read_vectors(self, spec: FpmacSpec, path: Path) -> dict[str, np.ndarray]:
        columns, meta = read_vectors(Path(path), pe=self.name, columns=COLUMNS)
        wanted = {key: str(value) for key, value in vector_meta(spec).items()}
        wrong = {key: meta[key] for key, value in wanted.items() if key in meta and meta[key] != value}
        if wrong:
            raise VectorFileError(f"{path} was written for {wrong}, but the spec has {wanted}")
        return columns

    def check_vectors(self, spec: FpmacSpec, path: Path) -> int:
        return int(self.read_vectors(spec, path)["a"].size)

    def check_golden(self, spec: FpmacSpec, path: Path, *, sample: int = GOLDEN_SAMPLE) -> LevelResult:
        """The file's expected column against the exact rational reference on a deterministic sample."""
        start = time.perf_counter()
        columns = self.read_vectors(spec, path)
        count = columns["a"].size
        picks = np.unique(np.linspace(0, count - 1, min(sample, count)).astype(np.int64))
        mismatches = 0
        for index in picks:
            fb = int(clamp_fb(int(columns["fb"][index]), spec.max_fb))
            fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=fb, rounding=spec.rounding)
            a, b, c = (int(from_container(columns[name][index], fb, max_fb=spec.max_fb)) for name in "abc")
            expected = int(to_container(reference_mac(a, b, c, fmt), fb, max_fb=spec.max_fb))
            mismatches += expected != int(columns["expected"][index])
        return LevelResult("golden", int(picks.size), mismatches, time.perf_counter() - start,
                           "vs exact Fraction reference")

    # -- HLS project ---------------------------------------------------------------
    def template_context(self, spec: FpmacSpec, target: BuildTarget) -> dict[str, object]:
        if spec.width > WORD_BITS:
            from codesign.hw.render import RenderError

            raise RenderError(f"a {spec.width}-bit container does not fit a {WORD_BITS}-bit word")
        return {
            "title": self.title,
            "summary": f"E={spec.exp_bits} MAX_FB={spec.max_fb} rounding={spec.rounding}",
            "width": spec.width,
            "fb_bits": spec.fb_bits,
            "rounding_code": spec.rounding_code,
            "word_bits": WORD_BITS,
            "ports": [dict(port) for port in PORTS],
            "count_port": COUNT_PORT,
            "fb_port": FB_PORT,
            "output_port": OUTPUT_PORT,
            "files": dict(FILES),
            "columns": list(COLUMNS),
        }

    # -- RTL -----------------------------------------------------------------------
    def rtl_parameters(self, spec: FpmacSpec) -> dict[str, int]:
        return {"EXP_BITS": spec.exp_bits, "MAX_FB": spec.max_fb, "ROUNDING": spec.rounding_code}

    def bench_environment(self, spec: FpmacSpec, vectors: Path, summary: Path, seed: int) -> dict[str, str]:
        return {
            "FPMAC_VECTORS": str(vectors),
            "FPMAC_SUMMARY": str(summary),
            "FPMAC_SPEC": json.dumps(vector_meta(spec)),
            "FPMAC_LATENCY": str(LATENCY),
            "FPMAC_SEED": str(seed),
        }

    def rtl_outcome(self, spec: FpmacSpec, summary: dict, vectors: Path) -> RtlOutcome:
        if summary["stale_rows"]:
            raise VectorFileError(f"{vectors}: {summary['stale_rows']} expected values disagree with "
                                  f"golden_container_mac (rows {summary['first_stale']}): regenerate the file")
        if summary["parameter_problems"]:
            raise RtlSimError(f"DUT parameters differ from the spec: {summary['parameter_problems']}")
        protocol = {name: int(summary[name]) for name in ("missing_outputs", "unexpected_outputs", "latency_errors")}
        if any(protocol.values()):
            problems = "; ".join(_describe(entry) for entry in summary["first_mismatches"])
            raise RtlProtocolError(f"{self.rtl_top}: {protocol}, first problems: {problems}")
        return RtlOutcome(vectors=int(summary["outputs"]), mismatches=int(summary["mismatches"]),
                          first_mismatches=tuple(_describe(entry) for entry in summary["first_mismatches"]))

    def verification_grid(self) -> list[GridCase]:
        """Formats from fp32-like to the smallest (E=2, MAX_FB=1), all three rounding modes, both interfaces.

        Small MAX_FB points test every fb from 1 with fewer random vectors; two
        use a small max_vectors so that one fb group takes several kernel calls.
        """
        maxi, axis = BuildTarget(interface="m_axi"), BuildTarget(interface="axis")
        options = FpmacStimulusOptions
        return [
            GridCase("e8_fb23_rne_maxi", FpmacSpec(exp_bits=8, max_fb=23, rounding="nearest_even"), maxi, slow=True),
            GridCase("e8_fb10_rne_axis", FpmacSpec(exp_bits=8, max_fb=10, rounding="nearest_even"), axis,
                     options(random_per_fb=2000)),
            GridCase("e5_fb7_rna_maxi", FpmacSpec(exp_bits=5, max_fb=7, rounding="nearest_away", max_vectors=2048),
                     maxi, options(fb_values=tuple(range(1, 8)), random_per_fb=3000)),
            GridCase("e4_fb3_rtz_axis", FpmacSpec(exp_bits=4, max_fb=3, rounding="toward_zero", max_vectors=1000),
                     axis, options(fb_values=(1, 2, 3), random_per_fb=3000)),
            GridCase("e8_fb4_rtz_maxi", FpmacSpec(exp_bits=8, max_fb=4, rounding="toward_zero"), maxi,
                     options(random_per_fb=2000)),
            GridCase("e2_fb1_rne_maxi", FpmacSpec(exp_bits=2, max_fb=1, rounding="nearest_even"), maxi,
                     options(fb_values=(1,), random_per_fb=3000)),
        ]

    # -- cost ------------------------------------------------------------------------
    def estimate_specs(self) -> list[FpmacSpec]:
        return [FpmacSpec(max_fb=max_fb) for max_fb in (7, 10, 16, 23)]


class RtlProtocolError(RtlSimError):
    """The DUT broke the pipeline protocol: a result missing, one too many, or at the wrong latency."""


def _describe(entry: dict) -> str:
    kind = entry.get("kind")
    if kind == "mismatch":
        return (f"vector {entry['index']}: a={entry['a']} b={entry['b']} c={entry['c']} fb={entry['fb']} "
                f"expected {entry['expected']} got {entry['actual']}")
    if kind == "latency":
        return f"vector {entry['index']}: result after {entry['cycles']} cycles, expected {entry['expected']}"
    return f"{kind}: {entry}"
