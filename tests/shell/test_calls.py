"""Call lists: the descriptor contract, the golden list model, and the shell at C-sim and RTL equal to it over the
whole arena (guards included at RTL), with fixed-latency and randomly paused memories, and a refused call."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.contracts.calls import (DESCRIPTOR_WORDS, RECORD_DONE, RECORD_WORDS, Block, Call, CallListError,
                                      check_list, decode_descriptor, decode_record, encode_list)
from codesign.numerics.round_stage import RoundStageConfig
from codesign.pe import get_pe
from codesign.pe.tt.contract import header_word
from codesign.shell.calls import ListCase, run_list_golden, tt_chain
from codesign.shell.ip import held_by_default, render_accel_project
from codesign.shell.list_sim import run_list_csim, run_list_rtl

PE = get_pe("tt1")
SPEC = PE.spec_class()
ROUND = RoundStageConfig(enable=True, shift=-3, bits=8, lanes=4, group_words=1, row_values=4)


def test_a_descriptor_decodes_to_the_call_it_encodes():
    call = Call(header=0x0403_0201, segments=(Block(offset=64, words=4, rows=2, stride=32), Block(offset=256,
                words=3, rows=1)), out=Block(offset=512, words=2, rows=2, stride=16), count=16, record=1024,
                rounding=ROUND)
    words = call.descriptor()
    assert words.size == DESCRIPTOR_WORDS and decode_descriptor(words) == call
    raw = dataclasses.replace(call, out=Block(offset=512, words=16, rows=1), rounding=Call.__dataclass_fields__[
        "rounding"].default, header=None)
    assert decode_descriptor(raw.descriptor()) == raw
    for word, bit in ((30, 0), (31, 31), (15, 7), (15, 13), (15, 21), (16, 16)):  # reserved words, bits between fields
        bad = words.copy()
        bad[word] |= np.uint32(1 << bit)
        with pytest.raises(CallListError, match="reserved"):
            decode_descriptor(bad)


@pytest.mark.parametrize("make, match", [
    (lambda: Block(offset=2, words=1, rows=1), "multiples of 4"),
    (lambda: Block(offset=0, words=4, rows=2, stride=8), "overlap"),
    (lambda: Call(header=1, segments=(), out=Block(offset=0, words=3, rows=1), count=16, record=64,
                  rounding=ROUND), "out block holds 3"),
    (lambda: Call(header=1, segments=(), out=Block(offset=0, words=3, rows=1), count=6, record=64,
                  rounding=ROUND), "whole number of rows"),
    (lambda: Call(header=1, segments=(Block(),) * 4, out=Block(), count=0, record=0), "at most 3"),
    (lambda: encode_list([]), "1..65535"),
    # results written over the call's own operands, or its record over either (the shell reads and writes at once)
    (lambda: Call(header=1, segments=(Block(offset=0, words=8, rows=2, stride=64),), out=Block(offset=64,
                  words=4, rows=1), count=4, record=256), "segment 0 overlaps"),
    (lambda: Call(header=1, segments=(Block(offset=0, words=8, rows=1),), out=Block(offset=64, words=4, rows=1),
                  count=4, record=68), "record overlaps"),
    (lambda: Call(header=1, segments=(), out=Block(), count=0, record=1 << 32), "out of range"),
])
def test_bad_calls_are_refused_with_the_field(make, match):
    with pytest.raises(CallListError, match=match):
        make()


def test_a_block_past_the_arena_is_refused():
    call = Call(header=1, segments=(Block(offset=0, words=4, rows=2, stride=64),), out=Block(), count=0, record=16)
    check_list([call], 64 + 4 * 4)
    with pytest.raises(CallListError, match="past the 79-byte arena"):
        check_list([call], 79)


def _with_refused(case: ListCase) -> ListCase:
    """The chain with a refused call (J above max_j) between its two calls: the list ends after its record."""
    first, second = case.calls
    refused = Call(header=header_word(1, SPEC.max_j + 1, 1, 1), segments=(), out=Block(), count=0,
                   record=second.record)
    calls = (first, refused, second)
    return ListCase(calls=calls, arena=case.arena, expected=run_list_golden(PE, SPEC, case.arena, calls))


def test_the_golden_list_reads_in_place_and_stops_at_a_refused_call():
    case = tt_chain(PE, SPEC, np.random.default_rng(1))
    first, second = (decode_record(case.expected[c.record // 4:c.record // 4 + RECORD_WORDS]) for c in case.calls)
    assert first["status"] == second["status"] == 0 and first["done"] == second["done"] == RECORD_DONE
    assert second["words_in"] == 1 + case.calls[1].segments[0].total_words + case.calls[0].out.total_words
    stopped = _with_refused(case)
    record = decode_record(stopped.expected[case.calls[1].record // 4:][:RECORD_WORDS])
    assert record["status"] == 2 and record["words_in"] == 1 and record["sum_abs"] == 0
    z2 = case.calls[1].out
    assert np.array_equal(stopped.expected[z2.offset // 4:z2.offset // 4 + 4], case.arena[z2.offset // 4:][:4])


CASES = {  # name -> (seed, shift, refused)
    "chain": (1, -4, False),
    "saturating": (2, 2, False),
    "right-shift-far": (3, -12, False),
    "refused": (4, -4, True),
}


def _case(name: str) -> ListCase:
    seed, shift, refused = CASES[name]
    case = tt_chain(PE, SPEC, np.random.default_rng(seed), shift=shift, i=2 + seed, k=3 + 3 * seed)
    return _with_refused(case) if refused else case


def test_the_saturating_case_saturates():
    records = [decode_record(_case("saturating").expected[c.record // 4:][:RECORD_WORDS])
               for c in _case("saturating").calls]
    assert records[0]["saturated"] > 0


@pytest.mark.parametrize("name", [name if name == "saturating" else pytest.param(name, marks=pytest.mark.slow)
                                  for name in CASES])  # 5 to 8 s each
def test_csim_list_equals_golden(tmp_path, name):
    project = tmp_path / "hls"
    render_accel_project(PE, SPEC, "tt1_0", None, project)
    result = run_list_csim(project, _case(name), build_dir=tmp_path / "build")
    print(f"\n[list csim] {name}: {result.words} arena words, {result.mismatches} mismatches")
    assert result.passed, result.first_mismatches


@pytest.mark.parametrize("name, pause", [("chain", 0.0), ("saturating", 0.3),
                                         pytest.param("right-shift-far", 0.0, marks=pytest.mark.slow),
                                         ("refused", 0.2)])
def test_rtl_list_equals_golden(tmp_path, name, pause):
    case = _case(name)
    result = run_list_rtl(PE, SPEC, case, tmp_path, pause=pause)
    print(f"\n[list rtl] {name} pause {pause}: {result.words} words, {result.mismatches} mismatches, "
          f"{result.cycles} cycles, {result.register_writes} register writes")
    assert result.passed, result.first_mismatches
    assert result.register_writes <= 8


def test_rtl_list_catches_a_wrong_golden_word(tmp_path):
    case = _case("chain")
    expected = case.expected.copy()
    expected[case.calls[0].out.offset // 4] ^= 1
    result = run_list_rtl(PE, SPEC, ListCase(calls=case.calls, arena=case.arena, expected=expected), tmp_path)
    assert result.mismatches == 1


@pytest.mark.slow  # 8 to 10 s each; make test runs 128-bit lists at C-sim and RTL in the chain-list tests
@pytest.mark.parametrize("bits", [64, 128])
def test_wide_stream_lists_equal_golden_at_csim_and_rtl(tmp_path, bits):
    """At 64 and 128 bits: the header one stream word, blocks of whole beats, the results unpacked to the stage
    one a cycle and its words packed back into beats; with fixed-latency and paused memories."""
    spec = dataclasses.replace(SPEC, stream_bits=bits)
    case = tt_chain(PE, spec, np.random.default_rng(bits), i=4, l2=4, shift=-5)
    render_accel_project(PE, spec, "tt1_0", None, tmp_path / "hls")
    results = [run_list_csim(tmp_path / "hls", case, build_dir=tmp_path / "build", stream_bits=bits)]
    results += [run_list_rtl(PE, spec, case, tmp_path / "rtl", pause=pause) for pause in (0.0, 0.3)]
    for result in results:
        print(f"\n[list {result.level}] {bits}-bit: {result.words} words, {result.mismatches} mismatches, "
              f"{result.cycles} cycles")
        assert result.passed, result.first_mismatches


def test_wide_stream_blocks_must_be_whole_beats():
    call = Call(header=1, segments=(Block(offset=16, words=2, rows=1),), out=Block(), count=0, record=64)
    check_list([call], 4096, 64)
    with pytest.raises(CallListError, match="whole 16-byte beats"):
        check_list([call], 4096, 128)
    with pytest.raises(CallListError, match="not 256"):
        check_list([call], 4096, 256)


def test_rows_back_to_back_are_one_run():
    assert Block(offset=0, words=4, rows=3, stride=16) == Block(offset=0, words=12, rows=1, stride=16)


EVERY_PE = ("csb", "fpmac_array", "tt1", "tt2", "tt3")


def _pe_case(name: str) -> ListCase:
    from codesign.shell.calls import stimulus_list, tt_transactions

    pe, rng = get_pe(name), np.random.default_rng(EVERY_PE.index(name))
    spec = pe.spec_class()
    transactions = tt_transactions(pe, spec, rng, 8) if name == "tt1" else pe.build_stimulus(spec,
                                                                                            pe.stimulus_options())
    return stimulus_list(pe, spec, transactions, rng, min_values=10_000)


def _rounded_values(case: ListCase) -> int:
    return sum(call.count for call in case.calls if call.rounding.enable)


@pytest.mark.slow  # 5 to 24 s each; make test runs PE1 lists at C-sim in the chain-list test below
@pytest.mark.parametrize("name", EVERY_PE)
def test_every_pe_list_equals_golden_at_csim(tmp_path, name):
    """Behind every PE, >= 10^4 results through the rounding stage in >= 5 configurations (one random per call)
    and raw calls between them: the HLS shell's arena equals the golden arena."""
    pe, case = get_pe(name), _pe_case(name)
    assert _rounded_values(case) >= 10_000 and len({call.rounding for call in case.calls}) >= 6
    render_accel_project(pe, pe.spec_class(), f"{name}_0", None, tmp_path / "hls")
    result = run_list_csim(tmp_path / "hls", case, build_dir=tmp_path / "build")
    print(f"\n[list csim] {name}: {len(case.calls)} calls, {_rounded_values(case)} rounded values, "
          f"{result.words} arena words, {result.mismatches} mismatches")
    assert result.passed, result.first_mismatches


