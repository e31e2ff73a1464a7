"""codesign_tt.h on its own, compiled with g++ once per PE configuration (the parameters are template constants).

Expected words come from outside the header: a transaction worked out by hand
from docs/tt_pe.md and the golden stimulus (directed cases and random
transactions, checked against the plain-loop reference in tests/pe/tt). The
checker also fails a transaction whose input words are not read exactly, so
"the header is the whole transaction" for refusals is checked word for word.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.aptypes import ap_types_dir
from codesign.hw.csim import compile_testbench, parse_summary
from codesign.hw.vectors import write_transactions
from codesign.pe.tt import golden
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions
from codesign.pe.tt.stimulus import build as build_stimulus
from codesign.resources import data_dir

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                                reason="no C++ compiler: g++ (or $CXX) is not on PATH")

CHECKER = Path(__file__).with_name("tt_header_check.cpp")
PE1_ORDER = ("lanes", "rows", "a_bits", "b_bits", "acc_bits", "max_j", "max_k", "max_l", "stream_bits")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """A function (pe name, C++ template, spec, parameter order) -> executable, compiled once per configuration."""
    try:
        ap_types_dir()
    except FileNotFoundError:
        pytest.skip("ap_types headers not installed (codesign setup)")
    build_dir = tmp_path_factory.mktemp("tt_header_build")
    checker_hash = hashlib.sha256(CHECKER.read_bytes()).hexdigest()

    def executable(name: str, struct: str, spec, order: tuple[str, ...] = PE1_ORDER) -> Path:
        arguments = ", ".join(str(getattr(spec, field)) for field in order)
        label = f"tt_header_check_{name}_" + "_".join(str(getattr(spec, field)) for field in order)
        unit = build_dir / f"{label}.cpp"
        unit.write_text(f"// checker sha256 {checker_hash}\n#define TT_PE_NAME \"{name}\"\n"
                        f"#define TT_STREAM_BITS {spec.stream_bits}\n"
                        f"#define TT_PE_TYPE codesign::tt::{struct}<{arguments}>\n#include \"{CHECKER.name}\"\n")
        return compile_testbench([unit], include_dirs=[data_dir("hls_templates") / "include", CHECKER.parent],
                                 build_dir=build_dir, name=label).executable

    return executable


def run(executable: Path, path: Path) -> tuple[int, int]:
    done = subprocess.run([str(executable), str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    vectors, mismatches = parse_summary(done.stdout)
    assert (mismatches > 0) == (done.returncode == 1), done.stdout
    return vectors, mismatches


PE1_SPECS = {
    "l2r1_hand": Tt1Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2),
    "l4r3_a16b16_acc16": Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
}


def test_pe1_hand_worked_and_stimulus(build, tmp_path):
    hand = PE1_SPECS["l2r1_hand"]
    a, b = np.array([[[1, -2, 3]]]), np.array([[[2, 1, -1]], [[-8, 7, 0]]])
    words = [golden.words(hand, a, b).tolist(), [1 | 1 << 8 | 3 << 16 | 2 << 24, 0x12, 0x0F, 0x78, 0x00, 0xFE01,
                                                     0x03]]
    assert words[0] == words[1]
    expected = [0, (2 - 2 - 3) & 0xFFFFFFFF, (-8 - 14) & 0xFFFFFFFF]
    transactions = [(np.array(words[0], dtype=np.uint64), np.array(expected, dtype=np.uint64)),
                    (np.array([1 | 0 << 8 | 1 << 16 | 1 << 24], dtype=np.uint64), np.array([1], dtype=np.uint64)),
                    (np.array([1 | 3 << 8 | 1 << 16 | 1 << 24], dtype=np.uint64), np.array([2], dtype=np.uint64))]
    path = write_transactions(tmp_path / "hand.txn", pe="tt1", transactions=transactions, meta=hand.to_dict())
    assert run(build("tt1", "pe1", hand), path) == (3, 0)
    # a wrong expected word is caught
    broken = [(words_in, words_out.copy()) for words_in, words_out in transactions]
    broken[0][1][1] ^= np.uint64(1)
    path = write_transactions(tmp_path / "broken.txn", pe="tt1", transactions=broken, meta=hand.to_dict())
    assert run(build("tt1", "pe1", hand), path) == (3, 1)
    spec = PE1_SPECS["l4r3_a16b16_acc16"]
    stimulus = build_stimulus(spec, TtStimulusOptions())
    path = write_transactions(tmp_path / "stim.txn", pe="tt1", transactions=stimulus, meta=spec.to_dict())
    assert run(build("tt1", "pe1", spec), path) == (len(stimulus), 0)


def test_pe2_hand_worked_and_stimulus(build, tmp_path):
    hand = Tt2Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2)
    words = [1 | 2 << 8 | 3 << 16 | 2 << 24, 0xF2, 0x87, 0xFE01, 0x03, 0x0504, 0xFA]  # docs/tt_pe.md by hand
    z = [2 * 1 - 4, 2 * -2 - 5, 2 * 3 + 6, 7 - 32, -14 - 40, 21 + 48]
    transactions = [(np.array(words, dtype=np.uint64), np.array([0] + [v & 0xFFFFFFFF for v in z], dtype=np.uint64)),
                    (np.array([0x01010301], dtype=np.uint64), np.array([2], dtype=np.uint64))]
    path = write_transactions(tmp_path / "hand.txn", pe="tt2", transactions=transactions, meta=hand.to_dict())
    assert run(build("tt2", "pe2", hand), path) == (2, 0)
    spec = Tt2Spec(lanes=8, rows=3, a_bits=16, b_bits=4, acc_bits=20, max_j=11, max_k=17, max_l=7)
    stimulus = build_stimulus(spec, TtStimulusOptions())
    path = write_transactions(tmp_path / "stim.txn", pe="tt2", transactions=stimulus, meta=spec.to_dict())
    assert run(build("tt2", "pe2", spec), path) == (len(stimulus), 0)


def test_pe3_hand_worked_and_stimulus(build, tmp_path):
    def pe3_build(spec):
        order = ("lanes", "a_bits", "b_bits", "max_j", "stream_bits")
        return build("tt3", "pe3", spec, order)

    hand = Tt3Spec(lanes=2, a_bits=8, b_bits=16, max_j=3)
    words = [3 | 3 << 8, 0x00078000, 0x0064, 0xFF03, 0x02]  # docs/tt_pe.md by hand
    z = [(x * y) & 0xFFFFFFFF for x in (3, -1, 2) for y in (-32768, 7, 100)]
    transactions = [(np.array(words, dtype=np.uint64), np.array([0] + z, dtype=np.uint64)),
                    (np.array([0x00010101], dtype=np.uint64), np.array([1], dtype=np.uint64)),
                    (np.array([0x00000401], dtype=np.uint64), np.array([2], dtype=np.uint64))]
    path = write_transactions(tmp_path / "hand.txn", pe="tt3", transactions=transactions, meta=hand.to_dict())
    assert run(pe3_build(hand), path) == (3, 0)
    spec = Tt3Spec(lanes=4, a_bits=16, b_bits=16, max_j=21)
    stimulus = build_stimulus(spec, TtStimulusOptions())
    path = write_transactions(tmp_path / "stim.txn", pe="tt3", transactions=stimulus, meta=spec.to_dict())
    assert run(pe3_build(spec), path) == (len(stimulus), 0)


def _widened(words, parts):
    """Words that fit 32 bits as stream words of ``parts`` 32-bit parts (the upper parts 0)."""
    return [part for word in words for part in [word] + [0] * (parts - 1)]


@pytest.mark.parametrize("stream_bits", [64, 128])
def test_wide_streams_hand_worked(build, tmp_path, stream_bits):
    """The hand-worked PE1 transaction of docs/tt_pe.md at a wider stream: every 32-bit field in its own word (a
    chunk of 2 lanes fills less than one word), the two results in one word, a set bit above bit 31 of the header
    refused; then the golden stimulus of both PEs at that width."""
    parts = stream_bits // 32
    hand = Tt1Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2,
                   stream_bits=stream_bits)
    header = 1 | 1 << 8 | 3 << 16 | 2 << 24
    words_in = _widened([header, 0x12, 0x0F, 0x78, 0x00, 0xFE01, 0x03], parts)
    words_out = [0] * parts + [(2 - 2 - 3) & 0xFFFFFFFF, (-8 - 14) & 0xFFFFFFFF] + [0] * (parts - 2)
    a, b = np.array([[[1, -2, 3]]]), np.array([[[2, 1, -1]], [[-8, 7, 0]]])
    assert golden.words(hand, a, b).tolist() == words_in and golden.output(hand, a, b).tolist() == words_out
    refused = [header] + [0] * (parts - 1)
    refused[-1] = 1 << 31
    transactions = [(np.array(words_in, dtype=np.uint64), np.array(words_out, dtype=np.uint64)),
                    (np.array(refused, dtype=np.uint64), np.array([1] + [0] * (parts - 1), dtype=np.uint64))]
    path = write_transactions(tmp_path / "hand.txn", pe="tt1", transactions=transactions, meta=hand.to_dict())
    assert run(build("tt1", "pe1", hand), path) == (2, 0)
    broken = [(w_in, w_out.copy()) for w_in, w_out in transactions]
    broken[0][1][-1 if parts > 2 else 1] ^= np.uint64(1)  # a padding part is checked (at 64 bits the status word's)
    path = write_transactions(tmp_path / "broken.txn", pe="tt1", transactions=broken, meta=hand.to_dict())
    assert run(build("tt1", "pe1", hand), path) == (2, 1)
    for name, struct, spec in (("tt1", "pe1", Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5,
                                                      max_k=9, max_l=7, stream_bits=stream_bits)),
                               ("tt2", "pe2", Tt2Spec(lanes=8, rows=3, a_bits=16, b_bits=4, acc_bits=20, max_j=11,
                                                      max_k=17, max_l=7, stream_bits=stream_bits))):
        stimulus = build_stimulus(spec, TtStimulusOptions())
        path = write_transactions(tmp_path / f"{name}.txn", pe=name, transactions=stimulus, meta=spec.to_dict())
        assert run(build(name, struct, spec), path) == (len(stimulus), 0)
    spec = Tt3Spec(lanes=4, a_bits=16, b_bits=16, max_j=21, stream_bits=stream_bits)
    stimulus = build_stimulus(spec, TtStimulusOptions())
    path = write_transactions(tmp_path / "tt3.txn", pe="tt3", transactions=stimulus, meta=spec.to_dict())
    assert run(build("tt3", "pe3", spec, ("lanes", "a_bits", "b_bits", "max_j", "stream_bits")), path) == (
        len(stimulus), 0)
