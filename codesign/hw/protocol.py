"""The PE protocol: what a processing element tells the generic flow, and nothing else.

Every stage of the hardware flow (render, C-sim, RTL sim, verify, estimate,
build; :mod:`codesign.hw.flow`) is written once against this class. A PE is
one *room*: ``codesign/pe/<name>/`` (golden kernel, spec, stimulus, cocotb
bench, and a ``pe.py`` subclass of :class:`ProcessingElement`),
``hls_templates/<name>/``, ``rtl/<name>/`` and ``tests/`` files of the same
name. Adding a PE means adding a room and one line to
:data:`codesign.pe.REGISTRY`; no flow code is copied.

Two kinds of hardware interface are supported, named by :attr:`handshake`:

* ``"pipeline"``: a fixed-latency pipeline with ``in_valid``/``out_valid``
  (every operation comes out exactly :attr:`latency` cycles later); its bench
  is the PE's own (``bench_module``), since operands are PE-specific ports;
* ``"stream"``: one 32-bit input and one 32-bit output stream with
  valid/ready handshakes (backpressure) on ports ``in_data``, ``in_valid``,
  ``in_ready``, ``out_data``, ``out_valid``, ``out_ready``; the bench is the
  generic :mod:`codesign.hw.stream_bench` and the vectors are transaction files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from codesign.hw.rtl_deps import used_sources
from codesign.hw.target import BuildTarget
from codesign.resources import data_dir

HANDSHAKES = ("pipeline", "stream")


@dataclass(frozen=True)
class LevelResult:
    """Outcome of one verification level: vectors compared bit for bit, how many differed, wall time (s)."""

    level: str
    vectors: int
    mismatches: int
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class RtlOutcome:
    """What a bench summary says once the PE has interpreted it: results checked and how many differed."""

    vectors: int
    mismatches: int
    first_mismatches: tuple[str, ...]
    cycles: tuple[int, ...] = ()  # per transaction (stream PEs), for cycle-model checks


@dataclass(frozen=True)
class GridCase:
    """One point of a PE's verification grid: the same spec, target and stimulus at every level.

    ``slow`` marks points the quick test run (``-m "not slow"``) leaves out;
    ``long`` marks points only the extended run (``make test-long``, ``-m long``) checks.
    """

    id: str
    spec: Any
    target: BuildTarget = BuildTarget()
    options: Any = None  # stimulus options; None means the PE's defaults
    slow: bool = False
    long: bool = False


class ProcessingElement:
    """Base of every PE. Subclasses set the class attributes and implement the methods that raise."""

    name: ClassVar[str]
    title: ClassVar[str]
    spec_class: ClassVar[type]  # the arithmetic spec: frozen, keyword-only, validated dataclass
    stimulus_class: ClassVar[type]  # stimulus options: frozen dataclass, its fields become `verify` flags
    interfaces: ClassVar[tuple[str, ...]]  # data interfaces the templates can render, the default first
    handshake: ClassVar[str]
    templates: ClassVar[Mapping[str, str]]  # project file name -> template under hls_templates/
    headers: ClassVar[tuple[str, ...]]  # tested C++ headers from hls_templates/include, copied verbatim
    kernel_files: ClassVar[tuple[str, ...]]  # project files that make the synthesised kernel
    testbench_file: ClassVar[str]  # project file of the C testbench
    vector_file: ClassVar[str] = "vectors.txt"
    rtl_top: ClassVar[str]
    bench_module: ClassVar[str]  # cocotb test module, importable from the installed package
    latency: ClassVar[int | None] = None  # cycles from in_valid to out_valid (pipeline PEs)
    # Yosys' timing-driven abc9 mapping gives the logic depth (ABVS's delay model needs it) but costs minutes on
    # PEs with wide buffers; PEs that only need resource counts turn it off
    estimate_abc9: ClassVar[bool] = True

    # -- specs ----------------------------------------------------------------
    def spec(self, **fields_: Any):
        """A validated arithmetic spec from keyword fields (defaults for the rest)."""
        return self.spec_class(**fields_)

    def check_spec(self, spec) -> None:
        if not isinstance(spec, self.spec_class):
            raise TypeError(f"the {self.name} PE needs a {self.spec_class.__name__}, got {type(spec).__name__}")

    def stimulus_options(self, **fields_: Any):
        return self.stimulus_class(**fields_)

    def check_stimulus(self, spec, options) -> None:
        """Refuse options that do not fit ``spec`` (ValueError naming the option), before anything is written;
        the options' own class checks each one alone."""

    # -- golden model and vectors ----------------------------------------------
    def build_stimulus(self, spec, options) -> Any:
        """Stimulus with golden results for ``spec``; ``options`` is a :attr:`stimulus_class` instance."""
        raise NotImplementedError

    def stimulus_count(self, stimulus) -> int:
        """Vectors (or transactions) in ``stimulus``."""
        return len(stimulus)

    def write_vectors(self, spec, stimulus, path: Path) -> Path:
        """Write ``stimulus`` as this PE's golden vector file (atomically)."""
        raise NotImplementedError

    def check_vectors(self, spec, path: Path) -> int:
        """Read and check a vector file written for ``spec``; return its count. Raises VectorFileError."""
        raise NotImplementedError

    def check_golden(self, spec, path: Path) -> LevelResult:
        """The ``golden`` level: the file's expected values against an independent reference model."""
        raise NotImplementedError

    # -- HLS project ------------------------------------------------------------
    def template_context(self, spec, target: BuildTarget) -> dict[str, Any]:
        """Everything this PE's templates may use (target already resolved); derived numbers come from Python."""
        raise NotImplementedError

    # -- RTL ----------------------------------------------------------------------
    def rtl_parameters(self, spec) -> dict[str, int]:
        """Verilog parameters of :attr:`rtl_top` for ``spec``."""
        raise NotImplementedError

    def rtl_sources(self) -> list[Path]:
        """The Verilog files of the PE (``rtl/<name>/*.v``, one module per file, sorted by name) that
        :attr:`rtl_top` uses (:func:`~codesign.hw.rtl_deps.used_sources`): what every tool reads and every RTL hash
        covers."""
        directory = data_dir("rtl") / self.name
        sources = sorted(directory.glob("*.v"))
        if not any(path.stem == self.rtl_top for path in sources):
            raise FileNotFoundError(f"no {self.rtl_top}.v in {directory}")
        return used_sources(sources, self.rtl_top)

    def bench_environment(self, spec, vectors: Path, summary: Path, seed: int) -> dict[str, str]:
        """Environment variables the cocotb bench reads."""
        raise NotImplementedError

    def rtl_outcome(self, spec, summary: dict, vectors: Path) -> RtlOutcome:
        """Interpret the bench's JSON summary; raise on protocol errors or stale vectors."""
        raise NotImplementedError

    def verification_grid(self) -> list[GridCase]:
        """The configurations every level (golden, C-sim, RTL) is checked on by the test suite."""
        return [GridCase("default", self.spec_class())]

    # -- cost ---------------------------------------------------------------------
    def estimate_specs(self) -> list:
        """The configurations ``codesign estimate <pe>`` synthesises by default."""
        return [self.spec_class()]

    def calibration_specs(self) -> list:
        """The grid the analytical resource model is fitted on (:mod:`codesign.hw.resource_model`); empty for a
        PE without a model."""
        return []

    def resource_parts(self, spec) -> tuple[list[tuple[int, int]], list[tuple[int, int]], dict[str, float]]:
        """What the PE's RTL is built of for ``spec``: RAMs ``(depth, width)``, multipliers ``(a_bits, b_bits)``,
        and the features LUT and FF grow with. A PE without an analytical model raises NotImplementedError."""
        raise NotImplementedError(f"PE {self.name} has no analytical resource model")

    def describe_spec(self, spec) -> str:
        """A short label of a spec's distinguishing fields (tables and plots)."""
        default = self.spec_class()
        changed = [f"{f.name}={getattr(spec, f.name)}" for f in fields(spec) if getattr(spec, f.name) != getattr(default, f.name)]
        return ", ".join(changed) or "defaults"
