"""The call-list cycle model (codesign.step.list_cycles) against the RTL shell: cycles from run_start to ap_done,
exactly (the bench's busy_cycles), over TT PE1/PE2/PE3 lists of 1 to many calls, strided and contiguous blocks,
inline and descriptor headers, 3-D blocks, raw and rounded results, refused calls, chains of accumulating calls
(held results, rounded and raw 64-bit drains), at 32-, 64- and 128-bit stream words; and
the PEs' phases against their stall-free transaction cycles (the rounding stage's model against its latency:
tests/step/test_list_round.py)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from codesign.contracts.calls import Block, Call, CallListError
from codesign.pe import get_pe
from codesign.pe.tt.contract import header_word
from codesign.pe.tt.cycles import transaction_cycles
from codesign.shell.calls import ListCase, chain_list, run_list_golden, tt_chain
from codesign.shell.list_sim import run_list_rtl
import codesign.step.list_cycles as list_cycles_module
from codesign.step.list_cycles import CONTROL_CYCLES, DdrTiming, bench_poll_cycles, fast_step_cycles, list_cycles

sys.path.insert(0, str(Path(__file__).parent))
from list_cases import random_list  # noqa: E402

PES = {name: (get_pe(name), get_pe(name).spec_class()) for name in ("tt1", "tt2", "tt3")}


def _wide_spec(name: str, bits: int):
    """The PE's default spec at ``bits``-bit stream words."""
    return dataclasses.replace(PES[name][1], stream_bits=bits)


def _refused_chain(seed: int) -> ListCase:
    """tt_chain with a refused call (J past the buffer) between its two calls: the list ends after its record."""
    pe, spec = PES["tt1"]
    case = tt_chain(pe, spec, np.random.default_rng(seed))
    first, second = case.calls
    refused = Call(header=header_word(1, spec.max_j + 1, 1, 1), segments=(), out=Block(), count=0,
                   record=second.record)
    calls = (first, refused, second)
    return ListCase(calls=calls, arena=case.arena, expected=run_list_golden(pe, spec, case.arena, calls))


def _chain(**kwargs):
    pe, spec = PES["tt1"]
    return lambda: tt_chain(pe, spec, np.random.default_rng(kwargs.pop("seed", 1)), **kwargs)


def _random(name: str, n: int, seed: int, **kwargs):
    pe, spec = PES[name]
    return lambda: random_list(pe, spec, np.random.default_rng(seed), n, **kwargs)


CASES = {  # name -> (pe, builder)
    "chain": ("tt1", _chain()),
    "chain-saturating": ("tt1", _chain(seed=2, shift=2, i=4, k=9)),
    "chain-refused": ("tt1", lambda: _refused_chain(4)),
    "tt1-one-call": ("tt1", _random("tt1", 1, 2)),
    "tt1-inline": ("tt1", _random("tt1", 8, 3, inline_every=2)),
    "tt1-contiguous": ("tt1", _random("tt1", 5, 4, strided=False)),
    "tt1-refused": ("tt1", _random("tt1", 6, 5, refuse_at=3)),
    "tt2-inline-refused": ("tt2", _random("tt2", 6, 6, inline_every=3, refuse_at=4)),
    "tt3-inline": ("tt3", _random("tt3", 8, 7, inline_every=2)),
    "tt3-refused-first": ("tt3", _random("tt3", 5, 8, strided=False, refuse_at=0)),
}
SLOW_CASES = {
    "chain-large": ("tt1", _chain(seed=3, shift=-12, i=9, j=4, k=40, l=20, l2=17)),
    "tt1-large": ("tt1", _random("tt1", 3, 9, scale=4)),
    "tt2-large": ("tt2", _random("tt2", 3, 10, scale=4)),
    "tt3-large": ("tt3", _random("tt3", 3, 11, scale=3)),
    "tt1-many": ("tt1", _random("tt1", 60, 12, inline_every=5)),
    "tt2-many": ("tt2", _random("tt2", 40, 13, inline_every=4, strided=False)),
    "tt3-many": ("tt3", _random("tt3", 40, 14, inline_every=3)),
}


@pytest.mark.parametrize("name", list(CASES) + [pytest.param(name, marks=pytest.mark.slow) for name in SLOW_CASES])
def test_model_equals_rtl_busy_cycles(tmp_path, name):
    pe_name, build = {**CASES, **SLOW_CASES}[name]
    pe, spec = PES[pe_name]
    case = build()
    model = list_cycles(pe, spec, case.calls, case.arena)
    result = run_list_rtl(pe, spec, case, tmp_path, pause=0.0)
    print(f"\n[list cycles] {name}: {len(case.calls)} calls ({len(model.calls)} run), model {model.total}, RTL busy "
          f"{result.busy_cycles} (error {model.total - result.busy_cycles}); bench ap_start->poll {result.cycles}; "
          f"{model.breakdown()}")
    assert result.passed, result.first_mismatches
    assert model.total == result.busy_cycles
    assert bench_poll_cycles(model.total) == result.cycles  # the host's view: the poll grid on top


