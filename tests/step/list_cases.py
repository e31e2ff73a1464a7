"""Call lists of the three TT PEs to hold the list cycle model to the RTL: independent calls of random shapes, the
header in the descriptor or inline, operand rows strided or contiguous, raw or rounded results written as one
row or as strided rows, and a refused call anywhere (the list ends after its record). At 64- and 128-bit stream
words (``spec.stream_bits``) every block is whole beats (rows, gaps and out rows multiples of a beat's words, the
results' out block too: shapes and rounding are drawn again until it is), as ``check_list`` asks."""

from __future__ import annotations

import numpy as np

from codesign.contracts.calls import RAW, RECORD_WORDS, ArenaLayout, Block, Call
from codesign.numerics.round_stage import RoundStageConfig
from codesign.pe.tt import golden as tt
from codesign.pe.tt.contract import code_range, header_word
from codesign.shell.calls import ListCase, run_list_golden

FILL = 0xA5A5_A5A5


class Arena(ArenaLayout):
    """The contract's arena layout, with blocks placed as strided rows."""

    def rows(self, words, row: int, gap: int) -> Block:
        """``words`` as rows of ``row`` words, ``gap`` filler words after each (stride ``4 (row + gap)``)."""
        words = np.asarray(words, dtype=np.uint32).reshape(-1, row)
        padded = np.full((words.shape[0], row + gap), FILL, dtype=np.uint32)
        padded[:, :row] = words
        return Block(offset=self.put(padded.reshape(-1)), words=row, rows=words.shape[0], stride=4 * (row + gap))


def _divisor(rng: np.random.Generator, n: int, most: int = 64) -> int:
    return int(rng.choice([d for d in range(1, min(n, most) + 1) if n % d == 0]))


def _operands(pe, spec, rng: np.random.Generator, dims: tuple) -> tuple:
    a_low, a_high = code_range(spec.a_bits)
    b_low, b_high = code_range(spec.b_bits)
    if pe.name == "tt3":
        i, j = dims
        a_shape, b_shape = (i,), (j,)
    else:
        i, j, k, l = dims
        a_shape, b_shape = (i, j, k), tt.b_shape(spec, j, k, l)
    return rng.integers(a_low, a_high + 1, size=a_shape), rng.integers(b_low, b_high + 1, size=b_shape)


def random_dims(pe, spec, rng: np.random.Generator, scale: int = 1) -> tuple:
    """A small accepted shape (``scale`` > 1 for larger ones, within the spec's buffers)."""
    if pe.name == "tt3":
        return int(rng.integers(1, 12 * scale)), int(rng.integers(1, min(spec.max_j, 24 * scale) + 1))
    return (int(rng.integers(1, 3 * scale + 1)), int(rng.integers(1, min(spec.max_j, 2 * scale) + 1)),
            int(rng.integers(1, min(spec.max_k, 20 * scale) + 1)), int(rng.integers(1, min(spec.max_l, 10 * scale) + 1)))


def _parts(spec) -> int:
    """32-bit words of one stream word (beat)."""
    return int(getattr(spec, "stream_bits", 32)) // 32


def _rounding(spec, rng: np.random.Generator, count: int) -> RoundStageConfig:
    bits = int(rng.integers(2, 17))
    slot = 4 if bits <= 4 else 8 if bits <= 8 else 16
    lanes = int(rng.integers(1, min(16, 128 // slot) + 1))
    return RoundStageConfig(enable=True, shift=int(rng.integers(-20, 3)), bits=bits, lanes=lanes,
                            group_words=int(rng.integers(-(-lanes * slot // 32), 5)),
                            row_values=_divisor(rng, count, 0xFFFF))


def _call(pe, spec, arena: Arena, rng: np.random.Generator, dims: tuple, *, inline: bool, strided: bool,
          rounded: bool) -> Call | None:
    """One call of shape ``dims``, or None when its results cannot fill whole beats (raw, or under 20 drawn
    roundings; the blocks already placed are then left unused). Draws in the same order at every width, so the
    32-bit lists are what they were."""
    p = _parts(spec)
    a, b = _operands(pe, spec, rng, dims)
    words = np.asarray(tt.words(spec, a, b), dtype=np.uint32)
    count = int(np.asarray(tt.kernel(spec, a, b)).size)
    if not rounded and count % p:
        return None
    gap = p * int(rng.integers(1, 5)) if strided else 0
    if inline:
        segments = (arena.rows(words, words.size if not strided else p * _divisor(rng, words.size // p), gap),)
        header = None
    else:
        b_words = words.size - p - _a_words(spec, a)
        segments = (arena.rows(words[p:p + b_words], p * _divisor(rng, b_words // p) if strided else b_words, gap),
                    arena.rows(words[p + b_words:], words.size - p - b_words, 0))
        header = int(words[0])
    rounding = RAW
    for _ in range(20 if rounded else 0):
        rounding = _rounding(spec, rng, count)
        if rounding.words_out(count) % p == 0:
            break
    out_words = rounding.words_out(count)
    if out_words % p:
        return None
    out_row = p * _divisor(rng, out_words // p) if strided else out_words
    out = arena.rows(np.full(out_words, 0xDEAD_BEEF, dtype=np.uint32), out_row, gap)
    record = arena.put(np.full(RECORD_WORDS, 0xDEAD_BEEF, dtype=np.uint32))
    return Call(header=header, segments=segments, out=out, count=count, record=record, rounding=rounding)


def _a_words(spec, a) -> int:
    from codesign.pe.tt.contract import pack_rows

    return int(pack_rows(a, spec.lanes, spec.a_bits, stream_bits=_parts(spec) * 32).size)


def random_list(pe, spec, rng: np.random.Generator, n_calls: int, *, scale: int = 1, inline_every: int = 0,
                strided: bool = True, round_every: int = 2, refuse_at: int | None = None, dims_of=None) -> ListCase:
    """``n_calls`` independent calls of random accepted shapes (:func:`random_dims`, or ``dims_of(rng)``; every
    ``inline_every``-th with its header inline, every ``round_every``-th raw), and a refused call (J past the
    buffer) at index ``refuse_at``."""
    arena = Arena()
    calls = []
    for index in range(n_calls):
        if index == refuse_at:
            bad = header_word(1, spec.max_j + 1) if pe.name == "tt3" else header_word(1, spec.max_j + 1, 1, 1)
            calls.append(Call(header=bad, segments=(), out=Block(), count=0,
                              record=arena.put(np.zeros(RECORD_WORDS, np.uint32))))
            continue
        call = None
        while call is None:  # at 32 bits the first shape always fits
            dims = random_dims(pe, spec, rng, scale) if dims_of is None else dims_of(rng)
            call = _call(pe, spec, arena, rng, dims,
                         inline=bool(inline_every) and index % inline_every == 0, strided=strided,
                         rounded=bool(round_every) and index % round_every != round_every - 1)
        calls.append(call)
    image = arena.image()
    return ListCase(calls=tuple(calls), arena=image, expected=run_list_golden(pe, spec, image, calls))
