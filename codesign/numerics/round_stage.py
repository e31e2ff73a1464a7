"""The rounding output stage as a golden model: PE accumulators in, the next call's operand codes out.

A PE's results are signed 32-bit accumulators at some fraction ``frac_from``; the next PE call takes
``bits``-wide codes at ``frac_to``, packed into its operand slots. The stage between the two rounds every
accumulator to ``saturate_bits(round_half_to_even(acc * 2^shift))`` (``shift = frac_to - frac_from``), packs the
codes into the chunk layout of docs/tt_pe.md ("The stream interface") and, as it sends, sums the statistics a
scale rule reads (sum and maximum of |acc|, and how many codes saturated). It is the host's
:func:`codesign.step.tt.rounding.rescale` moved onto the accelerator, bit for bit.

Everything here is exact integer NumPy (int64 and uint64; no float): the HLS header
``hls_templates/include/codesign_round.h`` and the RTL ``rtl/accel/accel_round.v`` are checked against it
(``tests/numerics/test_round_stage.py``, ``tests/rtl/test_accel_round.py``). The contract is in
docs/accelerator.md, "Rounding stage". This module is the ground floor: NumPy and the standard library only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from codesign.numerics.records import keyword_record

SHIFT_RANGE = (-64, 63)  # the descriptor's 7-bit signed shift
BITS_RANGE = (2, 16)  # code widths the TT PE's operand slots hold
LANES_RANGE = (1, 16)  # fields per group (a PE chunk)
GROUP_WORDS_RANGE = (1, 4)  # 32-bit words per group: a chunk of at most 128 bits
ROW_VALUES_RANGE = (1, 65535)  # values per row (16 bits in the descriptor)
WORD_BITS = 32  # accumulators and output words are 32 bits wide
ACC_RANGE = (-(1 << 31), (1 << 31) - 1)  # a signed 32-bit accumulator
HELD_BITS = 48  # the shell's accumulation buffer (docs/accelerator.md, "Accumulating calls"): a DSP48's width
HELD_RANGE = (-(1 << (HELD_BITS - 1)), (1 << (HELD_BITS - 1)) - 1)
HELD_SHIFT_CAP = HELD_BITS + 1  # |sum| <= 2^47, so sum * 2^-s rounds to 0 for every s >= 49, as it does at s = 49
LEFT_SHIFT_CAP = 31  # a left shift past 16 saturates every non-zero value: capping keeps int64 exact
RIGHT_SHIFT_CAP = 33  # |acc| <= 2^31, so acc * 2^-s rounds to 0 for every s >= 33, as it does at s = 33


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= int(value) <= high:
        raise ValueError(f"{name}={value} is out of range [{low}, {high}]")


def slot_of(bits: int) -> int:
    """The operand slot (bits) of a ``bits``-wide code: the smallest of 4, 8, 16 that holds it (docs/tt_pe.md)."""
    return 4 if bits <= 4 else (8 if bits <= 8 else 16)


@keyword_record
class RoundStageConfig:
    """One run of the rounding stage, as a call descriptor carries it.

    ``enable`` False is the pass-through mode (the 32-bit words go out unchanged). ``shift`` is
    ``frac_to - frac_from`` (fraction bits); ``bits`` the code width; ``lanes`` the fields of one group (a PE
    chunk); ``group_words`` the 32-bit words a group takes (at least ``ceil(lanes * slot / 32)``; a host on a
    W-bit stream passes ``ceil(lanes * slot / W) * W / 32`` so that a chunk starts a new stream word);
    ``row_values`` the values of one operand row, padded with zero fields to whole groups. ``field_bits`` is
    the operand width of the PE that reads the codes (0: ``bits``): its slot holds them, so 8-bit activation
    codes can feed a PE built for 16-bit gradients. The packing fields are validated in both modes (a
    descriptor carries them either way).
    """

    enable: bool
    shift: int
    bits: int
    lanes: int
    group_words: int
    row_values: int
    field_bits: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.enable, (bool, np.bool_)):
            raise TypeError(f"enable must be a bool, got {type(self.enable).__name__}")
        _check_int("shift", self.shift, *SHIFT_RANGE)
        _check_int("bits", self.bits, *BITS_RANGE)
        _check_int("lanes", self.lanes, *LANES_RANGE)
        _check_int("group_words", self.group_words, *GROUP_WORDS_RANGE)
        _check_int("row_values", self.row_values, *ROW_VALUES_RANGE)
        if self.field_bits:
            _check_int("field_bits", self.field_bits, self.bits, BITS_RANGE[1])
        needed = -(-self.lanes * self.slot // WORD_BITS)
        if self.group_words < needed:
            raise ValueError(f"group_words={self.group_words} cannot hold {self.lanes} lanes of {self.slot}-bit "
                             f"slots: at least {needed} words are needed")

    @property
    def slot(self) -> int:
        """Bits of one field (4, 8 or 16): the reading PE's slot."""
        return slot_of(self.field_bits or self.bits)

    @property
    def groups_per_row(self) -> int:
        """Groups (chunks) one row of ``row_values`` values takes."""
        return -(-self.row_values // self.lanes)

    def check_count(self, count: int) -> None:
        """Refuse a ``count`` of accumulators that is not whole rows (rounding mode; any count passes through)."""
        _check_int("count", count, 0, (1 << 32) - 1)
        if self.enable and count % self.row_values:
            raise ValueError(f"count={count} is not a whole number of rows of row_values={self.row_values}")

    def words_out(self, count: int) -> int:
        """32-bit words the stage sends for ``count`` accumulators: ``count`` when passing through, else
        ``rows * ceil(row_values / lanes) * group_words``."""
        self.check_count(count)
        if not self.enable:
            return count
        return count // self.row_values * self.groups_per_row * self.group_words


class RoundStats(NamedTuple):
    """Statistics over the accumulators taken (not the codes): what a scale rule reads after a call.

    ``sum_abs`` is sum |acc| (as the RTL's 64-bit unsigned register; |-2^31| = 2^31), ``saturated`` the codes
    clipped to the ``bits`` range (0 when passing through). No peak |acc|: no scale rule reads one, and tracking it
    took a 128-bit shell some 600 LUT cells (docs/accelerator.md, "Cost").
    """

    sum_abs: int
    saturated: int


def _accumulators(acc, limits: tuple[int, int] = ACC_RANGE) -> np.ndarray:
    values = np.asarray(acc)
    if values.size == 0:
        return np.zeros(0, dtype=np.int64)
    if values.dtype.kind not in "iu":
        raise TypeError(f"accumulators must be integers, got dtype {values.dtype}")
    values = values.astype(np.int64).reshape(-1)
    if values.size and (values.min() < limits[0] or values.max() > limits[1]):
        raise ValueError(f"accumulators must be signed {limits[1].bit_length() + 1}-bit values")
    return values


def rounded_shift(acc: np.ndarray, shift: int) -> np.ndarray:
    """``round_half_to_even(acc * 2^shift)`` in int64, before saturation; a left shift capped at
    :data:`LEFT_SHIFT_CAP` (after clipping to 18 bits) and a right shift at :data:`HELD_SHIFT_CAP`, which changes no
    code: the 32-bit RTL caps at :data:`RIGHT_SHIFT_CAP`, which gives the same codes for 32-bit words."""
    if shift >= 0:  # clipped first, so a held 48-bit sum cannot overflow int64: the codes are at most 16 bits wide
        return np.clip(acc, -(1 << BITS_RANGE[1] + 1), 1 << BITS_RANGE[1] + 1) << min(shift, LEFT_SHIFT_CAP)
    s = min(-shift, HELD_SHIFT_CAP)
    floor = acc >> s  # toward minus infinity
    rest = acc - (floor << s)  # 0 <= rest < 2^s
    half = np.int64(1) << np.int64(s - 1)
    up = (rest > half) | ((rest == half) & ((floor & 1) == 1))
    return floor + up


def _code_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def round_codes(acc, shift: int, bits: int) -> np.ndarray:
    """``bits``-wide codes (int64) of signed 32-bit accumulators times ``2^shift``: to nearest, ties to even,
    saturated to ``[-2^(bits-1), 2^(bits-1) - 1]``; a shift >= 0 is a saturating left shift."""
    _check_int("shift", shift, *SHIFT_RANGE)
    _check_int("bits", bits, *BITS_RANGE)
    low, high = _code_range(bits)
    return np.clip(rounded_shift(_accumulators(acc), shift), low, high)


def pack_codes(codes, cfg: RoundStageConfig) -> np.ndarray:
    """The words (uint32) of whole rows of codes: each row padded with zero fields to whole groups, each group
    ``cfg.group_words`` words, field ``v`` of a group at bits ``[v * slot, v * slot + slot)`` of its words read as
    one little-endian bit string, holding the code's two's complement in ``slot`` bits."""
    codes = np.asarray(codes, dtype=np.int64).reshape(-1)
    if codes.size % cfg.row_values:  # packing is of whole rows, whatever the mode
        raise ValueError(f"{codes.size} codes are not a whole number of rows of row_values={cfg.row_values}")
    low, high = _code_range(cfg.bits)
    if codes.size and (codes.min() < low or codes.max() > high):
        raise ValueError(f"codes must lie in the {cfg.bits}-bit range [{low}, {high}]")
    slot, lanes, per_word = cfg.slot, cfg.lanes, WORD_BITS // cfg.slot
    groups = cfg.groups_per_row
    rows = codes.reshape(-1, cfg.row_values)
    fields = np.zeros((rows.shape[0], groups * lanes), dtype=np.uint64)
    fields[:, :cfg.row_values] = rows.astype(np.uint64) & np.uint64((1 << slot) - 1)  # two's complement in slot bits
    fields = fields.reshape(-1, lanes)  # one group a line
    padded = np.zeros((fields.shape[0], cfg.group_words * per_word), dtype=np.uint64)
    padded[:, :lanes] = fields
    offsets = np.arange(per_word, dtype=np.uint64) * np.uint64(slot)
    words = (padded.reshape(-1, cfg.group_words, per_word) << offsets).sum(axis=2)  # disjoint bits: sum is OR
    return words.reshape(-1).astype(np.uint32)


def stats_of(acc, *, codes_saturated: int = 0, limits: tuple[int, int] = ACC_RANGE) -> RoundStats:
    """:class:`RoundStats` of signed accumulators (32-bit, or ``limits``; ``codes_saturated`` passed through)."""
    magnitude = np.abs(_accumulators(acc, limits)).astype(np.uint64)
    total = int(magnitude.sum(dtype=np.uint64)) if magnitude.size else 0
    return RoundStats(sum_abs=total, saturated=int(codes_saturated))


def round_stage(acc_words, cfg: RoundStageConfig) -> tuple[np.ndarray, RoundStats]:
    """What the stage sends for ``acc_words`` (uint32 words of signed accumulators), and its statistics.

    Rounding mode: the packed codes (:func:`pack_codes` of :func:`round_codes`), ``count`` a whole number of rows.
    Pass-through: the words unchanged. The statistics are over the accumulators in both modes.
    """
    words = np.asarray(acc_words)
    if words.size == 0:
        words = np.zeros(0, dtype=np.uint32)
    if words.dtype.kind not in "iu":
        raise TypeError(f"accumulator words must be integers, got dtype {words.dtype}")
    words = words.astype(np.uint64).reshape(-1)
    if words.size and int(words.max()) >= 1 << WORD_BITS:
        raise ValueError("accumulator words must fit 32 bits")
    cfg.check_count(words.size)
    acc = words.astype(np.uint32).view(np.int32).astype(np.int64)
    if not cfg.enable:
        return words.astype(np.uint32), stats_of(acc)
    return _rounded_words(acc, cfg, ACC_RANGE)


def round_held(values, cfg: RoundStageConfig) -> tuple[np.ndarray, RoundStats]:
    """What the stage sends when an accumulating call drains the shell's buffer: signed sums of up to
    :data:`HELD_BITS` bits (int64), rounded and packed as :func:`round_stage` does, or passed through as 64-bit
    words (low word first, sign-extended) when ``cfg`` does not round. The statistics are over the sums."""
    acc = _accumulators(values, HELD_RANGE)
    cfg.check_count(acc.size)
    if not cfg.enable:
        return acc.view(np.uint64).view(np.uint32).copy(), stats_of(acc, limits=HELD_RANGE)
    return _rounded_words(acc, cfg, HELD_RANGE)


def _rounded_words(acc: np.ndarray, cfg: RoundStageConfig, limits: tuple[int, int]) -> tuple[np.ndarray, RoundStats]:
    low, high = _code_range(cfg.bits)
    rounded = rounded_shift(acc, cfg.shift)
    saturated = int(np.count_nonzero((rounded < low) | (rounded > high)))
    return pack_codes(np.clip(rounded, low, high), cfg), stats_of(acc, codes_saturated=saturated, limits=limits)


NEG = -(1 << 90)  # stands for minus infinity in the max-plus arithmetic of latency_cycles


def _maxplus(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    """The max-plus product ``a (x) b`` of 3x3 matrices (``(a (x) b)[i][j] = max_k a[i][k] + b[k][j]``)."""
    return [[max(NEG, max(a[i][k] + b[k][j] for k in range(3))) for j in range(3)] for i in range(3)]


def _power(m: list[list[int]], n: int) -> list[list[int]]:
    result = [[0 if i == j else NEG for j in range(3)] for i in range(3)]
    while n:
        if n & 1:
            result = _maxplus(m, result)
        m, n = _maxplus(m, m), n >> 1
    return result


def _group_step(values: int, words: int) -> list[list[int]]:
    """One group of ``values`` chunks whose words take ``words`` cycles to leave, as a max-plus map of the state
    (l, x, z): l the edge its last chunk enters the group register, x the edge the output register takes it, z
    the edge its first chunk would enter without stalls. Its first chunk enters at max(l + 1, x, z) (after the
    previous chunk, once the group register is free, not before it arrives), the others one an edge after it;
    the output register takes the group one edge after its last chunk, and ``words`` edges after the previous
    group."""
    return [[values, values - 1, values - 1], [values + 1, max(values, words), values], [NEG, NEG, values]]


def latency_cycles(cfg: RoundStageConfig, count: int, parts: int = 1) -> int:
    """Cycles ``busy`` of ``rtl/accel/accel_round.v`` (``PARTS = parts``, W = 32) stays high for ``count``
    accumulators with no stalls: the source offers ``min(parts, left)`` accumulators every cycle, the sink takes
    every word offered.

    The stage takes a chunk a cycle, as many values as are offered and fit the current group (a group of ``n``
    values is ``ceil(n / parts)`` chunks), and sends up to ``parts`` words a cycle (a group's words leave in
    ``u = ceil(group_words / parts)`` cycles). The first chunk enters the group register at edge 4 after the
    start edge (input, shift and saturate registers before it), and the last group's words leave at edges
    ``x + 1 .. x + u`` after the output register takes it at edge ``x``: busy lasts ``x + u`` cycles. ``x``
    follows exactly from the recurrence of :func:`_group_step` over every group, in chunks, computed as max-plus
    matrix powers (a row's groups, then the rows), so any count costs a few dozen operations. Closed forms:
    ``ceil(count / parts) + 5`` passing through (a chunk of up to ``parts`` values is a group of as many words);
    ``chunks + u + 4`` when no group has fewer chunks than ``u``;
    ``4 + ceil(min(lanes, row_values) / parts) + u * groups`` when ``u >= ceil(lanes / parts)``. 0 for no values
    (busy stays low).
    """
    cfg.check_count(count)
    if not 1 <= parts <= 4:
        raise ValueError(f"parts: the stage takes 1 to 4 accumulators a cycle, got {parts!r}")
    if count == 0:
        return 0
    if not cfg.enable:
        return -(-count // parts) + 5
    groups, cycles_out = cfg.groups_per_row, -(-cfg.group_words // parts)
    last = cfg.row_values - (groups - 1) * cfg.lanes
    row = _maxplus(_group_step(-(-last // parts), cycles_out),
                   _power(_group_step(-(-cfg.lanes // parts), cycles_out), groups - 1))
    state = _power(row, count // cfg.row_values)
    return state[1][2] + 4 + cycles_out  # x, from l = x = minus infinity and z = 4


__all__ = ["HELD_BITS", "HELD_RANGE", "RoundStageConfig", "RoundStats", "latency_cycles", "pack_codes", "round_codes",
           "round_held", "round_stage", "rounded_shift", "slot_of",
           "stats_of"]