DDR_CASES = [  # (case, DDR timing): a handful of cheap RTL runs for the normal tier
    ("chain", DdrTiming()),
    ("chain", DdrTiming(queue_limit=2)),  # the AxiRam's own queues under the DDR pacer
    ("tt1-contiguous", DdrTiming(queue_limit=3)),
    ("chain-refused", DdrTiming(read_latency=8, write_latency=8, read_beats=1, read_window=2)),
    ("tt3-inline", DdrTiming(read_latency=30, write_latency=1, read_beats=3, read_window=4)),
    ("tt2-inline-refused", DdrTiming(read_latency=1, write_latency=30, read_beats=2, read_window=3)),
    ("tt1-contiguous", DdrTiming(read_latency=8, write_latency=8, write_beats=1, write_window=2)),
]
DDR_GRID = [DdrTiming(read_latency=latency, write_latency=latency, read_beats=beats, read_window=window)
            for latency in (1, 8, 30) for beats, window in ((1, 1), (1, 2), (3, 4))]
W_THROTTLED = [DdrTiming(read_latency=30, write_latency=20, read_beats=3, read_window=4, write_beats=1,
                         write_window=2), DdrTiming(read_latency=1, write_latency=1, write_beats=2, write_window=3),
               DdrTiming(queue_limit=2)]


def _tiers(names: list, timings: list, quick: list) -> tuple[list, list]:
    """(slow, long): pairs of (case, DDR timing) beside the ``quick`` tier's. Each case gets one timing, the
    timings taken in turn (make test-slow runs the pair, or make test where it is quick), so every case and every
    timing runs in CI; make test-long runs the rest of the product."""
    assert len(names) >= len(timings), (len(names), len(timings))
    turns = [(name, timings[index % len(timings)]) for index, name in enumerate(names)]
    slow = [pair for pair in turns if pair not in quick]
    return slow, [(name, ddr) for name in names for ddr in timings if (name, ddr) not in quick + slow]


SLOW_DDR_CASES, LONG_DDR_CASES = _tiers(list(CASES) + list(SLOW_CASES), DDR_GRID[::4] + [DdrTiming()] + W_THROTTLED,
                                        DDR_CASES)


def _ddr_id(ddr: DdrTiming) -> str:
    return (f"r{ddr.read_latency}-w{ddr.write_latency}-rbw{ddr.read_beats}of{ddr.read_window}"
            f"-wbw{ddr.write_beats}of{ddr.write_window}-q{ddr.queue_limit}")


@pytest.mark.parametrize("name, ddr", [pytest.param(n, d, id=f"{n}-{_ddr_id(d)}") for n, d in DDR_CASES]
                         + [pytest.param(n, d, id=f"{n}-{_ddr_id(d)}", marks=pytest.mark.slow)
                            for n, d in SLOW_DDR_CASES]
                         + [pytest.param(n, d, id=f"{n}-{_ddr_id(d)}", marks=pytest.mark.long)
                            for n, d in LONG_DDR_CASES])
def test_model_equals_rtl_busy_cycles_under_ddr_timing(tmp_path, name, ddr):
    """The bench's DDR pacer (read latency, write latency, R bandwidth, W throttle) and the model's: equal
    cycles, exactly."""
    pe_name, build = {**CASES, **SLOW_CASES}[name]
    pe, spec = PES[pe_name]
    case = build()
    model = list_cycles(pe, spec, case.calls, case.arena, ddr=ddr)
    result = run_list_rtl(pe, spec, case, tmp_path, ddr=ddr)
    print(f"\n[list cycles, DDR] {name} {_ddr_id(ddr)}: model {model.total}, RTL busy {result.busy_cycles} "
          f"(error {model.total - result.busy_cycles}); {model.breakdown()}")
    assert result.passed, result.first_mismatches
    assert model.total == result.busy_cycles


def _wide_random(name: str, bits: int, n: int, seed: int, **kwargs):
    pe = PES[name][0]
    return lambda: random_list(pe, _wide_spec(name, bits), np.random.default_rng(seed), n, **kwargs)


def _wide_chain(bits: int, seed: int, **kwargs):
    pe = PES["tt1"][0]
    return lambda: tt_chain(pe, _wide_spec("tt1", bits), np.random.default_rng(seed), **kwargs)


def _planes(bits: int, seed: int):
    """chain_list without chains: PE1 calls whose operand and out blocks are 3-D (planes stacked or interleaved)."""
    pe = PES["tt1"][0]
    return lambda: chain_list(pe, _wide_spec("tt1", bits), np.random.default_rng(seed), min_values=1500,
                              chains=False)


