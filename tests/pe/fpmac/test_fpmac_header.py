"""codesign_fpmac.h on its own, compiled with g++: exhaustive on tiny formats, random on wider ones, all roundings.

The header works in the MAX_FB container domain (masking, not shifting, by the
run-time fb) while the golden model rounds in the (E, fb) code domain, so
agreement here checks two different algorithms against each other. Every fb
port value is used, including 0 and values above MAX_FB (clamping), and the
random rows carry garbage below the active fb.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.aptypes import ap_types_dir
from codesign.hw.csim import compile_testbench, parse_summary
from codesign.pe.fpmac.golden import golden_container_mac
from codesign.pe.fpmac.spec import ROUNDING_CODES, FpmacSpec
from codesign.pe.fpmac.stimulus import random_stimulus
from codesign.resources import data_dir

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                                reason="no C++ compiler: g++ (or $CXX) is not on PATH")


CHECKER = Path(__file__).with_name("fpmac_header_check.cpp")
EXHAUSTIVE = [(2, 1), (2, 2), (3, 2)]  # every (a, b, c, fb) word combination: up to 2^18 * 4 rows
RANDOM = [(4, 3), (3, 5), (6, 4), (5, 10), (7, 16), (8, 23)]  # the configurations compiled into the checker
RANDOM_ROWS = 100_000


@pytest.fixture(scope="module")
def checker(tmp_path_factory) -> Path:
    try:
        ap_types_dir()
    except FileNotFoundError:
        pytest.skip("ap_types headers not installed (codesign setup)")
    build = compile_testbench([CHECKER], include_dirs=[data_dir("hls_templates") / "include"],
                              build_dir=tmp_path_factory.mktemp("header_build"), name="fpmac_header_check")
    return build.executable


def exhaustive_rows(exp_bits: int, max_fb: int) -> list[np.ndarray]:
    words = np.arange(1 << (1 + exp_bits + max_fb), dtype=np.uint64)
    fbs = np.arange(1 << max_fb.bit_length(), dtype=np.uint64)
    return [g.reshape(-1) for g in np.meshgrid(words, words, words, fbs, indexing="ij")]


def random_rows(exp_bits: int, max_fb: int, rounding: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Half uniform container words (garbage below fb included), half structured stimulus with cancellation."""
    spec = FpmacSpec(exp_bits=exp_bits, max_fb=max_fb, rounding=rounding)
    half = RANDOM_ROWS // 2
    width = 1 + exp_bits + max_fb
    uniform = [rng.integers(0, 1 << width, half, dtype=np.uint64) for _ in range(3)]
    uniform.append(rng.integers(0, 1 << spec.fb_bits, half, dtype=np.uint64))
    parts = [random_stimulus(spec, int(fb), half // max_fb + 1, rng) for fb in range(1, max_fb + 1)]
    structured = [np.concatenate([getattr(p, name) for p in parts]) for name in ("a", "b", "c", "fb")]
    return [np.concatenate([u, s]) for u, s in zip(uniform, structured)]


def run_checker(checker: Path, tmp_path: Path, exp_bits: int, max_fb: int, rounding: str, rows) -> tuple[int, int, str]:
    a, b, c, fb = rows
    expected = golden_container_mac(a, b, c, fb, exp_bits=exp_bits, max_fb=max_fb, rounding=rounding)
    path = tmp_path / "rows.bin"
    np.stack([a, b, c, fb, expected], axis=1).astype("<u8").tofile(path)
    done = subprocess.run([str(checker), str(exp_bits), str(max_fb), str(ROUNDING_CODES[rounding]), str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    vectors, mismatches = parse_summary(done.stdout)
    return vectors, mismatches, done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("rounding", list(ROUNDING_CODES))
@pytest.mark.parametrize("exp_bits, max_fb", EXHAUSTIVE)
def test_header_exhaustive(checker, tmp_path, exp_bits, max_fb, rounding):
    rows = exhaustive_rows(exp_bits, max_fb)
    vectors, mismatches, report = run_checker(checker, tmp_path, exp_bits, max_fb, rounding, rows)
    assert vectors == rows[0].size
    assert mismatches == 0, report


@pytest.mark.slow
@pytest.mark.parametrize("rounding", list(ROUNDING_CODES))
@pytest.mark.parametrize("exp_bits, max_fb", RANDOM)
def test_header_random(checker, tmp_path, exp_bits, max_fb, rounding):
    rng = np.random.default_rng([exp_bits, max_fb, ROUNDING_CODES[rounding]])
    rows = random_rows(exp_bits, max_fb, rounding, rng)
    vectors, mismatches, report = run_checker(checker, tmp_path, exp_bits, max_fb, rounding, rows)
    assert vectors == rows[0].size
    assert mismatches == 0, report


@pytest.mark.slow
def test_checker_detects_a_wrong_expectation(checker, tmp_path):
    rows = exhaustive_rows(2, 1)
    a, b, c, fb = rows
    expected = golden_container_mac(a, b, c, fb, exp_bits=2, max_fb=1, rounding="nearest_even")
    expected[17] ^= np.uint64(1)
    path = tmp_path / "rows.bin"
    np.stack([a, b, c, fb, expected], axis=1).astype("<u8").tofile(path)
    done = subprocess.run([str(checker), "2", "1", "0", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert parse_summary(done.stdout) == (a.size, 1)