@pytest.mark.slow  # 10 to 30 s a PE; make test runs PE1 lists at RTL in the chain-list test below (3-D blocks too)
@pytest.mark.parametrize("name", EVERY_PE)
def test_every_pe_list_equals_golden_at_rtl(tmp_path, name):
    """The same lists on the RTL shell around each PE's RTL (the shell the design flow builds for that PE: without
    the accumulation buffer for csb and fpmac_array), one start and one done for the whole list."""
    pe, case = get_pe(name), _pe_case(name)
    result = run_list_rtl(pe, pe.spec_class(), case, tmp_path, pause=0.1, held_sums=held_by_default(pe))
    print(f"\n[list rtl] {name}: {len(case.calls)} calls, {_rounded_values(case)} rounded values, "
          f"{result.words} arena words, {result.mismatches} mismatches, {result.cycles} cycles, "
          f"{result.register_writes} register writes")
    assert result.passed, result.first_mismatches
    assert result.register_writes == 8


@pytest.mark.slow  # about a minute: C-sim and RTL at two widths
@pytest.mark.parametrize("bits", [64, 128])
def test_a_wide_csb_list_equals_golden_at_csim_and_rtl(tmp_path, bits):
    """The CSB PE on a 64- or 128-bit stream behind its shell (its data movers as wide): the 32-bit twin's
    accepted transactions as beats, padding garbled in about half (docs/csb.md, "Wide streams"), one call each,
    results rounded in whole beats or raw; the HLS shell's and the RTL shell's arenas equal the golden arena."""
    from codesign.pe.csb.spec import CsbSpec
    from codesign.pe.csb.stimulus import build_transactions
    from codesign.pe.csb.stimulus_wide import wide_transactions
    from codesign.shell.calls import stimulus_list
    from codesign.step.list_cycles import list_cycles

    pe, rng = get_pe("csb"), np.random.default_rng(bits)
    spec = CsbSpec(block_rows=4, block_cols=6, kernel=3, out_h=2, out_w=2, batch=4, parallel=2, max_stride=2,
                   stream_bits=bits)
    narrow = build_transactions(dataclasses.replace(spec, stream_bits=32), count=10, seed=bits)
    wide = wide_transactions(spec, narrow, seed=bits)  # its refused and holding ones make no call
    case = stimulus_list(pe, spec, wide, rng, min_values=4_000)
    assert _rounded_values(case) >= 4_000 and any(not call.rounding.enable for call in case.calls)
    render_accel_project(pe, spec, "csb_0", None, tmp_path / "hls")
    csim = run_list_csim(tmp_path / "hls", case, build_dir=tmp_path / "build", stream_bits=bits)
    rtl = run_list_rtl(pe, spec, case, tmp_path / "paused", pause=0.1, held_sums=held_by_default(pe))
    quiet = run_list_rtl(pe, spec, case, tmp_path / "quiet", pause=0.0, held_sums=held_by_default(pe))
    model = list_cycles(pe, spec, case.calls, case.arena)
    print(f"\n[list, {bits}-bit csb] {len(case.calls)} calls, {_rounded_values(case)} rounded values, {rtl.words} "
          f"arena words; C-sim {csim.mismatches} and RTL {rtl.mismatches} mismatches; busy {quiet.busy_cycles} "
          f"cycles, model {model.total}")
    assert csim.passed, csim.first_mismatches
    assert rtl.passed and quiet.passed, rtl.first_mismatches + quiet.first_mismatches
    assert model.total == quiet.busy_cycles  # the list cycle model counts beats as the RTL moves them