def _three(bits: int, seed: int, chains: bool = False):
    """chain_list with every call's A in two segments: three segments a call, a cycle between each."""
    pe = PES["tt1"][0]
    return lambda: chain_list(pe, _wide_spec("tt1", bits), np.random.default_rng(seed), min_values=1500,
                              chains=chains, three=True)


def _chains(bits: int, seed: int, min_values: int = 1500):
    """chain_list with chains: accumulating calls (held into accel_seq's buffer, drained rounded or raw as 64-bit
    words), plain calls between a chain's calls, every block 3-D."""
    pe = PES["tt1"][0]
    return lambda: chain_list(pe, _wide_spec("tt1", bits), np.random.default_rng(seed), min_values=min_values)


def _pairs_spec(name: str, bits: int):
    """8 lanes x 4 rows in pairs: PE2 with row pairs (a call of K <= 4 runs groups of 8 rows), PE1 summing rows j
    in pairs (a call of K <= 4 takes ceil(J/2) MAC-loop cycles a group)."""
    pairs = {"row_pairs": True} if name == "tt2" else {"j_pairs": True}
    return get_pe(name).spec_class(lanes=8, rows=4, stream_bits=bits, **pairs)


def _pair_dims(rng: np.random.Generator) -> tuple:
    """I, J, K, L of a call on :func:`_pairs_spec`: J up to 16, K 1 to 6 (two in three in pairs), L 1 to 18 (up to
    three groups of 8 rows)."""
    return tuple(int(rng.integers(1, top + 1)) for top in (3, 16, 6, 18))


def _pairs(name: str, bits: int, n: int, seed: int, **kwargs):
    """Random calls of :func:`_pair_dims` on :func:`_pairs_spec`."""
    return lambda: random_list(PES[name][0], _pairs_spec(name, bits), np.random.default_rng(seed), n,
                               dims_of=_pair_dims, **kwargs)


def _case_spec(name: str, pe_name: str, bits: int):
    """The build a wide case runs on: :func:`_pairs_spec` for the pair cases, else the PE's default."""
    return _pairs_spec(pe_name, bits) if "pairs" in name else _wide_spec(pe_name, bits)


