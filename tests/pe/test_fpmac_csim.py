"""C simulation of the generated FP-MAC HLS project with g++: bit-exact against the golden model.

Each configuration is generated, compiled once (all compiles run in parallel
in one fixture, and the executables are shared through the csim cache) and
run on its golden vector file. The error tests reuse those executables.
"""

import dataclasses
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codesign.hw.csim import CsimError, compile_testbench
from codesign.hw.flow import build_csim as flow_build_csim
from codesign.hw.flow import generate_project, run_csim as flow_run_csim
from codesign.pe import get_pe
from codesign.pe.fpmac.pe import FILES
from codesign.pe.fpmac.spec import FpmacSpec
from codesign.pe.fpmac.stimulus import build_stimulus


FULL_COUNT = len(build_stimulus(FpmacSpec()))
PE = get_pe("fpmac")
FILES = {**FILES, "vectors": PE.vector_file}


def build_csim(spec, project, work):
    return flow_build_csim(PE, spec, project, work)


def run_csim(spec, project, vectors, work):
    return flow_run_csim(PE, spec, project, vectors, work)


def write_fpmac_vectors(spec, stimulus, path):
    return PE.write_vectors(spec, stimulus, path)


def generate_fpmac_project(spec, out_dir, target=None, **options):
    return generate_project(PE, spec, out_dir, target, **options)


# The FP-MAC verification grid (golden/C-sim/RTL run in tests/pe/test_levels.py); these
# tests reuse its projects for the error paths.
CONFIGS = [(case.id, case.spec, case.target, case.options) for case in PE.verification_grid()]


@dataclasses.dataclass(frozen=True)
class Case:
    spec: FpmacSpec
    project: Path
    vectors: Path
    count: int
    executable: Path
    compile_seconds: float


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("csim_build")


@pytest.fixture(scope="module")
def cases(tmp_path_factory, work) -> dict[str, Case]:
    """Generate every configuration's project and vectors, then compile them all in parallel."""
    root = tmp_path_factory.mktemp("csim_projects")
    prepared = {}
    for name, spec, target, options in CONFIGS:
        stimulus = PE.build_stimulus(spec, options or PE.stimulus_options())
        project = root / name
        generate_fpmac_project(spec, project, target, stimulus=stimulus)
        prepared[name] = (spec, project, len(stimulus))
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        builds = {name: pool.submit(build_csim, spec, project, work) for name, (spec, project, _) in prepared.items()}
        return {
            name: Case(spec, project, project / FILES["vectors"], count, builds[name].result().executable,
                       builds[name].result().compile_seconds)
            for name, (spec, project, count) in prepared.items()
        }


@pytest.mark.slow
def test_every_grid_project_was_compiled(cases):
    assert set(cases) == {c[0] for c in CONFIGS} and all(case.executable.is_file() for case in cases.values())