def _chain_case(rng, *, rounding: RoundStageConfig | None, parts: int = 3, i: int = 3, j: int = 2, k: int = 5,
                l: int = 4):
    """PE1's ``Z = sum_j A B`` cut along J into ``parts`` accumulating calls (hold, add-and-hold, ..., add), the
    operands' planes read from strided 3-D blocks; returns the case, Z (exact, by einsum) and the out block."""
    from codesign.contracts.calls import ArenaLayout
    from codesign.pe.tt.contract import code_range, pack_rows, row_words

    a = rng.integers(*code_range(SPEC.a_bits), size=(i, parts * j, k), endpoint=True)
    b = rng.integers(*code_range(SPEC.b_bits), size=(l, parts * j, k), endpoint=True)
    z = np.einsum("ijk,ljk->il", a, b)
    arena = ArenaLayout()
    a_at, b_at = (arena.put(pack_rows(m, SPEC.lanes, bits)) for m, bits in ((a, SPEC.a_bits), (b, SPEC.b_bits)))
    a_row, b_row = row_words(k, SPEC.lanes, SPEC.a_bits), row_words(k, SPEC.lanes, SPEC.b_bits)
    words = rounding.words_out(i * l) if rounding else 2 * i * l
    out = Block(offset=arena.reserve(words), words=words, rows=1)
    records = arena.reserve(parts * RECORD_WORDS)
    calls = []
    for part in range(parts):  # rows j of every i (l): planes i (l) of j rows, each a strided 3-D block
        last = part == parts - 1
        segments = (Block(offset=b_at + 4 * part * j * b_row, words=b_row, rows=j, stride=4 * b_row, planes=l,
                          plane_stride=4 * parts * j * b_row),
                    Block(offset=a_at + 4 * part * j * a_row, words=a_row, rows=j, stride=4 * a_row, planes=i,
                          plane_stride=4 * parts * j * a_row))
        calls.append(Call(header=header_word(i, j, k, l), segments=segments, out=out if last else Block(),
                          count=i * l, record=records + 4 * part * RECORD_WORDS,
                          rounding=rounding if last and rounding else Call.__dataclass_fields__["rounding"].default,
                          acc_add=part > 0, acc_hold=not last))
    image = arena.image()
    return ListCase(calls=tuple(calls), arena=image, expected=run_list_golden(PE, SPEC, image, calls)), z, out


