"""Stimulus for a CSB PE on a 64- or 128-bit stream (docs/csb.md, "Wide streams").

The transactions are the 32-bit build's (every directed, random, chained, stride-2 and kernel-1 one), answered in
order by one session of that build and laid out as beats (:mod:`codesign.pe.csb.beats`); then what only a wide
stream has: in about half of the transactions the unused parts of every section's last beat carry random words,
which the PE must ignore, and header beats whose upper parts are not 0, which it must refuse with status 1, alone,
and which drop what a ``HOLD`` before them left (a ``CARRY`` after one is refused too).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from codesign.pe.csb import beats
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import CsbSession, EwOp, Op, encode_transaction, header_word, transaction_sections


def garble_padding(stream: np.ndarray, layout, parts: int, rng: np.random.Generator) -> np.ndarray:
    """``stream`` (a transaction's beats, sections of ``layout`` 32-bit words each) with random words in the unused
    parts of every section's last beat but the header's."""
    stream = stream.copy()
    at = 0
    for number, count in enumerate(layout):
        width = beats.padded(count, parts)
        if number:
            stream[at + count:at + width] = rng.integers(0, 1 << 32, width - count, dtype=np.uint64)
        at += width
    return stream


def refused_header_beats(spec: CsbSpec) -> list[np.ndarray]:
    """Header beats of headers the 32-bit build accepts (FP, EB, WG, UPD, an element-wise op) with a part above the
    first set, each upper part once: status 1."""
    headers = [header_word(Op.FP, 1, zero=True), header_word(Op.EB, 0), header_word(Op.WG, 1, g_first=True),
               header_word(Op.UPD, 1, 3), header_word(EwOp.RELU, 2, ew=True)]
    out = []
    for number, header in enumerate(headers):
        stream = np.zeros(spec.parts, np.uint32)
        stream[0], stream[1 + number % (spec.parts - 1)] = header, 1 << (7 * number % 32)
        out.append(stream)
    return out


def dropped_hold(spec: CsbSpec) -> list[np.ndarray]:
    """A ``HOLD`` (an FP block of one entry, from zero), a refused header beat, then a ``CARRY`` of the same op: the
    refusal drops the held sums, so the ``CARRY`` is refused as well (status 1, its header beat alone)."""
    twin = replace(spec, stream_bits=32)
    x = np.ones((spec.block_cols, *spec.in_tile(1), spec.batch), np.int64)
    hold = encode_transaction(twin, Op.FP, index=np.array([0]), weights=np.ones((1, spec.kernel, spec.kernel),
                                                                                  np.int64), x=x, zero=True, hold=True)
    layout = transaction_sections(twin, int(hold[0]))
    carry = np.zeros(spec.parts, np.uint32)
    carry[0] = header_word(Op.FP, 1, carry=True)
    return [beats.widen(hold, layout, spec.parts), refused_header_beats(spec)[0], carry]


def wide_transactions(spec: CsbSpec, pairs, *, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``pairs`` (``(words_in, words_out)`` of the 32-bit twin of ``spec``, answered in order from a PE holding
    nothing) as ``spec``'s beats, padding garbled in about half, after the refused header beats; a ValueError if
    the twin's session does not give ``pairs``' answers (a set not answered in order)."""
    parts, twin = spec.parts, replace(spec, stream_bits=32)
    rng = np.random.default_rng([seed, parts])
    wide = CsbSession(spec)
    out = [(stream, wide.answer(stream)) for stream in refused_header_beats(spec) + dropped_hold(spec)]
    session = CsbSession(twin)
    for number, (words, expected) in enumerate(pairs):
        layout = transaction_sections(twin, int(words[0]), session.held)
        answer = session.answer(words)
        if not np.array_equal(answer, np.asarray(expected)):
            raise ValueError(f"transaction {number}: the 32-bit session answers otherwise than the set says")
        stream = beats.widen(words, layout, parts)
        if rng.random() < 0.5:
            stream = garble_padding(stream, layout, parts, rng)
        out.append((stream, beats.widen_output(answer, parts)))
    return out


__all__ = ["garble_padding", "refused_header_beats", "wide_transactions"]
