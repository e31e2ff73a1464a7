"""codesign_fpmac_array.h on its own, compiled with g++ for one configuration (the spec is a set of template constants).

Expected words come from outside the header: a transaction worked out by hand
from docs/fpmac_array.md and docs/numerics.md, refused headers, and the golden
stimulus (checked against the Fraction reference in tests/pe/fpmac_array).
The checker also fails a transaction whose input words are not read exactly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.aptypes import ap_types_dir
from codesign.hw.csim import compile_testbench, parse_summary
from codesign.hw.vectors import write_transactions
from codesign.pe import get_pe
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions, build
from codesign.resources import data_dir

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                                reason="no C++ compiler: g++ (or $CXX) is not on PATH")

CHECKER = Path(__file__).with_name("fpmac_array_header_check.cpp")
SPEC = FpmacArraySpec(exp_bits=4, max_fb=3, rows=2, cols=3, max_m=5, max_n=4, max_k=6)


@pytest.fixture(scope="module")
def checker(tmp_path_factory) -> Path:
    try:
        ap_types_dir()
    except FileNotFoundError:
        pytest.skip("ap_types headers not installed (codesign setup)")
    build_dir = tmp_path_factory.mktemp("fpmac_array_header_build")
    arguments = ", ".join(str(value) for value in get_pe("fpmac_array").rtl_parameters(SPEC).values())
    unit = build_dir / "fpmac_array_header_check_unit.cpp"
    unit.write_text(f"#define FA_PE_TYPE codesign::fpmac_array::pe<{arguments}>\n#include \"{CHECKER.name}\"\n")
    return compile_testbench([unit], include_dirs=[data_dir("hls_templates") / "include", CHECKER.parent],
                             build_dir=build_dir, name="fpmac_array_header_check").executable


def run(executable: Path, path: Path) -> tuple[int, int]:
    done = subprocess.run([str(executable), str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    vectors, mismatches = parse_summary(done.stdout)
    assert (mismatches > 0) == (done.returncode == 1), done.stdout
    return vectors, mismatches


def _words(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_hand_worked_refused_and_broken(checker, tmp_path):
    # (E=4, fb=2) in the max_fb=3 container: 1.0 -> 56, 1.5 -> 60. A = [1.0, 1.5], B = [1.5, 1.5]^T:
    # 1.5, then 1.5 + round(2.25) = 1.5 + 2.0 (a tie, to even) = 3.5 -> code (8 << 2 | 3) << 1 = 70.
    # With A^T and C_in = -0 (bit 7 of the 8-bit container): the same sum, as -0 + 1.5 = 1.5.
    header = Header(m=1, n=1, k=2, fb=2).word()
    transposed = Header(m=1, n=1, k=2, fb=2, trans_a=True, accumulate=True).word()
    transactions = [
        (_words(header, 56, 60, 60, 60), _words(0, 70)),
        (_words(transposed, 56, 60, 60, 60, 0x80), _words(0, 70)),
        (_words(header, 56 | 0xFFFFFF00, 60 | 1, 60, 60), _words(0, 70)),  # ignored bits set above and below
        (_words(Header(m=0, n=1, k=1, fb=1).word()), _words(1)),
        (_words(Header(m=1, n=1, k=1, fb=4).word()), _words(2)),
        (_words(Header(m=6, n=1, k=1, fb=1).word()), _words(2)),
    ]
    path = write_transactions(tmp_path / "hand.txn", pe="fpmac_array", transactions=transactions, meta=SPEC.to_dict())
    assert run(checker, path) == (6, 0)
    broken = [(words_in, words_out.copy()) for words_in, words_out in transactions]
    broken[0][1][1] ^= np.uint64(2)
    path = write_transactions(tmp_path / "broken.txn", pe="fpmac_array", transactions=broken, meta=SPEC.to_dict())
    assert run(checker, path) == (6, 1)
    short = [(transactions[0][0][:-1], transactions[0][1])]  # the PE reads past the stream's end
    path = write_transactions(tmp_path / "short.txn", pe="fpmac_array", transactions=short, meta=SPEC.to_dict())
    assert run(checker, path) == (1, 1)


def test_stimulus(checker, tmp_path):
    stimulus = build(SPEC, FpmacArrayStimulusOptions(min_macs=2000))  # the C-sim level runs the full grid
    path = write_transactions(tmp_path / "stim.txn", pe="fpmac_array", transactions=stimulus, meta=SPEC.to_dict())
    assert run(checker, path) == (len(stimulus), 0)