def test_an_accumulating_chain_sums_a_contraction_across_calls_exactly():
    from codesign.numerics.round_stage import pack_codes, round_codes

    rng = np.random.default_rng(5)
    case, z, out = _chain_case(rng, rounding=None, parts=4)
    drained = case.expected[out.offset // 4:out.offset // 4 + out.words].view(np.int64)
    assert drained.tolist() == z.reshape(-1).tolist()
    records = [decode_record(case.expected[c.record // 4:][:RECORD_WORDS]) for c in case.calls]
    assert [r["words_out"] for r in records] == [0, 0, 0, 2 * z.size] and all(r["done"] == RECORD_DONE for r in records)
    assert records[-1]["sum_abs"] == int(np.abs(z).sum()) and records[0]["sum_abs"] == 0
    rounding = RoundStageConfig(enable=True, shift=-9, bits=8, lanes=4, group_words=1, row_values=4)
    case, z, out = _chain_case(rng, rounding=rounding, parts=3)
    assert np.abs(z).max() < 1 << 31  # within round_codes' 32-bit accumulators, which this oracle calls
    expected = pack_codes(round_codes(z.reshape(-1), -9, 8), rounding)
    assert np.array_equal(case.expected[out.offset // 4:out.offset // 4 + out.words], expected)



def _list_features(case: ListCase) -> dict:
    """What a chain list exercises, counted from its calls (not from any level's output)."""
    blocks = [block for call in case.calls for block in call.segments]
    outs = [call.out for call in case.calls]
    chain = [call.acc_add or call.acc_hold for call in case.calls]
    return {"values": sum(call.count for call in case.calls),
            "configs": len({call.rounding for call in case.calls if call.rounding.enable}),
            "raw drains": sum(c.acc_add and not c.acc_hold and not c.rounding.enable for c in case.calls),
            "rounded drains": sum(c.acc_add and not c.acc_hold and c.rounding.enable for c in case.calls),
            "interleaved": sum(b.planes > 1 and b.plane_stride < b.stride for b in blocks + outs),
            "stacked 3-D": sum(b.planes > 1 and b.plane_stride >= b.rows * b.stride for b in blocks + outs),
            "3-D outs": sum(b.planes > 1 for b in outs),
            "plain inside a chain": sum(not chain[c] and case.calls[c - 1].acc_hold for c in range(1, len(chain)))}


@pytest.mark.parametrize("bits, three", [pytest.param(32, False, marks=pytest.mark.slow),
                                         pytest.param(64, False, marks=pytest.mark.slow), (128, False),
                                         (64, True), pytest.param(32, True, marks=pytest.mark.slow)])  # 5 to 6 s each
def test_csim_chain_list_equals_golden(tmp_path, bits, three):
    """Random PE1 lists of plain calls and accumulating chains, every block 3-D (planes stacked or interleaved),
    drains raw and rounded, plain calls inside chains: >= 10^4 results in >= 5 rounding configurations, the C++
    shell's arena equal to the golden arena at every stream width; ``three``: every call in three segments."""
    from codesign.shell.calls import chain_list

    spec = dataclasses.replace(SPEC, stream_bits=bits)
    case = chain_list(PE, spec, np.random.default_rng(100 + bits + 7 * three), three=three)
    assert all(len(call.segments) == 2 + three for call in case.calls)
    features = _list_features(case)
    assert features["values"] >= 10_000 and features["configs"] >= 5, features
    assert all(features[name] > 0 for name in features), features
    render_accel_project(PE, spec, "tt1_0", None, tmp_path / "hls")
    result = run_list_csim(tmp_path / "hls", case, build_dir=tmp_path / "build", stream_bits=bits)
    print(f"\n[chain list csim] {bits}-bit, {2 + three} segments: {len(case.calls)} calls, {features}, "
          f"{result.words} arena words, "
          f"{result.mismatches} mismatches")
    assert result.passed, result.first_mismatches


BIG_CHAINS = ((4097, None), (4097, -21), (4099, -21), (5, -14))  # (calls, drain shift; None: raw)


def _big_chains(big_chains: tuple = BIG_CHAINS, spec=SPEC) -> tuple:
    """Chains of one PE1 transaction of extreme codes repeated (A rows all the spec's most negative or most positive
    code, B rows likewise; J = 16, K = 64: Z = 1024 * a * b, up to 2^20 at 8-bit A and 4-bit B, 2^28 at 16-bit A),
    so that n calls sum beyond 32 bits; drained raw, or rounded to 16 bits at a shift that makes some Z times n
    an exact tie (n odd). A plain call of the same transaction sits inside the first chain. Returns the
    case, Z and the calls of each chain."""
    from codesign.contracts.calls import ArenaLayout
    from codesign.pe.tt.contract import pack_rows

    j, k = spec.max_j, spec.max_k
    a, b = (np.stack([np.full((j, k), -(1 << (bits - 1))), np.full((j, k), (1 << (bits - 1)) - 1)])
            for bits in (spec.a_bits, spec.b_bits))
    z = j * k * np.outer(a[:, 0, 0], b[:, 0, 0])
    arena = ArenaLayout()
    b_words, a_words = (pack_rows(m, spec.lanes, bits, stream_bits=spec.stream_bits)
                        for m, bits in ((b, spec.b_bits), (a, spec.a_bits)))
    segments = (Block(offset=arena.put(b_words), words=b_words.size, rows=1),
                Block(offset=arena.put(a_words), words=a_words.size, rows=1))
    hold_record, calls, chains = arena.reserve(RECORD_WORDS), [], []
    for n, shift in big_chains:
        rounding = (RoundStageConfig(enable=True, shift=shift, bits=16, lanes=1, group_words=1, row_values=1)
                    if shift is not None else Call.__dataclass_fields__["rounding"].default)
        words = z.size if shift is not None else 2 * z.size
        drain = Call(header=header_word(2, j, k, 2), segments=segments, out=Block(offset=arena.reserve(words),
                     words=words, rows=1), count=z.size, record=arena.reserve(RECORD_WORDS), rounding=rounding,
                     acc_add=True)
        hold = dataclasses.replace(drain, out=Block(), record=hold_record, rounding=Call.__dataclass_fields__[
            "rounding"].default, acc_add=False, acc_hold=True)
        chain = [hold] + [dataclasses.replace(hold, acc_add=True)] * (n - 2) + [drain]
        if not chains:
            plain = dataclasses.replace(drain, out=Block(offset=arena.reserve(z.size), words=z.size, rows=1),
                                        record=arena.reserve(RECORD_WORDS), rounding=hold.rounding, acc_add=False)
            chain.insert(n // 2, plain)
        chains.append(chain)
        calls += chain
    image = arena.image()
    return ListCase(calls=tuple(calls), arena=image, expected=run_list_golden(PE, spec, image, calls)), z, chains


def _half_even(value: int, shift: int) -> int:
    """round_half_to_even(value * 2^shift) for shift < 0, in Python integers (Fraction's round is half-even)."""
    from fractions import Fraction

    return round(Fraction(value, 1 << -shift))


def _assert_drains(case: ListCase, z: np.ndarray, chains: list, big_chains: tuple) -> list[float]:
    """Each chain's drained words against Python integers: n * Z as 64-bit words (raw), or n * Z rounded half to
    even at the drain's shift and saturated to 16 bits; the drain's record. Returns the rounded sums' exact values
    before rounding (to show the ties among them)."""
    expected, exact = case.expected, []
    for (n, shift), chain in zip(big_chains, chains):
        sums = [n * int(v) for v in z.reshape(-1)]
        drain = chain[-1]
        got = expected[drain.out.offset // 4:drain.out.offset // 4 + drain.out.words]
        if shift is None:
            assert got.view(np.int64).tolist() == sums and max(map(abs, sums)) > 1 << 32
        else:
            codes = [min(max(_half_even(s, shift), -(1 << 15)), (1 << 15) - 1) for s in sums]
            assert got.tolist() == [c & 0xFFFF for c in codes], (n, shift)
            exact += [s / 2.0 ** -shift for s in sums]
        record = decode_record(expected[drain.record // 4:][:RECORD_WORDS])
        assert record["sum_abs"] == sum(map(abs, sums)) and record["words_out"] == drain.out.words
        assert record["reserved"] == 0
    return exact


@pytest.mark.slow  # 25 s of C-sim
def test_csim_chains_sum_beyond_32_bits_and_round_ties_to_even(tmp_path):
    """Sums past 2^32 drained raw as 64-bit words and rounded, exact ties of
    held sums both ways and negative, a HOLD call's record (statistics and words out 0), a plain call inside a
    chain: expectations from Python integers, then the C++ shell's whole arena equal to the golden arena."""
    case, z, chains = _big_chains()
    expected = case.expected
    record_of = lambda call: decode_record(expected[call.record // 4:][:RECORD_WORDS])  # noqa: E731
    ties = _assert_drains(case, z, chains, BIG_CHAINS)
    assert {2048.5, 2049.5, -317.5} <= set(ties)  # both directions of a tie, and a negative one
    plain = chains[0][len(chains[0]) // 2 - 1]
    assert not plain.acc_hold and not plain.acc_add
    assert expected[plain.out.offset // 4:][:z.size].view(np.int32).tolist() == z.reshape(-1).tolist()
    hold = record_of(chains[-1][0])
    words_in = 1 + sum(block.total_words for block in chains[-1][0].segments)
    assert hold == {"status": 0, "saturated": 0, "sum_abs": 0, "reserved": 0, "words_in": words_in,
                    "words_out": 0, "done": RECORD_DONE}
    render_accel_project(PE, SPEC, "tt1_0", None, tmp_path / "hls")
    result = run_list_csim(tmp_path / "hls", case, build_dir=tmp_path / "build")
    print(f"\n[big chains csim] {len(case.calls)} calls, {result.words} arena words, {result.mismatches} mismatches")
    assert result.passed, result.first_mismatches


@pytest.mark.slow  # 7 to 12 s each; make test runs 3-D blocks in the chain lists at C-sim and RTL
@pytest.mark.parametrize("bits, pause, values", [(32, 0.3, 3000), (128, 0.0, 3000), (32, 0.0, 3000), (64, 0.3, 3000),
                                                 (32, 0.2, 10_000), (128, 0.3, 10_000)])
def test_rtl_3d_block_list_equals_golden(tmp_path, bits, pause, values):
    """PE1 lists of plain calls whose operand and out blocks are 3-D (planes stacked, or interleaved: a tensor read
    transposed), raw and rounded, on the RTL shell with fixed-latency and randomly paused memories: the whole
    arena (guards included) equal to the golden arena."""
    from codesign.shell.calls import chain_list

    spec = dataclasses.replace(SPEC, stream_bits=bits)
    case = chain_list(PE, spec, np.random.default_rng(200 + bits), min_values=values, chains=False)
    features = _list_features(case)
    assert features["values"] >= values and features["configs"] >= 5, features
    assert features["interleaved"] and features["stacked 3-D"] and features["3-D outs"], features
    result = run_list_rtl(PE, spec, case, tmp_path, pause=pause)
    print(f"\n[3-D list rtl] {bits}-bit pause {pause}: {len(case.calls)} calls, {features['values']} results, "
          f"{result.words} words, {result.mismatches} mismatches, {result.cycles} cycles")
    assert result.passed, result.first_mismatches


@pytest.mark.parametrize("bits, pause, values, three", [(128, 0.3, 3000, False), (32, 0.3, 3000, True),
                                                        pytest.param(64, 0.3, 3000, False, marks=pytest.mark.slow),
                                                        pytest.param(128, 0.0, 3000, False, marks=pytest.mark.slow),
                                                        pytest.param(32, 0.0, 3000, False, marks=pytest.mark.slow),
                                                        pytest.param(32, 0.3, 3000, False, marks=pytest.mark.slow),
                                                        pytest.param(64, 0.2, 10_000, False, marks=pytest.mark.slow),
                                                        pytest.param(128, 0.2, 3000, True, marks=pytest.mark.slow)])
def test_rtl_chain_list_equals_golden(tmp_path, bits, pause, values, three):
    """PE1 lists of plain calls and accumulating chains (3-D blocks, drains raw and rounded, plain calls inside
    chains; ``three``: three segments a call) on the RTL shell (the accumulation buffer in accel_seq.v, the 48-bit
    rounding stage) with fixed-latency and randomly paused memories: the whole arena (guards included) equal to
    the golden arena."""
    from codesign.shell.calls import chain_list

    spec = dataclasses.replace(SPEC, stream_bits=bits)
    case = chain_list(PE, spec, np.random.default_rng(300 + bits + int(10 * pause) + 7 * three), min_values=values,
                      three=three)
    features = _list_features(case)
    assert features["values"] >= values and features["raw drains"] and features["rounded drains"], features
    result = run_list_rtl(PE, spec, case, tmp_path, pause=pause)
    print(f"\n[chain list rtl] {bits}-bit pause {pause}, {2 + three} segments: {len(case.calls)} calls, {features}, "
          f"{result.words} words, "
          f"{result.mismatches} mismatches, {result.cycles} cycles")
    assert result.passed, result.first_mismatches


RTL_BIG_CHAINS = [  # (A bits, chains, a tie among the rounded sums), each drained raw past 2^32 and rounded
    pytest.param(16, ((33, None), (5, -29)), 2.5, marks=pytest.mark.slow, id="a16-33-calls"),  # Z up to 2^28
    pytest.param(8, (BIG_CHAINS[0], BIG_CHAINS[-1]), -317.5, marks=pytest.mark.long, id="a8-4097-calls"),
]


@pytest.mark.parametrize("a_bits, big_chains, tie", RTL_BIG_CHAINS)
def test_rtl_chains_sum_beyond_32_bits(tmp_path, a_bits, big_chains, tie):
    """A raw chain (a plain call inside it) whose sums pass 2^32 and a 5-call chain rounded at an exact tie, on
    the RTL shell at 128 bits, randomly paused: the drains equal Python integers, and the whole arena the golden
    arena. The slow tier's build has 16-bit A (Z up to 2^28: 33 calls pass 2^32; 5 * 2^28 / 2^29 = 2.5 rounds to
    2); make test-long runs the C-sim test's 4,097-call chain at 8-bit A too (about 13 minutes of Icarus)."""
    spec = dataclasses.replace(SPEC, stream_bits=128, a_bits=a_bits)
    case, z, chains = _big_chains(big_chains, spec)
    assert tie in _assert_drains(case, z, chains, big_chains)
    result = run_list_rtl(PE, spec, case, tmp_path, pause=0.1)
    print(f"\n[big chains rtl] {len(case.calls)} calls, {result.words} words, {result.mismatches} mismatches, "
          f"{result.cycles} cycles")
    assert result.passed, result.first_mismatches
