"""codesign_csb.h on its own: the csb-specific cases of the stream-PE header checker (tests/pe/conftest.py), which
tests/pe/test_stream_headers.py runs on every stream PE's grid and whose own failure detection it checks.

Three sources of expected words, none of them the header: transactions worked
out by hand from docs/csb.md, random transactions encoded here and answered by
the plain reference model (codesign.pe.csb.reference), and the golden model's
own stimulus (codesign.pe.csb.stimulus: directed corner cases and random
transactions, grown to at least MIN_MACS MACs per op). The checker also fails
a transaction whose input words are not read exactly, so the status-1/2 rule
"read nothing after the header" and the status-3 rule "consume everything" are
checked word for word.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.spec import CsbSpec

FP, EB, WG, UPD = range(4)

SMALL = dict(block_rows=2, block_cols=3, kernel=1, out_h=1, out_w=1, batch=2, parallel=1, acc_bits=32)
CONV = dict(block_rows=1, block_cols=1, kernel=2, out_h=2, out_w=2, batch=1, parallel=2, acc_bits=16)
# Random-stimulus configurations: block 16x16 / 4x4 / 3x8, k 1 and 3, tile 1x1 and 4x4,
# b 1/4/8, P 1/2/4, acc_bits 32 and 16.
CONFIGS = {
    "fc16-b8-p1-a32": dict(block_rows=16, block_cols=16, kernel=1, out_h=1, out_w=1, batch=8, parallel=1, acc_bits=32),
    "conv4-k3-t4-b4-p2-a16": dict(block_rows=4, block_cols=4, kernel=3, out_h=4, out_w=4, batch=4, parallel=2,
                                  acc_bits=16),
    "fc3x8-b1-p4-a16": dict(block_rows=3, block_cols=8, kernel=1, out_h=1, out_w=1, batch=1, parallel=4, acc_bits=16),
    "conv3x8-k3-t4-b1-p4-a32": dict(block_rows=3, block_cols=8, kernel=3, out_h=4, out_w=4, batch=1, parallel=4,
                                    acc_bits=32),
    "conv16-k3-t4-b8-p4-a16": dict(block_rows=16, block_cols=16, kernel=3, out_h=4, out_w=4, batch=8, parallel=4,
                                   acc_bits=16),
    "conv4-k1-t4-b4-p1-a32": dict(block_rows=4, block_cols=4, kernel=1, out_h=4, out_w=4, batch=4, parallel=1,
                                  acc_bits=32),
    # Edges: an even kernel, a non-square tile with fewer positions than groups, 16 lanes, 24-bit accumulators;
    # the largest kernel with P = 3.
    "conv5x7-k2-t3x2-b16-p8-a24": dict(block_rows=5, block_cols=7, kernel=2, out_h=3, out_w=2, batch=16,
                                       parallel=8, acc_bits=24),
    "conv2x3-k7-t1x2-b2-p3-a20": dict(block_rows=2, block_cols=3, kernel=7, out_h=1, out_w=2, batch=2, parallel=3,
                                      acc_bits=20),
    # Packed (two lanes' products from one multiplication): 16 lanes on 8 groups, and an FC block with 16-bit sums.
    "conv5x7-k2-t3x2-b16-p8-a24-packed": dict(block_rows=5, block_cols=7, kernel=2, out_h=3, out_w=2, batch=16,
                                              parallel=8, acc_bits=24, packed=True),
    "fc16-b4-p2-a16-packed": dict(block_rows=16, block_cols=16, kernel=1, out_h=1, out_w=1, batch=4, parallel=2,
                                  acc_bits=16, packed=True),
}
MIN_MACS = 10_000  # per op and configuration


def run(header_checker, tmp_path: Path, config: dict, transactions):
    return header_checker.run("csb", CsbSpec(**config), transactions, tmp_path)


# ---------------------------------------------------------------------------- encoding (docs/csb.md)
def header(op: int, nnz: int, shift: int = 0) -> int:
    return op | (shift << 8) | (nnz << 16)


def pack(values, filler: int = 0) -> list[int]:
    """Signed bytes, four to a word, little-endian; unused high bytes of the last word hold ``filler``."""
    raw = [int(v) & 0xFF for v in values]
    raw += [filler & 0xFF] * (-len(raw) % 4)
    return [raw[i] | raw[i + 1] << 8 | raw[i + 2] << 16 | raw[i + 3] << 24 for i in range(0, len(raw), 4)]


def u32(values) -> list[int]:
    return [int(v) & 0xFFFF_FFFF for v in values]


def transaction(words_in, words_out):
    return np.array(words_in, dtype=np.uint64), np.array(u32(words_out), dtype=np.uint64)


# ---------------------------------------------------------------------------- hand-worked transactions
def hand_small() -> list:
    """SMALL: W = [[0, 2, 0], [-3, 0, 1]], entries (0,1)=2, (1,0)=-3, (1,2)=1."""
    index = [0x01, 0x10, 0x12]
    weights = [2, -3, 1]
    x = [1, 10, 2, 20, 3, 30]  # X[channel][lane]
    cases = []
    # FP: row 0 = acc + 2*x[1]; row 1 = acc - 3*x[0] + x[2]. High garbage in the last byte-section word.
    cases.append(([header(FP, 3), *pack(index, 0xAB), *pack(weights, 0x7F), *pack(x), *u32([100, 200, -5, 7])],
                  [0, 104, 240, -5, 7]))
    # EB: dx[0] = -3*dy[1], dx[1] = 2*dy[0], dx[2] = dy[1]; dy = [[1, 2], [3, 4]] (row, lane).
    cases.append(([header(EB, 3), *pack(index), *pack(weights), *pack([1, 2, 3, 4]), *u32([0, 0, 1, 1, 0, -1])],
                  [0, -9, -12, 3, 5, 3, 3]))
    # WG on entries (0, 0) and (1, 2): G = -7 + x[0].dy[0] = -7 + 1*1 + 10*2 = 14; G = 1000 + x[2].dy[1] =
    # 1000 + 3*3 + 30*4 = 1129.
    cases.append(([header(WG, 2), *pack([0x00, 0x12]), *pack(x), *pack([1, 2, 3, 4]), *u32([-7, 1000])],
                  [0, 14, 1129]))
    # UPD, shift 2: B' = rne(B - G/4). 10 - 6/4 = 8.5 -> 8 (tie to even); 10 - 2/4 = 9.5 -> 10; -1 - 1/4 = -1.25 -> -1;
    # 0x7FFFFF + 4/4 saturates to 0x7FFFFF; 0xAB000005 is 5 (bits above 23 ignored), 5 + 3/4 = 5.75 -> 6;
    # -0x800000 - (2^31 - 1)/4 saturates to -0x800000.
    buffers = [10, 10, 0xFFFFFF, 0x7FFFFF, 0xAB000005, 0x800000]
    grads = u32([6, 2, 1, -4, -3, 2**31 - 1])
    index6 = [0x00, 0x01, 0x02, 0x10, 0x11, 0x12]
    cases.append(([header(UPD, 6, shift=2), *pack(index6), *buffers, *grads],
                  [0, 8, 10, -1, 0x7FFFFF, 6, -0x800000]))
    # UPD, shift 0: B' = sat24(B - G) exactly.
    cases.append(([header(UPD, 2), *pack([0x00, 0x11]), 5, 0x800000, *u32([7, 1])], [0, -2, -0x800000]))
    # Status 1: reserved bits, or a shift with an op other than UPD; nothing after the header is read.
    cases.append(([header(FP, 1) | 1 << 31], [1]))
    cases.append(([header(UPD, 1) | 1 << 5], [1]))  # EW with op 3: no such element-wise op
    cases.append(([header(EB, 1, shift=3)], [1]))
    # Status 2: nnz above block_rows * block_cols = 6.
    cases.append(([header(FP, 7)], [2]))
    cases.append(([header(UPD, 511, shift=1)], [2]))
    # Status 3: y = 2 >= block_rows; x = 3 >= block_cols; the whole transaction is read first.
    cases.append(([header(FP, 2), *pack([0x00, 0x20]), *pack([1, 1]), *pack(x), *u32([0] * 4)], [3]))
    cases.append(([header(UPD, 1), *pack([0x03]), 1, 2], [3]))
    cases.append(([header(WG, 1), *pack([0x13]), *pack(x), *pack([1, 2, 3, 4]), 5], [3]))
    # nnz = 0: the accumulators come back unchanged.
    cases.append(([header(FP, 0), *pack(x), *u32([1, -2, 3, -4])], [0, 1, -2, 3, -4]))
    return [transaction(words_in, words_out) for words_in, words_out in cases]


def hand_saturation() -> list:
    """acc_bits = 16, batch 1, one row and two columns: saturation after every addition, in order."""
    cases = []
    # FP: 32000 + 127*127 saturates to 32767 first, then - 127*127: 16638, not 32000.
    cases.append(([header(FP, 2), *pack([0x00, 0x01]), *pack([127, -127]), *pack([127, 127]), 32000],
                  [0, 32767 - 127 * 127]))
    # The order reversed: 32000 - 16129 = 15871, + 16129 = 32000 (no saturation); garbage above bit 15 ignored.
    cases.append(([header(FP, 2), *pack([0x00, 0x01]), *pack([-127, 127]), *pack([127, 127]), 0x12347D00],
                  [0, 32000]))
    # Results sign-extended: -32768 comes back as 0xFFFF8000.
    cases.append(([header(FP, 1), *pack([0x00]), *pack([-128]), *pack([127, 0]), -32700 & 0xFFFF],
                  [0, -32768]))
    return [transaction(w, o) for w, o in cases]


def hand_conv() -> list:
    """CONV: one 2x2 kernel, 3x3 input, 2x2 output tile, P = 2 groups, acc_bits = 16."""
    w = [1, 2, 3, 4]  # taps (ky, kx) row-major
    x = [1, 2, 3, 4, 5, 6, 7, 8, 9]  # X[iy][ix]
    # FP: out[oy][ox] = sum w[ky][kx] * x[oy+ky][ox+kx]: (0,0) 1+4+12+20 = 37, (0,1) 2+6+15+24 = 47,
    # (1,0) 4+10+21+32 = 67, (1,1) 5+12+24+36 = 77.
    fp = ([header(FP, 1), *pack([0x00]), *pack(w), *pack(x), *u32([0, 1, 2, 3])], [0, 37, 48, 69, 80])
    # EB with dy = [[1, 2], [3, 4]]: dx[iy][ix] = sum over taps of w[ky][kx] * dy[iy-ky][ix-kx] (full correlation):
    # (0,0) 1*1; (0,1) 1*2 + 2*1 = 4; (0,2) 2*2 = 4; (1,0) 1*3 + 3*1 = 6; (1,1) 1*4 + 2*3 + 3*2 + 4*1 = 20;
    # (1,2) 2*4 + 4*2 = 16; (2,0) 3*3 = 9; (2,1) 3*4 + 4*3 = 24; (2,2) 4*4 = 16.
    eb = ([header(EB, 1), *pack([0x00]), *pack(w), *pack([1, 2, 3, 4]), *u32([0] * 9)],
          [0, 1, 4, 4, 6, 20, 16, 9, 24, 16])
    # WG: G[t] = g0 + sum over output positions of x[oy+ky][ox+kx] * dy[oy][ox], dy = [[1, 2], [3, 4]]:
    # t=0: 1+4+12+20 = 37; t=1: 2+6+15+24 = 47; t=2: 4+10+21+32 = 67; t=3: 5+12+24+36 = 77.
    wg = ([header(WG, 1), *pack([0x00]), *pack(x), *pack([1, 2, 3, 4]), *u32([0, 10, -20, 30])],
          [0, 37, 57, 47, 107])
    # WG with P = 2 (positions 0, 2 in group 0; 1, 3 in group 1), x = -128 everywhere, so all 4 taps alike.
    # dy = -128 everywhere: each partial 16384 + 16384 saturates to 32767; G = -32768: sat(-32768 + 32767) = -1,
    # then -1 + 32767 = 32766 (one running sum would give 32767).
    wg_sat = ([header(WG, 1), *pack([0x00]), *pack([-128] * 9), *pack([-128] * 4), *u32([-32768] * 4)],
              [0, *[32766] * 4])
    # dy = [-128, 127, -128, 127]: group 0 = 16384 + 16384 -> 32767, group 1 = -16256 - 16256 = -32512;
    # G = 0 + 32767 - 32512 = 255 (contiguous groups or one running sum would give 256).
    wg_groups = ([header(WG, 1), *pack([0x00]), *pack([-128] * 9), *pack([-128, 127, -128, 127]), *u32([0] * 4)],
                 [0, *[255] * 4])
    cases = [fp, eb, wg, wg_sat, wg_groups]
    return [transaction(w, o) for w, o in cases]


# ---------------------------------------------------------------------------- random transactions
def random_transaction(config: dict, op: int, rng: np.random.Generator) -> list[int]:
    """Input words of one well-formed transaction, with garbage wherever the contract says bits are ignored."""
    rows, cols, k = config["block_rows"], config["block_cols"], config["kernel"]
    lanes, acc_bits = config["batch"], config["acc_bits"]
    kk = k * k
    in_pos = (config["out_h"] + k - 1) * (config["out_w"] + k - 1)
    out_pos = config["out_h"] * config["out_w"]
    keep = rng.random((rows, cols)) < rng.choice([0.2, 0.5, 1.0])
    ys, xs = np.nonzero(keep)  # row-major order
    nnz = ys.size
    index = list((ys << 4) | xs)
    filler = int(rng.integers(0, 256))

    def codes(count: int) -> list[int]:
        scale = rng.choice([4, 128])  # small codes stay clear of saturation, full-range ones reach it
        return pack(rng.integers(-scale, scale, count), filler)

    def accs(count: int) -> list[int]:
        values = rng.integers(-(1 << (acc_bits - 1)), 1 << (acc_bits - 1), count)
        if rng.random() < 0.5:
            values //= 1 << int(rng.integers(0, acc_bits))
        garbage = rng.integers(0, 1 << 32, count) >> acc_bits << acc_bits if acc_bits < 32 else 0
        return u32((values & ((1 << acc_bits) - 1)) | garbage)

    words = [header(op, nnz, int(rng.integers(0, 32)) if op == UPD else 0), *pack(index, filler)]
    if op in (FP, EB):
        words += codes(nnz * kk)
        words += codes(cols * in_pos * lanes) if op == FP else codes(rows * out_pos * lanes)
        words += accs(rows * out_pos * lanes) if op == FP else accs(cols * in_pos * lanes)
    elif op == WG:
        words += codes(cols * in_pos * lanes) + codes(rows * out_pos * lanes) + accs(nnz * kk)
    else:
        buffers = rng.integers(0, 1 << 32, nnz * kk)
        grads = rng.integers(-(1 << 31), 1 << 31, nnz * kk) >> int(rng.integers(0, 32))
        words += u32(buffers) + u32(grads)
    return words


def refused_transaction(config: dict, rng: np.random.Generator) -> list[int]:
    """Input words of a transaction the PE must refuse: status 1 or 2 (header only) or, where the block is
    narrower than 16 in some dimension, status 3 (a whole transaction with one index outside the block)."""
    rows, cols = config["block_rows"], config["block_cols"]
    kinds = ["reserved", "shift", "nnz"] + (["index"] if rows < 16 or cols < 16 else [])
    kind = kinds[int(rng.integers(0, len(kinds)))]
    op = int(rng.integers(0, 4))
    if kind == "reserved":
        reserved = [b for b in range(32) if not (b < 8 or 8 <= b <= 12 or b == 14 or 16 <= b <= 24)]  # flags, K1
        return [header(op, 1, 1 if op == UPD else 0) | 1 << int(rng.choice(reserved))]
    if kind == "shift":
        return [header(int(rng.integers(0, 3)), 1, int(rng.integers(1, 32)))]
    if kind == "nnz":
        return [header(op, int(rng.integers(rows * cols + 1, 512)), 0)]
    words = random_transaction(config, op, rng)
    nnz = (words[0] >> 16) & 0x1FF
    if nnz == 0:
        return refused_transaction(config, rng)
    entry = int(rng.integers(0, nnz))
    y = int(rng.integers(rows, 16)) if rows < 16 and (cols == 16 or rng.random() < 0.5) else int(rng.integers(0, rows))
    x = int(rng.integers(cols, 16)) if y < rows else int(rng.integers(0, 16))
    word = 1 + entry // 4
    shift = 8 * (entry % 4)
    words[word] = (words[word] & ~(0xFF << shift)) | ((y << 4 | x) << shift)
    return words


def macs(config: dict, op: int, words_in) -> int:
    """MACs of one transaction (the contract's additions; UPD counts one per word)."""
    nnz = (int(words_in[0]) >> 16) & 0x1FF
    k = config["kernel"]
    if op == UPD:
        return nnz * k * k
    positions = config["out_h"] * config["out_w"]  # EB's valid (input, tap) pairs are as many as FP's
    return nnz * k * k * positions * config["batch"]


def random_transactions(config: dict, seed: int) -> tuple[list, dict[int, int]]:
    rng = np.random.default_rng(seed)
    done = {op: 0 for op in range(4)}
    transactions = []
    while min(done.values()) < MIN_MACS:
        if rng.random() < 0.05:
            words_in = refused_transaction(config, rng)
            words_out = reference_output(words_in, **config)
            assert words_out[0] != 0
            transactions.append((np.array(words_in, dtype=np.uint64), np.array(words_out, dtype=np.uint64)))
            continue
        op = int(rng.integers(0, 4))
        if done[op] >= MIN_MACS and rng.random() < 0.9:
            continue
        words_in = random_transaction(config, op, rng)
        words_out = reference_output(words_in, **config)
        done[op] += macs(config, op, words_in)
        transactions.append((np.array(words_in, dtype=np.uint64), np.array(words_out, dtype=np.uint64)))
    return transactions, done


# ---------------------------------------------------------------------------- tests
def test_hand_worked_small_block(header_checker, tmp_path):
    cases = hand_small()
    vectors, mismatches, done = run(header_checker, tmp_path, SMALL, cases)
    assert (vectors, mismatches) == (len(cases), 0), done.stdout


def test_hand_worked_saturation_order(header_checker, tmp_path):
    config = dict(SMALL, block_rows=1, block_cols=2, batch=1, acc_bits=16)
    cases = hand_saturation()
    vectors, mismatches, done = run(header_checker, tmp_path, config, cases)
    assert (vectors, mismatches) == (len(cases), 0), done.stdout


def test_hand_worked_convolution(header_checker, tmp_path):
    cases = hand_conv()
    vectors, mismatches, done = run(header_checker, tmp_path, CONV, cases)
    assert (vectors, mismatches) == (len(cases), 0), done.stdout


def test_hand_worked_answers_agree_with_the_reference_model():
    """The hand answers above are themselves checked against the reference model (two readings of the text)."""
    for config, cases in ((SMALL, hand_small()), (dict(SMALL, block_rows=1, block_cols=2, batch=1, acc_bits=16),
                                                   hand_saturation()), (CONV, hand_conv())):
        for words_in, words_out in cases:
            status = int(words_out[0])
            if status in (1, 2):
                continue  # the reference reads the header only as well, but checks nothing after it
            assert reference_output([int(w) for w in words_in], **config) == [int(w) for w in words_out]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_random_against_reference(header_checker, tmp_path, name):
    config = CONFIGS[name]
    transactions, done = random_transactions(config, seed=list(CONFIGS).index(name))
    assert min(done.values()) >= MIN_MACS
    vectors, mismatches, result = run(header_checker, tmp_path, config, transactions)
    assert vectors == len(transactions)
    assert mismatches == 0, result.stdout


PAIR_CHECK = r'''
#include <cstdio>
#include "codesign_csb.h"
int main() {  // every (w, lo, hi) of signed 8-bit codes: the pair's two products equal the plain ones
  long wrong = 0, checked = 0;
  for (int w = -128; w < 128; ++w)
    for (int lo = -128; lo < 128; ++lo)
      for (int hi = -128; hi < 128; ++hi) {
        ap_int<codesign::csb::PRODUCT_BITS> lo_w, hi_w;
        codesign::csb::pair_products(w, lo, hi, lo_w, hi_w);
        ++checked;
        wrong += lo_w.to_int() != lo * w || hi_w.to_int() != hi * w;
      }
  std::printf("%ld %ld\n", checked, wrong);
  return wrong != 0;
}
'''


def test_pair_products_equal_the_plain_products_for_every_code(header_checker, tmp_path):
    """pair_products (a packed build's one 25 x 8 multiplication for two lanes) against w * lo and w * hi for all
    2^24 operand triples; the same check without the high part's borrow finds wrong products."""
    from codesign.hw.csim import compile_testbench
    from codesign.resources import data_dir

    include = data_dir("hls_templates") / "include"
    runs = {}
    for name, header in (("as_shipped", (include / "codesign_csb.h").read_text()),
                         ("no_borrow", (include / "codesign_csb.h").read_text().replace(
                             " + ap_int<PRODUCT_BITS>(p[15]);", ";"))):
        directory = tmp_path / name
        directory.mkdir()
        (directory / "codesign_csb.h").write_text(header)
        (directory / "pair_check.cpp").write_text(PAIR_CHECK)
        built = compile_testbench([directory / "pair_check.cpp"], include_dirs=[directory, include],
                                  build_dir=directory, name="pair_check")
        done = subprocess.run([str(built.executable)], capture_output=True, text=True, timeout=300)
        runs[name] = (done.returncode, [int(v) for v in done.stdout.split()])
    assert runs["as_shipped"] == (0, [1 << 24, 0])
    assert runs["no_borrow"][0] == 1 and runs["no_borrow"][1][1] > 0


def golden_stimulus(config: dict, seed: int) -> tuple[list, dict[str, int]]:
    """The golden model's stimulus (directed cases + random ones), grown until every op has MIN_MACS MACs."""
    from codesign.pe.csb.stimulus import build_transactions, count_macs

    spec = CsbSpec(**config)
    # Random transactions draw nnz uniformly in 0..capacity and the op uniformly; UPD counts nnz * k * k words.
    per_transaction = spec.capacity / 2 * min(spec.kk, spec.kk * spec.out_pos * spec.batch)
    count = int(np.ceil(1.5 * 4 * MIN_MACS / per_transaction))
    while True:
        transactions = build_transactions(spec, count=count, seed=seed)
        counts = count_macs(spec, transactions)
        if min(counts[op] for op in ("fp", "eb", "wg", "upd")) >= MIN_MACS:
            return transactions, counts
        count *= 2


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_golden_stimulus(header_checker, tmp_path, name):
    pytest.importorskip("codesign.pe.csb.stimulus")
    config = CONFIGS[name]
    transactions, counts = golden_stimulus(config, seed=100 + list(CONFIGS).index(name))
    assert counts["refused"] > 0
    vectors, mismatches, result = run(header_checker, tmp_path, config, transactions)
    assert vectors == len(transactions)
    assert mismatches == 0, result.stdout