@pytest.mark.slow
def test_small_max_vectors_splits_groups_into_several_calls(cases):
    case = cases["e4_fb3_rtz_axis"]
    done = subprocess.run([str(case.executable), str(case.vectors)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = int(next(line for line in done.stdout.splitlines() if line.startswith("calls=")).split("=")[1])
    assert calls > 4  # at most 4 fb groups (0..3), each over 1000 rows


def _rewrite(source: Path, target: Path, edit) -> Path:
    lines = source.read_text().splitlines()
    target.write_text("\n".join(edit(lines)) + "\n")
    return target


@pytest.mark.slow
def test_flipping_one_expected_bit_gives_exactly_one_mismatch(cases, work, tmp_path):
    case = cases["e8_fb23_rne_maxi"]
    row = 1234

    def flip(lines):
        fields = lines[3 + row].split()
        fields[4] = format(int(fields[4], 16) ^ (1 << 7), "x")
        lines[3 + row] = " ".join(fields)
        return lines

    mutated = _rewrite(case.vectors, tmp_path / "mutated.txt", flip)
    result = run_csim(case.spec, case.project, mutated, work)
    assert (result.vectors, result.mismatches) == (case.count, 1)
    assert f"row={row} " in result.first_mismatches
    done = subprocess.run([str(case.executable), str(mutated)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert f"vectors={case.count} mismatches=1" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda lines: lines[:-1], f"declares count={FULL_COUNT} but holds {FULL_COUNT - 1} rows"),
        (lambda lines: lines + ["0 0 0 3 0"], "more rows than count"),
        (lambda lines: lines[:3], f"declares count={FULL_COUNT} but holds 0 rows"),
        (lambda lines: lines[:1], "missing header line"),
        (lambda lines: [], "first line must be"),
        (lambda lines: ["# codesign-vectors v2"] + lines[1:], "first line must be"),
        (lambda lines: [lines[0], lines[1].replace("pe=fpmac", "pe=other")] + lines[2:], "pe='other'"),
        (lambda lines: [lines[0], lines[1].replace("fb,expected", "expected,fb")] + lines[2:], "has columns"),
        (lambda lines: [lines[0], lines[1].replace(f"count={FULL_COUNT}", "count=many")] + lines[2:], "not a positive integer"),
        (lambda lines: lines[:2] + ["# exp_bits=5 max_fb=23 rounding=nearest_even"] + lines[3:], "exp_bits=5"),
        (lambda lines: lines[:2] + ["# exp_bits=8 max_fb=23 rounding=toward_zero"] + lines[3:], "rounding=toward_zero"),
        (lambda lines: lines[:10] + ["3f800000 3f800000 0 3 zz"] + lines[11:], "'zz' is not hexadecimal"),
        (lambda lines: lines[:10] + ["3f800000 3f800000 0 3"] + lines[11:], "expected 5 hexadecimal fields"),
        (lambda lines: lines[:10] + ["13f800000 3f800000 0 3 0"] + lines[11:], "above the 32-bit container"),
        (lambda lines: lines[:10] + ["3f800000 3f800000 0 20 0"] + lines[11:], "does not fit the 5-bit fb port"),
    ],
)
def test_testbench_rejects_bad_vector_files_loudly(cases, work, tmp_path, edit, message):
    case = cases["e8_fb23_rne_maxi"]
    bad = _rewrite(case.vectors, tmp_path / "bad.txt", edit)
    with pytest.raises(CsimError, match="vector file") as error:
        run_csim(case.spec, case.project, bad, work)
    assert message in str(error.value)
    done = subprocess.run([str(case.executable), str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "mismatches=" not in done.stdout


@pytest.mark.slow
def test_missing_vector_file_fails(cases, work, tmp_path):
    case = cases["e8_fb23_rne_maxi"]
    with pytest.raises(CsimError, match="does not exist"):
        run_csim(case.spec, case.project, tmp_path / "absent.txt", work)
    for argv in ([str(tmp_path / "absent.txt")], []):
        done = subprocess.run([str(case.executable), *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stderr


@pytest.mark.slow
def test_vectors_of_another_configuration_are_refused(cases, work, tmp_path):
    case = cases["e8_fb23_rne_maxi"]
    other = FpmacSpec(exp_bits=8, max_fb=10)
    vectors = write_fpmac_vectors(other, build_stimulus(other, fb_values=[10], random_per_fb=10), tmp_path / "v.txt")
    with pytest.raises(CsimError, match="max_fb=10"):
        run_csim(case.spec, case.project, vectors, work)


@pytest.mark.slow
def test_builds_are_cached_by_content(cases, work, tmp_path):
    case = cases["e2_fb1_rne_maxi"]
    again = build_csim(case.spec, case.project, work)
    assert again.cached and again.compile_seconds == 0.0 and again.executable == case.executable
    # the same sources in another directory hit the same cache entry
    copy = tmp_path / "copy"
    shutil.copytree(case.project, copy)
    assert build_csim(case.spec, copy, work).executable == case.executable


@pytest.mark.slow
def test_project_must_match_the_spec(cases, work):
    case = cases["e2_fb1_rne_maxi"]
    with pytest.raises(CsimError, match="generated from spec"):
        run_csim(dataclasses.replace(case.spec, rounding="toward_zero"), case.project, case.vectors, work)


def test_not_a_project_is_refused(tmp_path):
    with pytest.raises(CsimError, match="not a codesign project"):
        run_csim(FpmacSpec(), tmp_path, tmp_path / "v.txt", tmp_path / "build")


def test_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-codesign")
    source = tmp_path / "x.cpp"
    source.write_text("int main() { return 0; }\n")
    with pytest.raises(CsimError, match="no-such-compiler-codesign.*not found"):
        compile_testbench([source], include_dirs=[], build_dir=tmp_path / "b", name="x")


def test_missing_ap_types_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_AP_TYPES", str(tmp_path))
    source = tmp_path / "x.cpp"
    source.write_text("int main() { return 0; }\n")
    with pytest.raises(CsimError, match="ap_int.h"):
        compile_testbench([source], include_dirs=[], build_dir=tmp_path / "b", name="x")


def test_compile_error_is_reported(tmp_path):
    source = tmp_path / "broken.cpp"
    source.write_text("int main() { return undeclared_name; }\n")
    with pytest.raises(CsimError, match="undeclared_name"):
        compile_testbench([source], include_dirs=[], build_dir=tmp_path / "b", name="broken")
    assert not [p for p in (tmp_path / "b").iterdir()], "a failed compile leaves no executable behind"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, old, new",
    [
        # an output word the kernel never writes keeps the testbench's poison pattern
        ("e2_fb1_rne_maxi", "    out[i] = word_t(result);", "    if (i != 7) out[i] = word_t(result);"),
        # the wrong rounding mode compiled in
        ("e4_fb3_rtz_axis", "ROUNDING = 2;", "ROUNDING = 0;"),
    ],
)
def test_a_broken_kernel_is_caught(cases, work, tmp_path, name, old, new):
    case = cases[name]
    broken = tmp_path / "broken"
    shutil.copytree(case.project, broken)
    target = next(p for p in (broken / FILES["kernel_cpp"], broken / FILES["kernel_h"]) if old in p.read_text())
    target.write_text(target.read_text().replace(old, new))
    result = run_csim(case.spec, broken, case.vectors, work)
    assert result.vectors == case.count
    assert result.mismatches > 0 and result.first_mismatches
    if "out[i]" in old:
        assert "got=5a5a5a5a" in result.first_mismatches
