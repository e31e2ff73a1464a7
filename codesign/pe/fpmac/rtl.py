"""RTL level of the FP-MAC PE: run rtl/fpmac under cocotb against a golden vector file.

The Verilog lives in the ``rtl`` data tree (``rtl/fpmac/*.v``, top ``fpmac``);
the cocotb bench is ``tests/rtl/fpmac_bench.py`` of the source checkout. The
bench replays the file through the DUT, recomputes every expected value with
:func:`codesign.pe.fpmac.golden_container_mac` (so a stale file is caught),
and writes a JSON summary that :func:`run_rtl` turns into an
:class:`RtlResult`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import codesign
from codesign.hw.rtlsim import CocotbTestFailure, RtlSimError, build_dir_for, run_cocotb
from codesign.hw.vectors import VectorFileError, read_vectors
from codesign.pe.fpmac.spec import FpmacSpec
from codesign.pe.fpmac.stimulus import COLUMNS
from codesign.resources import data_dir

TOPLEVEL = "fpmac"
LATENCY = 4  # clock cycles from in_valid to out_valid; localparam LATENCY in rtl/fpmac/fpmac.v
BENCH_MODULE = "fpmac_bench"
_CHECKOUT = Path(codesign.__file__).resolve().parent.parent
BENCH_DIR = _CHECKOUT / "tests" / "rtl"


class RtlProtocolError(RtlSimError):
    """The DUT broke the stream protocol: a result missing, one too many, or at the wrong latency."""


@dataclass(frozen=True)
class RtlResult:
    """Outcome of one RTL run.

    ``vectors`` results were compared bit for bit with the golden model and
    ``mismatches`` of them differed (the first few are described in
    ``first_mismatches``). ``seconds`` is the wall time of build plus
    simulation and ``build_seconds`` the compile part (s). Protocol failures
    (missing or extra results, wrong latency) raise :class:`RtlProtocolError`
    instead, so ``mismatches == 0`` with ``vectors`` equal to the file's
    count means the RTL passed.
    """

    simulator: str
    vectors: int
    mismatches: int
    seconds: float
    build_seconds: float
    first_mismatches: tuple[str, ...]
    build_dir: Path

    @property
    def passed(self) -> bool:
        return self.mismatches == 0


def rtl_sources() -> list[Path]:
    """The Verilog files of the FP-MAC (one module per file)."""
    sources = sorted((data_dir("rtl") / "fpmac").glob("*.v"))
    if not any(path.stem == TOPLEVEL for path in sources):
        raise FileNotFoundError(f"no {TOPLEVEL}.v in {data_dir('rtl') / 'fpmac'}")
    return sources


def _check_meta(meta: dict[str, str], spec: FpmacSpec, path: Path) -> None:
    wanted = {"exp_bits": str(spec.exp_bits), "max_fb": str(spec.max_fb), "rounding": spec.rounding}
    wrong = {key: meta[key] for key, value in wanted.items() if key in meta and meta[key] != value}
    if wrong:
        raise VectorFileError(f"{path} was written for {wrong}, but the spec has {wanted}")


def _describe(entry: dict) -> str:
    kind = entry.get("kind")
    if kind == "mismatch":
        return (f"vector {entry['index']}: a={entry['a']} b={entry['b']} c={entry['c']} fb={entry['fb']} "
                f"expected {entry['expected']} got {entry['actual']}")
    if kind == "latency":
        return f"vector {entry['index']}: result after {entry['cycles']} cycles, expected {entry['expected']}"
    return f"{kind}: {entry}"


def run_rtl(spec: FpmacSpec, vectors: Path, work_dir: Path, *, simulator: str = "icarus", seed: int = 1) -> RtlResult:
    """Simulate rtl/fpmac with ``spec``'s parameters on every vector of ``vectors``.

    The vector file is read and checked before anything is built: a missing,
    short or mismatched file raises :class:`VectorFileError`. ``work_dir``
    receives one build directory per (simulator, parameter set). ``seed``
    picks the idle-gap pattern of the driver.
    """
    vectors = Path(vectors).resolve()
    columns, meta = read_vectors(vectors, pe="fpmac", columns=COLUMNS)
    _check_meta(meta, spec, vectors)
    count = int(columns["a"].size)
    if not (BENCH_DIR / f"{BENCH_MODULE}.py").is_file():
        raise RtlSimError(f"the cocotb bench {BENCH_DIR / BENCH_MODULE}.py is missing (run from a source checkout)")

    parameters = {"EXP_BITS": spec.exp_bits, "MAX_FB": spec.max_fb, "ROUNDING": spec.rounding_code}
    build_dir = build_dir_for(Path(work_dir).resolve(), TOPLEVEL, simulator, parameters)
    summary_path = build_dir / "summary.json"
    summary_path.unlink(missing_ok=True)
    env = {
        "FPMAC_VECTORS": str(vectors),
        "FPMAC_SUMMARY": str(summary_path),
        "FPMAC_SPEC": json.dumps({"exp_bits": spec.exp_bits, "max_fb": spec.max_fb, "rounding": spec.rounding}),
        "FPMAC_LATENCY": str(LATENCY),
        "FPMAC_SEED": str(seed),
    }
    started = time.perf_counter()
    try:
        run = run_cocotb(
            sources=rtl_sources(),
            toplevel=TOPLEVEL,
            test_module=BENCH_MODULE,
            build_dir=build_dir,
            parameters=parameters,
            python_paths=[BENCH_DIR, _CHECKOUT],
            extra_env=env,
            simulator=simulator,
        )
        build_seconds = run.build_seconds
    except CocotbTestFailure as failure:
        build_seconds = failure.build_seconds
        if not summary_path.is_file():
            raise  # the bench died before checking anything: nothing to count
        summary = json.loads(summary_path.read_text())
        if summary["stale_rows"]:
            raise VectorFileError(
                f"{vectors}: {summary['stale_rows']} expected values disagree with golden_container_mac "
                f"(rows {summary['first_stale']}): regenerate the file"
            ) from failure
        if summary["parameter_problems"]:
            raise RtlSimError(f"DUT parameters differ from the spec: {summary['parameter_problems']}") from failure
    else:
        summary = json.loads(summary_path.read_text())
    seconds = time.perf_counter() - started
    if summary["vectors"] != count:
        raise RtlSimError(f"the bench read {summary['vectors']} vectors from {vectors}, run_rtl read {count}")
    protocol = {name: int(summary[name]) for name in ("missing_outputs", "unexpected_outputs", "latency_errors")}
    if any(protocol.values()):
        problems = "; ".join(_describe(entry) for entry in summary["first_mismatches"])
        raise RtlProtocolError(f"{TOPLEVEL} ({simulator}, {build_dir}): {protocol}, first problems: {problems}")
    return RtlResult(
        simulator=simulator,
        vectors=int(summary["outputs"]),
        mismatches=int(summary["mismatches"]),
        seconds=seconds,
        build_seconds=build_seconds,
        first_mismatches=tuple(_describe(entry) for entry in summary["first_mismatches"]),
        build_dir=build_dir,
    )
