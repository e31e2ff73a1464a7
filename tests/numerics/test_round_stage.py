"""The rounding stage's golden model (codesign.numerics.round_stage) on its own: the configuration it refuses, the
codes against the host's rounding (codesign.step.tt.rounding.rescale) at every shift and width, hand-worked
packings and statistics, and the stall-free latency against the plain recurrence and its closed forms. The three
levels on one grid are in tests/rtl/test_accel_round.py."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.numerics.round_stage import (
    RoundStageConfig,
    latency_cycles,
    pack_codes,
    round_codes,
    round_stage,
    slot_of,
    stats_of,
)
from codesign.step.tt.rounding import rescale

INT32 = (-(1 << 31), (1 << 31) - 1)


def cfg(**fields) -> RoundStageConfig:
    base = {"enable": True, "shift": -3, "bits": 8, "lanes": 4, "group_words": 1, "row_values": 8}
    return RoundStageConfig(**{**base, **fields})


@pytest.mark.parametrize(("fields", "error"), [
    ({"shift": -65}, ValueError), ({"shift": 64}, ValueError), ({"bits": 1}, ValueError), ({"bits": 17}, ValueError),
    ({"lanes": 0}, ValueError), ({"lanes": 17}, ValueError), ({"group_words": 0}, ValueError),
    ({"group_words": 5}, ValueError), ({"row_values": 0}, ValueError), ({"row_values": 65536}, ValueError),
    ({"lanes": 5, "group_words": 1}, ValueError),  # 5 x 8 bits need 2 words
    ({"bits": 16, "lanes": 9, "group_words": 4}, ValueError),  # 144 bits
    ({"shift": 1.0}, TypeError), ({"bits": True}, TypeError), ({"enable": 1}, TypeError),
])
def test_config_refuses(fields, error):
    with pytest.raises(error):
        cfg(**fields)


def test_config_is_frozen_and_keyword_only():
    c = cfg()
    with pytest.raises(TypeError):
        RoundStageConfig(True, -3, 8, 4, 1, 8)
    with pytest.raises(AttributeError):
        c.shift = 0  # type: ignore[misc]
    assert [slot_of(b) for b in (2, 4, 5, 8, 9, 16)] == [4, 4, 8, 8, 16, 16]
    assert (c.slot, c.groups_per_row, cfg(bits=16, lanes=3, group_words=2, row_values=7).words_out(14)) == (8, 2, 12)


def test_counts_must_be_whole_rows_when_rounding():
    c = cfg(row_values=8)
    for call in (lambda: c.words_out(12), lambda: round_stage(np.zeros(12, np.uint32), c),
                 lambda: latency_cycles(c, 12), lambda: pack_codes(np.zeros(12, np.int64), c)):
        with pytest.raises(ValueError, match="whole number of rows"):
            call()
    passing = cfg(enable=False, row_values=8)
    assert passing.words_out(12) == 12 and round_stage(np.arange(12, dtype=np.uint32), passing)[0].size == 12


def _directed(shift: int, bits: int) -> list[int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    values = [0, 1, -1, INT32[0], INT32[1], INT32[0] + 1]
    if shift < 0:
        unit = 1 << -shift
        values += [(2 * k + 1) * unit // 2 + d for k in range(-20, 20) for d in (-1, 0, 1)]
        values += [e * unit // 2 + d for e in (2 * high + 1, 2 * high - 1, 2 * low - 1, 2 * low + 1) for d in (-1, 0, 1)]
    else:
        values += [(e >> min(shift, 40)) + d for e in (high + 1, low, high) for d in (-2, -1, 0, 1, 2)]
    return [v for v in values if INT32[0] <= v <= INT32[1]]


def test_codes_equal_the_host_rounding_at_every_shift_and_width():
    """round_codes == rescale, bit for bit: 128 shifts x 15 widths x (random + directed) accumulators."""
    rng = np.random.default_rng(38)
    checked = 0
    for shift in range(-64, 64):
        for bits in range(2, 17):
            low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            scale_lo = max(INT32[0], (low - 2) << -shift if shift < 0 else (low - 2) >> min(shift, 40))
            scale_hi = min(INT32[1], (high + 2) << -shift if shift < 0 else (high + 2) >> min(shift, 40))
            acc = np.concatenate([rng.integers(*INT32, 300, dtype=np.int64, endpoint=True),
                                  rng.integers(scale_lo, scale_hi, 300, dtype=np.int64, endpoint=True),
                                  np.array(_directed(shift, bits), dtype=np.int64)])
            got = round_codes(acc, shift, bits)
            want = rescale(acc, 20, 20 + shift, bits).astype(np.int64)
            assert np.array_equal(got, want), (shift, bits, acc[got != want][:5])
            checked += acc.size
    assert checked > 128 * 15 * 600


def test_ties_go_to_even_and_saturate_at_both_ends():
    assert round_codes([1, 3, 5, -1, -3, -5], -1, 8).tolist() == [0, 2, 2, 0, -2, -2]
    assert round_codes([INT32[0]], -32, 8).tolist() == [0]  # -1/2 ties to 0
    assert round_codes([INT32[0], INT32[1]], -31, 8).tolist() == [-1, 1]
    assert round_codes([255, 254, -257, -256], -1, 8).tolist() == [127, 127, -128, -128]  # 127.5 -> 128 clips
    assert round_codes([1, -1, 0, INT32[0]], 63, 4).tolist() == [7, -8, 0, -8]
    assert round_codes([3, 4, -4, -5], 1, 4).tolist() == [6, 7, -8, -8]


def test_packing_by_hand():
    c = cfg(bits=4, lanes=3, group_words=1, row_values=5)
    assert pack_codes([1, -1, 7, -8, 2], c).tolist() == [0x7F1, 0x28]
    wide = cfg(bits=16, lanes=3, group_words=2, row_values=3)
    assert pack_codes([-2, 0x1234, 5], wide).tolist() == [0x1234FFFE, 0x5]
    padded = cfg(bits=8, lanes=2, group_words=4, row_values=2)
    assert pack_codes([-128, 127], padded).tolist() == [0x7F80, 0, 0, 0]
    with pytest.raises(ValueError, match="range"):
        pack_codes([8, 0, 0, 0, 0], c)


def test_stats_and_pass_through():
    acc = np.array([INT32[0]] * 3 + [INT32[1], -5, 0], dtype=np.int64)
    words, stats = round_stage(acc.astype(np.uint32), cfg(enable=False, row_values=1))
    assert words.tolist() == acc.astype(np.uint32).tolist()
    assert stats == (3 * (1 << 31) + (1 << 31) - 1 + 5, 0)
    assert stats_of([]) == (0, 0)
    words, stats = round_stage(np.array([1020, 1019, -1028, -1029], dtype=np.int64).astype(np.uint32),
                               cfg(row_values=4))
    # / 8: 127.5 ties to 128 (clipped), 127.4 fits, -128.5 ties to -128 (fits), -128.6 rounds to -129 (clipped)
    assert words.tolist() == [0x80807F7F] and stats == (1020 + 1019 + 1028 + 1029, 2)


def _latency_by_recurrence(c: RoundStageConfig, count: int, parts: int = 1) -> int:
    """The recurrence of the RTL's header comment, group by group in plain ints (a group of n values is
    ceil(n / parts) chunks, its words leave in ceil(group_words / parts) cycles)."""
    last_chunk, taken, index, out = -(1 << 40), -(1 << 40), 0, -(-c.group_words // parts)
    for start in range(0, count, c.row_values):
        for g in range(0, c.row_values, c.lanes):
            n = -(-min(c.lanes, c.row_values - g) // parts)
            first = max(last_chunk + 1, index + 4, taken)
            last_chunk = first + n - 1
            taken = max(last_chunk + 1, taken + out)
            index += n
    return taken + out


@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_latency_equals_the_recurrence_and_its_closed_forms(parts):
    rng = np.random.default_rng(5 + parts)
    for _ in range(300):
        bits = int(rng.choice([2, 4, 8, 16]))
        lanes = int(rng.integers(1, min(16, 128 // slot_of(bits)) + 1))
        c = cfg(bits=bits, lanes=lanes, row_values=int(rng.integers(1, 50)),
                group_words=int(rng.integers(-(-lanes * slot_of(bits) // 32), 5)))
        count = c.row_values * int(rng.integers(1, 20))
        stated = latency_cycles(c, count, parts)
        assert stated == _latency_by_recurrence(c, count, parts), c
        chunks = [-(-min(c.lanes, c.row_values - g) // parts) for g in range(0, c.row_values, c.lanes)]
        out = -(-c.group_words // parts)
        if out <= min(chunks):
            assert stated == count // c.row_values * sum(chunks) + out + 4
        if out >= -(-c.lanes // parts):
            groups = count // c.row_values * c.groups_per_row
            assert stated == 4 + -(-min(c.lanes, c.row_values) // parts) + out * groups
    assert latency_cycles(cfg(enable=False), 7, parts) == -(-7 // parts) + 5 and latency_cycles(cfg(), 0, parts) == 0
    big = cfg(lanes=4, group_words=1, row_values=6)
    assert latency_cycles(big, 6 * 10**8) == 6 * 10**8 + 5  # any count, without a loop over it
    with pytest.raises(ValueError, match="1 to 4"):
        latency_cycles(big, 6, 5)


def test_held_sums_round_as_the_host_rounds_them_and_pass_through_as_64_bit_words():
    """round_held == rescale on 48-bit sums at every shift (random, ties, the range's ends), and raw 64-bit words."""
    from codesign.numerics.round_stage import HELD_RANGE, round_held

    rng = np.random.default_rng(39)
    for shift in range(-64, 64):
        unit = 1 << min(-shift, 60) if shift < 0 else 1
        values = np.concatenate([rng.integers(*HELD_RANGE, 200, dtype=np.int64, endpoint=True),
                                 np.array([HELD_RANGE[0], HELD_RANGE[1], 0, 1, -1]),
                                 np.clip([(2 * k + 1) * unit // 2 for k in range(-8, 8)], *HELD_RANGE)])
        values = values[: values.size // 4 * 4]
        c = cfg(shift=shift, bits=16, lanes=2, group_words=1, row_values=4)
        words, stats = round_held(values, c)
        want = rescale(values, 20, 20 + shift, 16).astype(np.int64)
        assert np.array_equal(words, pack_codes(want, c)), shift
        assert stats.sum_abs == int(np.abs(values).sum())
    raw, stats = round_held(np.array([-1, 1 << 40, HELD_RANGE[0]]), cfg(enable=False, row_values=1))
    assert raw.tolist() == [0xFFFFFFFF, 0xFFFFFFFF, 0, 1 << 8, 0, 0xFFFF8000]
    assert stats.sum_abs == 1 + (1 << 40) + (1 << 47)
    with pytest.raises(ValueError, match="48-bit"):
        round_held(np.array([HELD_RANGE[1] + 1]), cfg(enable=False, row_values=1))
