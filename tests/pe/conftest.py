"""What the generic stream-PE tests share: which registered PEs they cover (and which PEs their own files still
cover), the verification-grid parameters (which points run quick), the first grid point's stimulus, and the header
checker (tests/pe/stream_header_check.cpp) built once per (PE, spec) at the PE's stream width, which the
PE-specific cases in tests/pe/<pe>/ use too."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.aptypes import ap_types_dir
from codesign.contracts.constants import WORD_BITS
from codesign.hw.csim import compile_testbench, parse_summary
from codesign.hw.vectors import write_transactions
from codesign.demo import quick_options
from codesign.pe import get_pe, pe_names
from codesign.resources import data_dir

CHECKER = Path(__file__).with_name("stream_header_check.cpp")
ROOT = Path(__file__).resolve().parents[2]

# PEs the generic tests leave to their own files, by test kind: the pipeline FP-MAC (its own bench and checker)
OWN_FILES = {
    "header": {"fpmac": ("tests/pe/fpmac/test_fpmac_header.py", "tests/pe/fpmac/fpmac_header_check.cpp")},
    "rtl": {"fpmac": ("tests/pe/fpmac/test_fpmac_rtl.py",)},
}
GENERIC = [name for name in pe_names() if all(name not in own for own in OWN_FILES.values())]

# PEs whose RTL make test checks in a test of their own (file, test), with cycles against the model: the
# generic RTL test runs their grid in make test-slow only (CSB's points take 20 s and more each under stalls; its
# own file runs an FC and three CONV blocks in about 20 s)
OWN_QUICK_RTL = {"csb": ("tests/pe/csb/test_csb_rtl_cases.py", "test_rtl_matches_contract_and_cycle_model")}


def stream_parts(name: str, spec) -> int:
    """32-bit vector-file words per stream word of ``name`` built as ``spec`` (1, or 2 and 4 for a TT PE built with a
    64- or 128-bit stream)."""
    return int(get_pe(name).stream_context(spec).get("stream_word_bits", WORD_BITS)) // WORD_BITS


def grid_stimulus(name: str, case):
    """The golden stimulus of a grid point: its own options, else the PE's defaults scaled down as the quick demo's."""
    pe = get_pe(name)
    return pe.build_stimulus(case.spec, case.options if case.options is not None else quick_options(pe))


@functools.cache
def first_quick_point(name: str) -> int:
    """The index of PE ``name``'s first grid point that is neither ``slow`` nor ``long``: the one make test runs
    at every level."""
    return next(index for index, case in enumerate(get_pe(name).verification_grid()) if not (case.slow or case.long))


def _slow(name: str, index: int, case, *, rtl: bool = False) -> bool:
    """make test runs each PE's first quick grid point in the generic header and RTL tests (but the RTL of the
    PEs of :data:`OWN_QUICK_RTL`); make test-slow the others, every header field at its top among them."""
    return case.slow or index != first_quick_point(name) or (rtl and name in OWN_QUICK_RTL)


def _grid_params(*, rtl: bool) -> list:
    return [pytest.param((name, case), id=f"{name}-{case.id}",
                         marks=[pytest.mark.slow] * _slow(name, index, case, rtl=rtl) + [pytest.mark.long] * case.long)
            for name in GENERIC for index, case in enumerate(get_pe(name).verification_grid())]


def pytest_generate_tests(metafunc):
    """``stream_grid_case`` (the header test's) and ``stream_rtl_case`` (the RTL test's): every generic PE's grid
    point, ``slow`` as :func:`_slow` says, a point marked ``long`` also ``long``; ``stream_pe``: every generic PE."""
    if "stream_grid_case" in metafunc.fixturenames:
        metafunc.parametrize("stream_grid_case", _grid_params(rtl=False))
    if "stream_rtl_case" in metafunc.fixturenames:
        metafunc.parametrize("stream_rtl_case", _grid_params(rtl=True))
    if "stream_pe" in metafunc.fixturenames:
        metafunc.parametrize("stream_pe", GENERIC)


@pytest.fixture
def stream_registry() -> tuple[list[str], dict, Path]:
    """(the PEs the generic tests cover, OWN_FILES, the checkout's root) for the test that no PE is left out."""
    return GENERIC, OWN_FILES, ROOT


@pytest.fixture
def own_quick_rtl() -> dict[str, tuple[str, str]]:
    """:data:`OWN_QUICK_RTL`, for the test that its tests exist and run in make test."""
    return OWN_QUICK_RTL


@pytest.fixture(name="grid_stimulus")
def grid_stimulus_fixture():
    return grid_stimulus


@pytest.fixture(name="stream_parts")
def stream_parts_fixture():
    return stream_parts


@pytest.fixture
def first_case(stream_pe):
    """A generic PE's first grid point and a copy of its golden stimulus's first four transactions."""
    case = get_pe(stream_pe).verification_grid()[0]
    transactions = [(np.asarray(i).copy(), np.asarray(o).copy()) for i, o in grid_stimulus(stream_pe, case)][:4]
    return stream_pe, case, transactions


def _cpp_string(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def checker_unit(pe, spec) -> str:
    """The one-file translation unit that instantiates ``pe``'s C++ class template for ``spec`` and includes the
    checker: the spec enters as template arguments (:meth:`rtl_parameters`, in the template's order), as the stream
    word's width in bits and as the file metadata the build stands for (:meth:`vector_meta`)."""
    arguments = ", ".join(str(value) for value in pe.rtl_parameters(spec).values())
    meta = pe.vector_meta(spec)
    rows = ", ".join(f"{{{_cpp_string(key)}, {_cpp_string(value)}}}" for key, value in meta.items())
    return "\n".join([
        f'#include "{pe.headers[0]}"',
        f"typedef {pe.cpp_type}<{arguments}> checked_pe;",
        f"static const char *const PE_NAME = {_cpp_string(pe.name)};",
        f"static const char *const META[][2] = {{{rows}}};",
        f"static const int META_COUNT = {len(meta)};",
        f"#define CHECKED_STREAM_BITS {stream_parts(pe.name, spec) * WORD_BITS}",
        f'#include "{CHECKER.name}"', ""])


class HeaderChecker:
    """Builds the checker per (PE, spec) once per session and runs it on transaction lists."""

    def __init__(self, build_dir: Path) -> None:
        self.build_dir = build_dir
        self.built: dict[tuple, Path] = {}

    def executable(self, pe_name: str, spec) -> Path:
        pe = get_pe(pe_name)
        unit = checker_unit(pe, spec)
        # the checker's own hash is part of the unit's name, so the compile cache tells checker versions apart
        key = hashlib.sha256((unit + CHECKER.read_text()).encode()).hexdigest()[:16]
        if key not in self.built:
            directory = self.build_dir / f"{pe_name}_{key}"
            directory.mkdir(parents=True, exist_ok=True)
            source = directory / f"{pe_name}_header_check_{key}.cpp"
            source.write_text(unit)
            self.built[key] = compile_testbench([source], include_dirs=[data_dir("hls_templates") / "include",
                                                                        CHECKER.parent],
                                                build_dir=directory, name=f"{pe_name}_header_check").executable
        return self.built[key]

    def run_file(self, pe_name: str, spec, path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.executable(pe_name, spec)), str(path)], capture_output=True, text=True,
                              timeout=900)

    def run(self, pe_name: str, spec, transactions, tmp_path: Path, *,
            meta: dict | None = None) -> tuple[int, int, subprocess.CompletedProcess]:
        """(transactions, mismatching transactions, the run) of the header on ``transactions``; exit status and
        summary must agree (0 with no mismatch, 1 with some)."""
        pe = get_pe(pe_name)
        path = write_transactions(tmp_path / f"{pe_name}_{len(transactions)}.txn", pe=pe_name,
                                  transactions=transactions, meta=pe.vector_meta(spec) if meta is None else meta)
        done = self.run_file(pe_name, spec, path)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        vectors, mismatches = parse_summary(done.stdout)
        assert (mismatches > 0) == (done.returncode == 1), done.stdout
        return vectors, mismatches, done


@pytest.fixture(scope="session")
def header_checker(tmp_path_factory) -> HeaderChecker:
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.skip("no C++ compiler: g++ (or $CXX) is not on PATH")
    try:
        ap_types_dir()
    except FileNotFoundError:
        pytest.skip("ap_types headers not installed (codesign setup)")
    return HeaderChecker(tmp_path_factory.mktemp("stream_header_build"))