WIDE_CASES = {  # name -> (pe, stream bits, builder): 1 to 6 s of RTL each
    "chain-64": ("tt1", 64, _wide_chain(64, 1, i=4, l2=4)),
    "chain-128": ("tt1", 128, _wide_chain(128, 1, i=4, l2=4)),
    "tt1-64": ("tt1", 64, _wide_random("tt1", 64, 4, 41, inline_every=2)),
    "tt1-128-refused": ("tt1", 128, _wide_random("tt1", 128, 4, 42, inline_every=3, refuse_at=2)),
    "tt2-64-refused": ("tt2", 64, _wide_random("tt2", 64, 4, 43, inline_every=2, refuse_at=3)),
    "tt2-128": ("tt2", 128, _wide_random("tt2", 128, 4, 44, inline_every=3)),
    "tt2-128-pairs": ("tt2", 128, _pairs("tt2", 128, 10, 91, inline_every=3)),  # row pairs: groups of 2 x rows
    "tt1-128-pairs": ("tt1", 128, _pairs("tt1", 128, 10, 93, inline_every=3)),  # rows j summed in pairs
    "tt3-64": ("tt3", 64, _wide_random("tt3", 64, 4, 45, inline_every=2, strided=False)),
    "tt3-128-refused": ("tt3", 128, _wide_random("tt3", 128, 4, 46, inline_every=2, refuse_at=3)),
    "planes-128": ("tt1", 128, _planes(128, 63)),  # 3-D blocks: a cycle between planes on either side
    "chains-128": ("tt1", 128, _chains(128, 73)),  # accumulating calls: O_HOLD, the buffer, 64-bit raw drains
    "three-32": ("tt1", 32, _three(32, 81)),  # three segments a call
    "three-128-chains": ("tt1", 128, _three(128, 82, chains=True)),
}
SLOW_WIDE_CASES = {  # and the 3-D blocks and accumulating calls at 32 and 64 bits: 5 to 9 s of RTL each
    "planes-32": ("tt1", 32, _planes(32, 61)),
    "planes-64": ("tt1", 64, _planes(64, 62)),
    "three-64-chains": ("tt1", 64, _three(64, 83, chains=True)),
    "chains-32": ("tt1", 32, _chains(32, 71)),
    "chains-64": ("tt1", 64, _chains(64, 72)),
    "chain-64-large": ("tt1", 64, _wide_chain(64, 3, shift=-12, i=9, j=4, k=40, l=20, l2=16)),
    "chain-128-large": ("tt1", 128, _wide_chain(128, 3, shift=-12, i=9, j=4, k=40, l=20, l2=16)),
    "tt1-64-large": ("tt1", 64, _wide_random("tt1", 64, 3, 47, scale=4)),
    "tt1-128-large": ("tt1", 128, _wide_random("tt1", 128, 3, 48, scale=4)),
    "tt2-64-large": ("tt2", 64, _wide_random("tt2", 64, 3, 49, scale=4)),
    "tt2-128-large": ("tt2", 128, _wide_random("tt2", 128, 3, 50, scale=4)),
    "tt3-64-large": ("tt3", 64, _wide_random("tt3", 64, 3, 51, scale=3)),
    "tt3-128-large": ("tt3", 128, _wide_random("tt3", 128, 3, 52, scale=3)),
    "tt1-64-many": ("tt1", 64, _wide_random("tt1", 64, 30, 53, inline_every=5)),
    "tt2-128-many": ("tt2", 128, _wide_random("tt2", 128, 30, 54, inline_every=4, strided=False)),
    "tt2-32-pairs-many": ("tt2", 32, _pairs("tt2", 32, 30, 92, inline_every=4, refuse_at=17)),
    "tt1-64-pairs-many": ("tt1", 64, _pairs("tt1", 64, 30, 94, inline_every=4, refuse_at=21)),
    "tt3-128-many": ("tt3", 128, _wide_random("tt3", 128, 30, 55, inline_every=3)),
    "tt3-64-many": ("tt3", 64, _wide_random("tt3", 64, 30, 56, inline_every=3, refuse_at=25)),
    "chains-32-large": ("tt1", 32, _chains(32, 74, 10_000)),  # chain_list's default size: ~45 chains
    "chains-64-large": ("tt1", 64, _chains(64, 75, 10_000)),
    "chains-128-large": ("tt1", 128, _chains(128, 76, 10_000)),
}
WIDE_DDR = [  # (case, DDR timing) chosen: the default DDR at both widths, one throttled each way
    ("chain-64", DdrTiming()),
    ("tt2-128", DdrTiming()),
    ("tt2-128-pairs", DdrTiming()),
    ("tt1-128-pairs", DdrTiming()),
    ("tt3-64", DdrTiming(read_latency=30, write_latency=1, read_beats=3, read_window=4)),
    ("tt1-128-refused", DdrTiming(read_latency=8, write_latency=8, write_beats=1, write_window=2)),
    ("planes-32", DdrTiming()),
    ("planes-32", DdrTiming(queue_limit=2)),
    ("chains-32", DdrTiming()),
    ("chains-64", DdrTiming(read_latency=30, write_latency=20, read_beats=3, read_window=4, write_beats=1,
                            write_window=2)),
    ("chains-128", DdrTiming(read_latency=8, write_latency=8, read_beats=1, read_window=2)),
]
QUICK_WIDE_DDR = WIDE_DDR[:6]  # make test's (1 to 2 s each); make test-slow runs the others
SLOW = pytest.mark.slow
SLOW_WIDE_DDR, LONG_WIDE_DDR = _tiers(list(WIDE_CASES) + list(SLOW_WIDE_CASES),
                                     [DdrTiming(), DDR_GRID[4]] + W_THROTTLED, WIDE_DDR)


@pytest.mark.parametrize("name, ddr", [pytest.param(n, None, id=n) for n in WIDE_CASES]
                         + [pytest.param(n, d, id=f"{n}-{_ddr_id(d)}", marks=[] if (n, d) in QUICK_WIDE_DDR else SLOW)
                            for n, d in WIDE_DDR]
                         + [pytest.param(n, None, id=n, marks=pytest.mark.slow) for n in SLOW_WIDE_CASES]
                         + [pytest.param(n, d, id=f"{n}-{_ddr_id(d)}", marks=pytest.mark.slow)
                            for n, d in SLOW_WIDE_DDR]
                         + [pytest.param(n, d, id=f"{n}-{_ddr_id(d)}", marks=pytest.mark.long)
                            for n, d in LONG_WIDE_DDR])
def test_wide_model_equals_rtl_busy_cycles(tmp_path, name, ddr):
    """64- and 128-bit stream words (accel_seq's g_parts unpacker and packer, beat-wide movers, the PEs' output
    packers): the model's cycles are the RTL's busy cycles, exactly, with and without the DDR pacer."""
    pe_name, bits, build = {**WIDE_CASES, **SLOW_WIDE_CASES}[name]
    pe, spec = PES[pe_name][0], _case_spec(name, pe_name, bits)
    case = build()
    model = list_cycles(pe, spec, case.calls, case.arena, ddr=ddr)
    result = run_list_rtl(pe, spec, case, tmp_path, pause=0.0, **({"ddr": ddr} if ddr else {}))
    print(f"\n[list cycles, {bits}-bit] {name} {_ddr_id(ddr) if ddr else 'AxiRam'}: {len(case.calls)} calls "
          f"({len(model.calls)} run), model {model.total}, RTL busy {result.busy_cycles} "
          f"(error {model.total - result.busy_cycles}); {model.breakdown()}")
    assert result.passed, result.first_mismatches
    assert model.total == result.busy_cycles


