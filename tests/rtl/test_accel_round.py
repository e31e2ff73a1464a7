"""The rounding output stage at three levels on one grid: golden (codesign.numerics.round_stage) against an
independent per-value reference (the host's ``rescale`` and a bit-string packer in Python ints), the C++ header
(hls_templates/include/codesign_round.h under g++, tests/rtl/accel_round_check.cpp) and the RTL
(rtl/accel/accel_round.v under cocotb + Icarus, tests/rtl/accel_round_bench.py, random gaps and stalls on both
sides) against the golden words, every word and every statistic.

Every grid point takes at least 10^4 accumulators: directed ones (zeros, +-1, 2^31 - 1, -2^31, exact ties at the
point's shift, the code range's edges and the ties beside them) and random ones (uniform 32-bit, spread over the
code range, log-uniform magnitudes, ties). The edge file adds every shift from -64 to 63 at several widths, short
last rows, count 0 and pass-through runs (C-sim and RTL). Each level prints ``<level> <point> values=N
mismatches=M seconds=T``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.vectors import write_transactions
from codesign.numerics.round_stage import RoundStageConfig, round_stage, slot_of
from codesign.step.tt.rounding import rescale

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = Path(__file__).resolve().parent
HEADER_DIR = ROOT / "hls_templates" / "include"
CHECKER = BENCH_DIR / "accel_round_check.cpp"
RTL = ROOT / "rtl" / "accel" / "accel_round.v"
PE = "accel_round"
MIN_VALUES = 10_000
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler: g++ is not on PATH")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None or importlib.util.find_spec("cocotb_tools") is None,
                                  reason="the RTL level needs Icarus Verilog (iverilog) and cocotb 2.x")
LEVEL_MARKS = {"golden": [], "csim": [needs_gxx], "rtl": [needs_icarus]}
INT32 = (-(1 << 31), (1 << 31) - 1)


@dataclass(frozen=True)
class Point:
    """A grid point: a configuration, and whether its RTL runs are all in the slow tier (an RTL run takes 4 to 8 s
    here: make test runs two, the rest run with the RTL edge file in make test-slow)."""

    name: str
    cfg: RoundStageConfig
    rtl_slow: bool = True


def _cfg(enable=True, *, shift, bits, lanes, group_words, row_values, field_bits=0) -> RoundStageConfig:
    return RoundStageConfig(enable=enable, shift=shift, bits=bits, lanes=lanes, group_words=group_words,
                            row_values=row_values, field_bits=field_bits)


GRID = [
    Point("q8_s-7_l4w1_r100", _cfg(shift=-7, bits=8, lanes=4, group_words=1, row_values=100)),
    Point("q16_s-20_l3w2_r50", _cfg(shift=-20, bits=16, lanes=3, group_words=2, row_values=50)),
    Point("q4_s+2_l16w4_r37", _cfg(shift=2, bits=4, lanes=16, group_words=4, row_values=37)),
    Point("q8_s0_l5w2_r7", _cfg(shift=0, bits=8, lanes=5, group_words=2, row_values=7)),
    Point("q16_s-64_l1w1_r1", _cfg(shift=-64, bits=16, lanes=1, group_words=1, row_values=1)),
    Point("q4_s+63_l8w1_r33", _cfg(shift=63, bits=4, lanes=8, group_words=1, row_values=33)),
    Point("q2_s-31_l7w1_r1000", _cfg(shift=-31, bits=2, lanes=7, group_words=1, row_values=1000)),
    Point("q12_s-1_l1w4_r3", _cfg(shift=-1, bits=12, lanes=1, group_words=4, row_values=3)),
    Point("q8_s-32_l16w4_r16", _cfg(shift=-32, bits=8, lanes=16, group_words=4, row_values=16)),
    # 8-bit codes in a 16-bit PE's slots (activations into a PE built for 16-bit gradients), and 4 in 8
    Point("q8in16_s-6_l8w4_r24", _cfg(shift=-6, bits=8, lanes=8, group_words=4, row_values=24, field_bits=16),
          rtl_slow=False),
    Point("q3in8_s-2_l4w1_r9", _cfg(shift=-2, bits=3, lanes=4, group_words=1, row_values=9, field_bits=8)),
    Point("pass", _cfg(False, shift=-5, bits=8, lanes=4, group_words=1, row_values=1), rtl_slow=False),
]
LEVELS = ("golden", "csim", "rtl")


def descriptor(cfg: RoundStageConfig) -> list[int]:
    """The two descriptor words a transaction starts with (the layout of accel_round_check.cpp)."""
    return [int(cfg.enable) | (cfg.shift & 0x7F) << 1 | cfg.bits << 8 | cfg.lanes << 13 | cfg.group_words << 18
            | cfg.field_bits << 21, cfg.row_values]


def _int32(values) -> np.ndarray:
    return np.array([v for v in values if INT32[0] <= v <= INT32[1]], dtype=np.int64)


def directed(cfg: RoundStageConfig) -> np.ndarray:
    """Zeros, the 32-bit extremes, and around this shift and width: exact ties, the range's edges, ties beside."""
    low, high = -(1 << (cfg.bits - 1)), (1 << (cfg.bits - 1)) - 1
    values = [0, 0, 0, 1, -1, 2, -2, INT32[1], INT32[0], INT32[0] + 1, 1 << 30, -(1 << 30), 0]
    if cfg.shift < 0:
        unit = 1 << -cfg.shift
        values += [(2 * k + 1) * unit // 2 for k in range(-40, 40)]  # (k + 1/2) * 2^s: exact ties
        for edge in (high, high + 1, low, low - 1):
            values += [edge * unit + d for d in (-1, 0, 1)]
            values += [(2 * edge + 1) * unit // 2 + d for d in (-1, 0, 1)]  # the tie above the edge, and beside it
            values += [(2 * edge - 1) * unit // 2 + d for d in (-1, 0, 1)]
    else:
        for edge in ((high + 1) >> min(cfg.shift, 40), low >> min(cfg.shift, 40), high >> min(cfg.shift, 40)):
            values += [edge + d for d in (-2, -1, 0, 1, 2)]
    return _int32(values)


def random_acc(cfg: RoundStageConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform 32-bit, spread over the code range at this shift, log-uniform magnitudes, and exact ties."""
    low, high = -(1 << (cfg.bits - 1)), (1 << (cfg.bits - 1)) - 1
    kind = rng.integers(0, 10, n)
    uniform = rng.integers(INT32[0], INT32[1] + 1, n, dtype=np.int64)
    s = cfg.shift
    lo, hi = ((low - 3) << -s, (high + 3) << -s) if s < 0 else ((low - 3) >> min(s, 40), (high + 3) >> min(s, 40))
    spread = rng.integers(max(lo, INT32[0]), min(hi, INT32[1]) + 1, n, dtype=np.int64)
    logs = (np.sign(rng.random(n) - 0.5) * np.floor(2.0 ** rng.uniform(0, 31, n))).astype(np.int64)
    unit = 1 << min(-s, 40) if s < 0 else 2
    k = rng.integers(-(1 << 12), 1 << 12, n, dtype=np.int64)
    ties = np.where(unit <= 1 << 31, (2 * k + 1) * (unit // 2), 0) if unit <= 1 << 32 else np.zeros(n, np.int64)
    out = np.where(kind < 4, uniform, np.where(kind < 8, spread, np.where(kind < 9, logs, ties)))
    return np.clip(out, *INT32)


def reference_stage(acc: np.ndarray, cfg: RoundStageConfig) -> tuple[list[int], list[int]]:
    """The stage value by value in Python ints: ``rescale`` for the codes, a bit string per group for the words."""
    values = [int(v) for v in acc]
    stats = [sum(abs(v) for v in values)]
    if not cfg.enable:
        return [v & 0xFFFF_FFFF for v in values], [*stats, 0]
    codes = [int(c) for c in rescale(np.asarray(values, dtype=np.int64), 40, 40 + cfg.shift, cfg.bits)]
    low, high = -(1 << (cfg.bits - 1)), (1 << (cfg.bits - 1)) - 1
    exact = [Fraction(v) * Fraction(2) ** cfg.shift for v in values]
    half = Fraction(1, 2)  # a tie above the high code rounds to even, past it; a tie below the low one to it
    saturated = sum(1 for e in exact if e >= high + half or e < low - half)
    words = []
    for start in range(0, len(codes), cfg.row_values):
        row = codes[start:start + cfg.row_values]
        for g in range(0, len(row), cfg.lanes):
            bits = 0
            for v, code in enumerate(row[g:g + cfg.lanes]):
                bits |= (code % (1 << cfg.slot)) << (v * cfg.slot)
            words += [(bits >> (32 * w)) & 0xFFFF_FFFF for w in range(cfg.group_words)]
    return words, [*stats, saturated]


STATS_WORDS = 3  # sum_abs (low, high), saturated


def _stats_words(stats) -> list[int]:
    return [stats[0] & 0xFFFF_FFFF, stats[0] >> 32, stats[1]]


def golden_transaction(cfg: RoundStageConfig, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(input words, expected words) of one run, expected from the golden model."""
    words_in = np.asarray(acc, dtype=np.int64).astype(np.uint32)
    out, stats = round_stage(words_in, cfg)
    return (np.array(descriptor(cfg) + [int(w) for w in words_in], dtype=np.uint64),
            np.array([int(w) for w in out] + _stats_words(stats), dtype=np.uint64))


def short_row_transaction(cfg: RoundStageConfig, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A run whose last row is short (the RTL and C++ behaviour the host never asks for): the golden words of the
    rows padded with zero accumulators, cut after ceil(r / lanes) groups of the last row; zeros change no
    statistic."""
    rows = -(-acc.size // cfg.row_values)
    padded = np.zeros(rows * cfg.row_values, dtype=np.int64)
    padded[:acc.size] = acc
    _, expected = golden_transaction(cfg, padded)
    r = acc.size - (rows - 1) * cfg.row_values
    keep = ((rows - 1) * cfg.groups_per_row + -(-r // cfg.lanes)) * cfg.group_words
    return (np.array(descriptor(cfg) + [int(w) for w in acc.astype(np.uint32)], dtype=np.uint64),
            np.concatenate([expected[:keep], expected[-STATS_WORDS:]]))


def point_stimulus(point: Point, seed: int = 38) -> list[np.ndarray]:
    """The accumulators of a grid point as runs of whole rows: directed first, then random to >= 10^4."""
    cfg, rng = point.cfg, np.random.default_rng(seed)
    row = cfg.row_values if cfg.enable else 1
    rows_total = -(-MIN_VALUES // row)
    first = directed(cfg)
    first_rows = min(-(-first.size // row), rows_total - 2)
    head = np.concatenate([first, random_acc(cfg, first_rows * row - first.size, rng)])[:first_rows * row]
    rng.shuffle(head[first.size // 2:])  # half the directed values in order, half spread
    rest = random_acc(cfg, (rows_total - first_rows) * row, rng)
    split = (rows_total - first_rows) // 2 * row
    return [head, rest[:split], rest[split:]]


def edge_transactions(seed: int = 3800) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every shift at widths 2, 4, 8, 16 and one more, random packings; short last rows; count 0; pass-through."""
    rng, runs = np.random.default_rng(seed), []
    for shift in range(-64, 64):
        for bits in (2, 4, 8, 16, 2 + (shift + 64) % 15):
            slot = slot_of(bits)
            lanes = int(rng.integers(1, min(16, 128 // slot) + 1))
            words = int(rng.integers(-(-lanes * slot // 32), 5))
            cfg = _cfg(shift=shift, bits=bits, lanes=lanes, group_words=words, row_values=int(rng.integers(1, 12)))
            acc = np.concatenate([directed(cfg), random_acc(cfg, 8, rng)])
            acc = acc[:max(cfg.row_values, acc.size // cfg.row_values * cfg.row_values)]
            acc = np.resize(acc, -(-acc.size // cfg.row_values) * cfg.row_values)
            runs.append(golden_transaction(cfg, acc))
    for _ in range(60):  # many rows of random packings: the stall-free latency of long runs
        bits = int(rng.choice([2, 4, 8, 16]))
        lanes = int(rng.integers(1, min(16, 128 // slot_of(bits)) + 1))
        cfg = _cfg(shift=int(rng.integers(-20, 4)), bits=bits, lanes=lanes, row_values=int(rng.integers(1, 41)),
                   group_words=int(rng.integers(-(-lanes * slot_of(bits) // 32), 5)))
        runs.append(golden_transaction(cfg, random_acc(cfg, cfg.row_values * int(rng.integers(1, 13)), rng)))
    for lanes, row, n in ((4, 10, 23), (3, 7, 1), (5, 12, 29), (16, 40, 57), (1, 5, 9)):
        cfg = _cfg(shift=-3, bits=8, lanes=lanes, group_words=-(-lanes * 8 // 32), row_values=row)
        runs.append(short_row_transaction(cfg, random_acc(cfg, n, rng)))
    runs.append(golden_transaction(_cfg(shift=0, bits=8, lanes=4, group_words=1, row_values=4), np.zeros(0, np.int64)))
    for n in (1, 2, 17):
        cfg = _cfg(False, shift=0, bits=16, lanes=2, group_words=1, row_values=3)
        runs.append(golden_transaction(cfg, random_acc(cfg, n, rng)))
    runs.append(golden_transaction(_cfg(False, shift=0, bits=8, lanes=1, group_words=1, row_values=1),
                                   np.zeros(0, np.int64)))
    return runs


def write_file(path: Path, runs, **meta) -> Path:
    return write_transactions(path, pe=PE, transactions=runs, meta=meta or {"what": "round_stage"})


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    """The C-sim checker, compiled once (and cached by content) for the module (the ap_types headers come with
    ``codesign setup``; without them the compile fails and says so)."""
    from codesign.hw.csim import compile_testbench

    return compile_testbench([CHECKER], include_dirs=[HEADER_DIR], build_dir=tmp_path_factory.mktemp("round_check"),
                             name="accel_round_check")


def run_csim(checker, vectors: Path):
    from codesign.hw.csim import run_testbench

    return run_testbench(checker, vectors)


def run_rtl(vectors: Path, work: Path, *, parts: int = 1, width: int = 32, seed: int = 1, pause_in: float = 0.3,
            pause_out: float = 0.3, timed_max: int = 4096) -> dict:
    """The bench on a vector file, the stage (accumulators of ``width`` bits: 32, or the shell's 48) taking up to
    ``parts`` accumulators a cycle; its JSON summary (raises when a word differs, after writing it)."""
    from codesign.hw.rtlsim import run_cocotb

    result = work / "round_result.json"
    run_cocotb(sources=[RTL], toplevel="accel_round", test_module="accel_round_bench",
               build_dir=work / f"build_p{parts}_w{width}", parameters={"PARTS": parts, "W": width},
               python_paths=[BENCH_DIR, ROOT],
               extra_env={"ROUND_VECTORS": str(vectors), "ROUND_RESULT": str(result), "ROUND_SEED": str(seed),
                          "ROUND_PAUSE_IN": str(pause_in), "ROUND_PAUSE_OUT": str(pause_out),
                          "ROUND_TIMED_MAX": str(timed_max)})
    return json.loads(result.read_text())


RTL_PARTS = (1, 2, 4)  # accumulators the stage takes a cycle: the parts of 32-, 64- and 128-bit stream words


def _grid_params():
    """Every point at every level; at RTL at every width, but make test runs each point that is not ``rtl_slow`` at
    one width, the widest first (make test-slow runs the rest)."""
    quick = [point for point in GRID if not point.rtl_slow]
    for point in GRID:
        quick_parts = None if point.rtl_slow else RTL_PARTS[-1 - quick.index(point) % len(RTL_PARTS)]
        for level in LEVELS:
            for parts in RTL_PARTS if level == "rtl" else (1,):
                slow = level == "rtl" and parts != quick_parts
                suffix = f"-p{parts}" if level == "rtl" else ""
                yield pytest.param(point, level, parts, id=f"{point.name}-{level}{suffix}",
                                   marks=LEVEL_MARKS[level] + ([pytest.mark.slow] if slow else []))


@pytest.mark.parametrize(("point", "level", "parts"), list(_grid_params()))
def test_levels_agree(point, level, parts, tmp_path, request):
    """Zero mismatches at this level on >= 10^4 accumulators of this grid point (the RTL taking up to ``parts``
    a cycle, offered fewer at random)."""
    runs = point_stimulus(point)
    started = time.perf_counter()
    if level == "golden":
        values, mismatches = 0, 0
        for acc in runs:
            words, stats = round_stage(acc.astype(np.uint32), point.cfg)
            ref_words, ref_stats = reference_stage(acc, point.cfg)
            got = [int(w) for w in words] + list(stats)
            want = ref_words + ref_stats
            mismatches += sum(int(a != b) for a, b in zip(got, want)) + abs(len(got) - len(want))
            values += acc.size
    else:
        vectors = write_file(tmp_path / "vectors.txt", [golden_transaction(point.cfg, acc) for acc in runs])
        if level == "csim":
            result = run_csim(request.getfixturevalue("checker"), vectors)
            values, mismatches = result.vectors, result.mismatches
        else:
            summary = run_rtl(vectors, tmp_path, parts=parts, seed=len(point.name) + parts)
            values, mismatches = summary["values"], summary["mismatches"]
    print(f"\n{level} {point.name} values={values} mismatches={mismatches} "
          f"seconds={time.perf_counter() - started:.2f}")
    assert values >= MIN_VALUES and values == sum(acc.size for acc in runs)
    assert mismatches == 0


def test_grid_covers_the_brief():
    """Shifts negative, zero, positive and both extremes; widths 4, 8, 16; one pass-through point; each point's
    stimulus holds exact ties (where its shift has them), zeros and both 32-bit extremes."""
    shifts = {p.cfg.shift for p in GRID if p.cfg.enable}
    assert {-64, 63, 0} <= shifts and min(shifts) < 0 < max(s for s in shifts if s != 63)
    assert {4, 8, 16} <= {p.cfg.bits for p in GRID}
    assert any(not p.cfg.enable for p in GRID) and any(not p.rtl_slow for p in GRID)
    for point in GRID:
        acc = np.concatenate(point_stimulus(point))
        assert {0, INT32[0], INT32[1]} <= set(acc.tolist())
        s = -point.cfg.shift
        if 1 <= s <= 32:
            ties = set(acc[(acc & ((1 << s) - 1)) == 1 << (s - 1)].tolist())
            assert len(ties) >= min(40, 1 << (32 - s))  # 2^(32-s) exact ties fit 32 bits


@needs_gxx
def test_edges_csim(checker, tmp_path):
    """Every shift -64..63 at several widths, short last rows, count 0 and pass-through, in C simulation."""
    runs = edge_transactions()
    result = run_csim(checker, write_file(tmp_path / "edges.txt", runs))
    print(f"\ncsim edges values={result.vectors} mismatches={result.mismatches}")
    assert (result.vectors, result.mismatches) == (sum(int(r[0].size) - 2 for r in runs), 0), result.first_mismatches


@pytest.mark.slow
@needs_icarus
@pytest.mark.parametrize("parts", RTL_PARTS)
def test_edges_rtl(tmp_path, parts):
    """The same edge file through the RTL, with random gaps and stalls, and every whole-row run timed."""
    runs = edge_transactions()
    summary = run_rtl(write_file(tmp_path / "edges.txt", runs), tmp_path, parts=parts, seed=5, pause_in=0.4,
                      pause_out=0.4)
    print(f"\nrtl edges parts={parts} values={summary['values']} mismatches={summary['mismatches']} "
          f"timed={summary['timed_runs']}")
    assert summary["mismatches"] == 0 and summary["timed_runs"] > 500


@pytest.mark.slow
@needs_icarus
@pytest.mark.parametrize("parts", [1, 4])
def test_edges_rtl_at_the_shells_width(tmp_path, parts):
    """The edge file through the stage as the shell builds it (W = 48, raw64 low): 32-bit accumulators
    sign-extended, in part 0's 48-bit datapath and in the 32-bit datapaths of the parts past it."""
    runs = edge_transactions()
    summary = run_rtl(write_file(tmp_path / "edges.txt", runs), tmp_path, parts=parts, width=48, seed=7,
                      pause_in=0.4, pause_out=0.4)
    print(f"\nrtl edges W=48 parts={parts} values={summary['values']} mismatches={summary['mismatches']} "
          f"timed={summary['timed_runs']}")
    assert summary["mismatches"] == 0 and summary["timed_runs"] > 500


@needs_gxx
def test_checker_reports_a_wrong_word(checker, tmp_path):
    """A level that differs fails: one flipped expected bit is one mismatch, exit status 1."""
    cfg = GRID[0].cfg
    words_in, words_out = golden_transaction(cfg, np.resize(directed(cfg), cfg.row_values))
    wrong = words_out.copy()
    wrong[3] ^= np.uint64(1 << 4)
    result = run_csim(checker, write_file(tmp_path / "wrong.txt", [(words_in, words_out), (words_in, wrong)]))
    assert (result.mismatches, result.passed) == (1, False) and "transaction=1 word=3" in result.first_mismatches


@needs_icarus
def test_bench_reports_a_wrong_word(tmp_path):
    """The RTL bench fails on one wrong expected word (and counts it), under gaps and stalls."""
    from codesign.hw.rtlsim import CocotbTestFailure

    cfg = GRID[3].cfg
    words_in, words_out = golden_transaction(cfg, np.resize(directed(cfg), 4 * cfg.row_values))
    wrong = words_out.copy()
    wrong[-1] ^= np.uint64(1)  # the saturation count
    with pytest.raises(CocotbTestFailure):
        run_rtl(write_file(tmp_path / "wrong.txt", [(words_in, words_out), (words_in, wrong)]), tmp_path,
                timed_max=0)
    summary = json.loads((tmp_path / "round_result.json").read_text())
    assert summary["mismatches"] == 1 and summary["values"] == 2 * (words_in.size - 2)


HELD_CHECKER = BENCH_DIR / "accel_held_check.cpp"


def held_runs(rng: np.random.Generator) -> list:
    """Runs of the stage on held sums: every shift from -64 to 63 at widths 2, 8 and 16 (one packing each) and a
    pass-through run (64-bit words), each of 48-bit sums: the range's ends, 0, +-1, values just past 32 bits,
    exact ties at the run's shift beside the code range's edges and far outside it, and random sums."""
    from codesign.numerics.round_stage import HELD_RANGE

    runs = []
    for shift in range(-64, 64):
        for bits, lanes, group_words in ((2, 16, 2), (8, 4, 1), (16, 3, 2)):
            unit = 1 << min(-shift, 47) if shift < 0 else 1
            ties = [(2 * k + 1) * unit // 2 for k in (-(1 << (bits - 1)) - 1, -(1 << (bits - 1)), -1, 0,
                                                          (1 << (bits - 1)) - 1, 1 << (bits - 1), 1 << 20)]
            values = np.concatenate([np.array([*HELD_RANGE, 0, 1, -1, 1 << 32, -(1 << 32) - 1]),
                                     np.array([min(max(t, HELD_RANGE[0]), HELD_RANGE[1]) for t in ties]),
                                     rng.integers(*HELD_RANGE, 40, endpoint=True),
                                     rng.integers(-(1 << 34), 1 << 34, 20)])
            runs.append((_cfg(shift=shift, bits=bits, lanes=lanes, group_words=group_words, row_values=37), values))
    runs.append((_cfg(False, shift=0, bits=8, lanes=1, group_words=1, row_values=1),
                 rng.integers(*HELD_RANGE, 200, endpoint=True)))
    return runs


@needs_gxx
def test_held_sums_at_csim_equal_round_held(tmp_path):
    """round_held_stream under g++ sends the words and statistics of round_held (the golden model, itself held
    to the host's rescale in tests/numerics/test_round_stage.py), for every shift, at 48-bit sums."""
    from codesign.hw.csim import compile_testbench, run_testbench
    from codesign.numerics.round_stage import round_held

    runs = held_runs(np.random.default_rng(48))
    lines = [str(len(runs))]
    for cfg, values in runs:
        words, stats = round_held(values, cfg)
        lines.append(" ".join(map(str, (int(cfg.enable), cfg.shift, cfg.bits, cfg.lanes, cfg.group_words,
                                        cfg.row_values, cfg.field_bits, values.size, *values.tolist(), words.size,
                                        *words.tolist(), stats.sum_abs, stats.saturated))))
    cases = tmp_path / "held_cases.txt"
    cases.write_text("\n".join(lines) + "\n")
    build = compile_testbench([HELD_CHECKER], include_dirs=[HEADER_DIR], build_dir=tmp_path / "build",
                              name="accel_held_check")
    result = run_testbench(build, cases)
    print(f"\ncsim held values={result.vectors} mismatches={result.mismatches}")
    assert result.vectors == sum(values.size for _, values in runs) >= 10_000 and result.mismatches == 0