LEAN_CASES = [("tt2-128", None)]
SLOW_LEAN_CASES = [("tt1-64", None), ("tt3-128-refused", None), ("planes-32", None), ("planes-128", None),
                   ("tt2-128", DdrTiming(read_latency=8, write_latency=8, write_beats=1, write_window=2))]


@pytest.mark.parametrize("name, ddr", [pytest.param(n, d, id=f"{n}-{_ddr_id(d) if d else 'AxiRam'}")
                                       for n, d in LEAN_CASES]
                         + [pytest.param(n, d, id=f"{n}-{_ddr_id(d) if d else 'AxiRam'}", marks=pytest.mark.slow)
                            for n, d in SLOW_LEAN_CASES])
def test_a_shell_without_the_buffer_runs_lists_that_hold_nothing_alike(tmp_path, name, ddr):
    """held_sums False (accel_seq HELD = 0: no accumulation buffer, a 32-bit rounding stage): the same words and
    the same cycles as the model's (and so as the full shell's) for lists without accumulating calls."""
    pe_name, bits, build = {**WIDE_CASES, **SLOW_WIDE_CASES}[name]
    pe, spec = PES[pe_name][0], _case_spec(name, pe_name, bits)
    case = build()
    model = list_cycles(pe, spec, case.calls, case.arena, ddr=ddr)
    result = run_list_rtl(pe, spec, case, tmp_path, held_sums=False, **({"ddr": ddr} if ddr else {}))
    print(f"\n[list cycles, lean {bits}-bit] {name}: model {model.total}, RTL busy {result.busy_cycles}")
    assert result.passed, result.first_mismatches
    assert result.words >= case.expected.size and model.total == result.busy_cycles


def test_a_shell_without_the_buffer_refuses_accumulating_calls():
    pe, spec = PES["tt1"]
    case = chain_list(pe, spec, np.random.default_rng(1), min_values=300)
    assert case.calls[0].acc_hold and not case.calls[1].acc_hold
    assert run_list_golden(pe, spec, case.arena, case.calls).tolist() == case.expected.tolist()
    with pytest.raises(CallListError, match="call 0 accumulates, but this shell has no accumulation buffer"):
        run_list_golden(pe, spec, case.arena, case.calls, held_sums=False)


def test_ddr_timing_is_validated():
    for bad in ({"read_latency": 0}, {"write_latency": -1}, {"read_beats": 0}, {"read_beats": 3, "read_window": 2},
                {"read_latency": 2.0}, {"read_window": True}, {"write_beats": 2}, {"write_window": 0},
                {"queue_limit": 0}, {"queue_limit": 1.5}):
        with pytest.raises(ValueError):
            DdrTiming(**bad)


@pytest.mark.parametrize("name", ["tt1", "tt2", "tt3"])
def test_ddr_timing_of_the_axi_ram_alone_changes_nothing_and_latency_only_adds(name):
    """DdrTiming(1, 1, 1, 1) never pauses: the cycles without DDR timing. On these lists more read or write
    latency or less read bandwidth never makes the list faster (not a theorem: pauses shift the movers'
    interleaving, so the check is of these lists only)."""
    pe, spec = PES[name]
    case = random_list(pe, spec, np.random.default_rng(31), 12, inline_every=3, refuse_at=10)
    plain = list_cycles(pe, spec, case.calls, case.arena)
    axi_ram = list_cycles(pe, spec, case.calls, case.arena,
                          ddr=DdrTiming(read_latency=1, write_latency=1, read_beats=1, read_window=1, queue_limit=2))
    assert axi_ram == plain
    totals = [list_cycles(pe, spec, case.calls, case.arena, ddr=ddr).total for ddr in DDR_GRID]
    for index, ddr in enumerate(DDR_GRID):
        for other, slower in enumerate(DDR_GRID):
            if (slower.read_latency >= ddr.read_latency
                    and slower.read_beats * ddr.read_window <= ddr.read_beats * slower.read_window):
                assert totals[other] >= totals[index], (ddr, slower)
    assert totals[-1] > plain.total


@pytest.mark.parametrize("bits", [32, 64, 128])
@pytest.mark.parametrize("name", ["tt1", "tt2", "tt3"])
def test_pe_cycles_are_the_stall_free_transaction_cycles(name, bits):
    """The cycles a call's PE works (header, status, loads, compute, results: at a wide stream its beats that
    close no word too, and PE2's extra drain cycle S) are docs/tt_pe.md's formula at the stream width: the
    list only adds waiting around them. Where PE1's or PE2's loader works beside the MAC loop, a word the
    memory is late with can move a load past the loop, so the PE works longer, by at most the overlap; where
    PE2's output engine sends a group beside the next one's MAC loop, the loop held up so can leave the engine
    alone, by at most the drain's overlap."""
    pe, spec = PES[name][0], _wide_spec(name, bits)
    case = random_list(pe, spec, np.random.default_rng(21), 12, inline_every=3, refuse_at=10)
    model = list_cycles(pe, spec, case.calls, case.arena)
    headers = [call.header if call.header is not None else int(case.arena[call.segments[0].offset // 4])
               for call in case.calls]  # an inline header's parts above the first are 0
    formula = [transaction_cycles(spec, h) for h in headers[:11]]
    assert len(model.calls) == 11
    for call, cycles in zip(model.calls, formula):
        assert cycles.total <= call.pe <= cycles.total + cycles.overlap + cycles.drain_overlap
        if not cycles.overlap and not cycles.drain_overlap:
            assert call.pe == cycles.total
    assert name == "tt3" or any(cycles.overlap for cycles in formula)
    assert model.total == CONTROL_CYCLES + sum(call.total for call in model.calls) == sum(model.breakdown().values())
    assert model.calls[-1].status != 0 and len(model.calls) == 11


def test_equal_calls_are_priced_alike_however_many():
    """A list of a thousand repeats of the same two calls: every repeat past the first costs what the second did
    (the model prices a call from a quiet start once per timing key; the first call fetches its own descriptor,
    every later one takes the one fetched while the call before computed, and the last fetches none). The
    model's speed is a benchmark's figure (benchmarks/bench_tt_forward_lists.py prints it), not a timed test's."""
    pe, spec = PES["tt1"]
    case = tt_chain(pe, spec, np.random.default_rng(1))
    model = list_cycles(pe, spec, case.calls * 1000, case.arena)
    assert len(model.calls) == 2000
    assert [call.total for call in model.calls[4:6]] == [call.total for call in model.calls[2:4]]
    assert [call.total for call in model.calls[-4:-2]] == [call.total for call in model.calls[2:4]]
    assert model.calls[0].fetch > model.calls[2].fetch == 1  # one I_FETCH cycle on a descriptor fetched beside


KEYS_AT_SEVEN_OFFSETS = {"chain": 2, "tt1-inline": 2, "tt2-inline-refused": 6, "tt1-contiguous": 2, "tt3-inline": 6}


@pytest.mark.parametrize("name, ddr", [("chain", None), ("tt1-inline", DdrTiming()), ("tt2-inline-refused", None),
                                       ("tt1-contiguous", DdrTiming(write_beats=1, write_window=2)),
                                       ("tt3-inline", DdrTiming(read_latency=30, read_beats=3, read_window=4))])
def test_lists_of_equal_timing_keys_take_equal_cycles(name, ddr):
    """The model keeps a list's cycles by its calls' timing keys, which hold a block's addresses only where a row
    crosses a 4 KiB page (elsewhere its bursts do not depend on them). Each list here is simulated from reset
    (the kept lists cleared) at arenas and lists moved by whole pages and by parts of one: lists of one key take
    the same cycles call by call, a list kept is served as simulated, and moving by a whole page keeps the key."""
    pe_name, build = CASES[name]
    pe, spec = PES[pe_name]
    case = build()
    priced: dict = {}
    for shift in (0, 4096, 64, 1024, 2048 + 128, 4096 - 256, 4096 - 64):
        list_cycles_module._LISTS.clear()
        model = list_cycles(pe, spec, case.calls, case.arena, arena_addr=0x0010_0040 + shift,
                            list_addr=0x0020_0000 + 3 * shift, ddr=ddr)
        (key,) = list_cycles_module._LISTS
        cycles = tuple((call.fetch, call.pe, call.stall, call.record, call.status) for call in model.calls)
        assert priced.setdefault(key, cycles) == cycles, f"shift {shift}: the key of another list, other cycles"
        if shift == 0:
            first = key
        kept = list_cycles(pe, spec, case.calls, case.arena, arena_addr=0x0010_0040 + shift,
                           list_addr=0x0020_0000 + 3 * shift, ddr=ddr)
        assert kept is model and len(list_cycles_module._LISTS) == 1
    # 0 and 4096 share a key; where no run crosses a page the others do too (exact offsets: 6 keys of 7 lists)
    assert list(priced)[0] == first and len(priced) == KEYS_AT_SEVEN_OFFSETS[name]


def test_accumulating_calls_are_priced():
    """Chains of accumulating calls are modelled: a holding call writes its record alone (no out rows, the
    rounding stage not started), so it costs fewer cycles than the same call made plain; a raw drain sends two
    words a sum (the stage's 64-bit fields), so it costs more than the same call passing 32-bit words."""
    pe, spec = PES["tt1"]
    case = chain_list(pe, spec, np.random.default_rng(3), min_values=100)
    model = list_cycles(pe, spec, case.calls, case.arena)
    assert len(model.calls) == len(case.calls)
    spare = 4 * case.arena.size  # an out block past the arena: the model moves no data

    def cost(call: Call, **changes) -> int:
        return list_cycles(pe, spec, [dataclasses.replace(call, **changes)], case.arena).total

    hold = next(call for call in case.calls if call.acc_hold)
    drain = next(call for call in case.calls if call.acc_add and not call.acc_hold and not call.rounding.enable)
    assert cost(hold) < cost(hold, acc_hold=False, acc_add=False, out=Block(offset=spare, words=hold.count, rows=1))
    assert cost(drain) > cost(drain, acc_add=False, out=Block(offset=spare, words=drain.count, rows=1))


def _core_gradient_list(bits: int, seed: int, shape, batch: int, order: str = "jl", core: int = 0, **buffers):
    """PE1's core-gradient calls of a layer step's lists (codesign.step.tt.step_lists) on a PE1 that takes B in
    ``order``, over an arena of random words: B is the saved state, its rows contiguous along l, so with ``"jl"``
    a call reads its B tile in runs of whole l tiles (one run where the tile covers a n), chains of accumulating
    calls included; ``core``: whose gradient. Returns the PE1 spec and the list."""
    from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
    from codesign.step.tt.step_lists import Fracs, step_lists

    rng = np.random.default_rng(seed)
    sixteen = dict(a_bits=16, b_bits=16, stream_bits=bits)
    spec1 = Tt1Spec(lanes=4, rows=3, b_order=order, **{**dict(max_j=5, max_k=8, max_l=7), **buffers, **sixteen})
    spec2 = Tt2Spec(lanes=4, rows=3, max_j=8, max_k=12, max_l=6, **sixteen)
    cores = [rng.integers(-8, 8, size=core) for core in shape]
    d = len(cores)
    fracs = Fracs(act=(5,) * d, grad=(9,) * d, core_grad=(6,) * d, core=(2,) * d, act_bits=8, grad_bits=16,
                  core_bits=4)
    x = rng.integers(-128, 128, size=(batch, int(np.prod([c.shape[2] for c in cores]))))
    gy = rng.integers(-2**15, 2**15, size=(batch, int(np.prod([c.shape[1] for c in cores]))))
    lists = step_lists(x, cores, gy, fracs, spec1=spec1, spec2=spec2)
    calls = lists.contractions[f"core gradient {core}"][1]
    arena = rng.integers(0, 1 << 32, size=lists.arena.size, dtype=np.uint64).astype(np.uint32)
    return spec1, ListCase(calls=calls, arena=arena, expected=run_list_golden(PES["tt1"][0], spec1, arena, calls))


RANK1 = [(1, 2, 4, 1), (1, 5, 4, 1)]  # in (4, 4), out (2, 5), rank 1: a B tile of all a n = 4 rows is one run
SQUARE = [(1, 4, 4, 3), (3, 4, 4, 1)]  # in (4, 4), out (4, 4), rank 3: J runs of L = 4 of a n = 4 rows
DIGITS = [(1, 4, 2, 4), (4, 4, 4, 4), (4, 4, 4, 4), (4, 4, 2, 1)]  # digits' first layer at rank 4
B_ORDER_CASES = {  # name -> (bits, builder); normal tier
    "jl-rank1-32": lambda: _core_gradient_list(32, 81, RANK1, 17),
    "jl-square-128": lambda: _core_gradient_list(128, 82, SQUARE, 16),
    "lj-square-128": lambda: _core_gradient_list(128, 82, SQUARE, 16, order="lj"),
    # K = 2 on 4 lanes: rows j summed in pairs (J 16, L 8)
    "jl-digits-128-pairs": lambda: _core_gradient_list(128, 85, DIGITS, 5, core=2, max_j=16, max_l=8, j_pairs=True),
    "lj-digits-32-pairs": lambda: _core_gradient_list(32, 86, DIGITS, 5, order="lj", core=2, max_j=16, max_l=8,
                                                      j_pairs=True),
}
SLOW_B_ORDER_CASES = {
    "jl-digits-128": lambda: _core_gradient_list(128, 83, DIGITS, 5, core=2, max_j=16, max_l=8),  # J 80, L 16
    "jl-digits-64-cut-k": lambda: _core_gradient_list(64, 84, DIGITS, 5, max_k=8),  # K 32 cut: rows not merged
}
B_ORDER_DDR = [("jl-square-128", DdrTiming()), ("jl-rank1-32", DdrTiming(read_latency=30, write_latency=20,
                                                                         read_beats=3, read_window=4))]


@pytest.mark.parametrize("name, ddr", [pytest.param(n, None, id=n) for n in B_ORDER_CASES]
                         + [pytest.param(n, d, id=f"{n}-{_ddr_id(d)}") for n, d in B_ORDER_DDR]
                         + [pytest.param(n, None, id=n, marks=pytest.mark.slow) for n in SLOW_B_ORDER_CASES]
                         + [pytest.param(n, DdrTiming(), id=f"{n}-{_ddr_id(DdrTiming())}", marks=pytest.mark.slow)
                            for n in SLOW_B_ORDER_CASES])
def test_b_order_model_equals_rtl_busy_cycles(tmp_path, name, ddr):
    """PE1 built to take B j outer (``b_order="jl"``, and the same calls on an ``"lj"`` build): a step's
    core-gradient list, whose B blocks become fewer, longer runs, runs on the RTL shell with the golden arena
    and the model's cycles, exactly; with ``"jl"`` it reads B in fewer runs than the ``"lj"`` build would."""
    spec, case = {**B_ORDER_CASES, **SLOW_B_ORDER_CASES}[name]()
    pe = PES["tt1"][0]
    model = list_cycles(pe, spec, case.calls, case.arena, ddr=ddr)
    result = run_list_rtl(pe, spec, case, tmp_path, pause=0.0, **({"ddr": ddr} if ddr else {}))
    runs = sum(call.segments[0].rows * call.segments[0].planes for call in case.calls)
    pairs = sum(((call.header >> 8) & 255) * (call.header >> 24) for call in case.calls)  # J L rows of B
    print(f"\n[list cycles, b_order {spec.b_order}] {name} {_ddr_id(ddr) if ddr else 'AxiRam'}: {len(case.calls)} "
          f"calls, B in {runs} runs of {pairs} rows, model {model.total}, RTL busy {result.busy_cycles} (error "
          f"{model.total - result.busy_cycles}); {model.breakdown()}")
    assert result.passed, result.first_mismatches
    assert model.total == result.busy_cycles
    assert runs < pairs if spec.b_order == "jl" and "cut-k" not in name else runs <= pairs


@pytest.mark.parametrize("name", ["tt1", "tt2"])
def test_fast_pricing_refuses_the_pes_that_load_beside_their_mac_loop(name):
    """fast_step_cycles adds compute cycles alone, which holds only for PEs whose streams rest while they compute."""
    with pytest.raises(ValueError, match="beside its MAC loop"):
        fast_step_cycles(name, _wide_spec(name, 32), {}, np.zeros(4, np.uint32))


@pytest.mark.parametrize("slow", [False, True], ids=["board-ddr", "150-cycle-reads"])
def test_fast_pricing_simulates_the_builds_whose_compute_does_not_hide_the_next_descriptor(monkeypatch, slow):
    """The shell fetches the next call's descriptor beside a call's last compute, and the call ends when both are
    done. Under the board's DDR model the FB-float step's descriptors come in before the calls' results are
    written, so other arrays are re-priced from one simulated shape by their compute alone; with 150-cycle reads
    they come in after, a call's cycles are not its compute's plus a constant, and fast_step_cycles simulates each
    build itself: equal to step_cycles either way, where re-pricing by compute alone would not be."""
    from codesign.pe.fpmac_array.spec import FpmacArraySpec
    from codesign.step.fpmac_array.lists import step_arena, step_lists

    ddr = DdrTiming(read_latency=150) if slow else list_cycles_module.BOARD_DDR
    builds = [FpmacArraySpec(exp_bits=5, max_fb=7, rows=rows, cols=cols, max_m=6, max_n=6, max_k=6)
              for rows, cols in ((5, 5), (1, 1), (2, 3))]
    arena = step_arena(builds[0], (9, 6, 4), 5)
    lists = step_lists(arena, 5, 7, 0)
    named = {"forward": lists.forward, "backward": lists.backward}
    exact = [list_cycles_module.step_cycles("fpmac_array", build, named, arena.image, ddr=ddr) for build in builds]
    simulated = []
    monkeypatch.setattr(list_cycles_module, "step_cycles", lambda *args, **kwargs: simulated.append(args[1]) or
                        exact[builds.index(args[1])])
    monkeypatch.setattr(list_cycles_module, "_PRICED", {})
    computes = [sum(list_cycles_module.wait_cycles("fpmac_array", build, calls, arena.image)
                    for calls in named.values()) for build in builds]
    for build, want, compute in zip(builds, exact, computes):
        assert fast_step_cycles("fpmac_array", build, named, arena.image, ddr=ddr) == want
        by_compute = exact[0]["total"] + compute - computes[0]
        assert (by_compute == want["total"]) is not (slow and build != builds[0]), (build, by_compute)
    assert simulated == (builds if slow else builds[:1])
