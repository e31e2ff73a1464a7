"""A CSB transaction's 32-bit words on a 64- or 128-bit stream (docs/csb.md, "Wide streams").

Why a layer of its own: the contract's transaction is 32-bit words (:mod:`codesign.pe.csb.stream`), and a build
with ``stream_bits`` 64 or 128 moves two or four of them a cycle. On the wide stream the header is one beat
(its parts above the first 0), every section starts a new beat and fills it from its first part (bytes four to a
part, as at 32 bits), and a section's last beat leaves its unused parts to be ignored; the status is one beat and
the results follow ``parts`` to a beat, the last one's unused parts 0. Vector files and DMA buffers hold a beat as
its parts, least significant first. What the sections are the caller says (their words, in stream order); with
one part a beat the layouts are the 32-bit transaction's own.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def beats(words: int, parts: int) -> int:
    """Beats of ``parts`` parts that ``words`` 32-bit words fill."""
    return -(-words // parts)


def padded(words: int, parts: int) -> int:
    """Parts of the beats ``words`` words fill (the words and the last beat's unused parts)."""
    return beats(words, parts) * parts


def widen(words: np.ndarray, sections: Sequence[int], parts: int) -> np.ndarray:
    """The parts of a transaction whose 32-bit ``words`` are ``sections`` words long in turn (the header a section
    of one): each section from a new beat, its last beat's unused parts 0."""
    words = np.asarray(words, dtype=np.uint32)
    if sum(sections) != words.size:
        raise ValueError(f"{words.size} words, but the sections take {sum(sections)}")
    if parts == 1:
        return words
    out, at = [], 0
    for count in sections:
        out.append(np.pad(words[at:at + count], (0, padded(count, parts) - count)))
        at += count
    return np.concatenate(out).astype(np.uint32) if out else words


def narrow(stream: np.ndarray, sections: Sequence[int], parts: int) -> np.ndarray:
    """The 32-bit words of a transaction's ``parts``-part beats whose sections are ``sections`` words long (the
    inverse of :func:`widen`: every section's unused parts dropped, whatever they hold); a ValueError when the
    beats are not exactly the sections'."""
    stream = np.asarray(stream, dtype=np.uint32)
    want = sum(padded(count, parts) for count in sections)
    if stream.size != want:
        raise ValueError(f"transaction of {stream.size} parts: its sections take {want} ({parts} parts a beat)")
    if parts == 1:
        return stream
    out, at = [], 0
    for count in sections:
        out.append(stream[at:at + count])
        at += padded(count, parts)
    return np.concatenate(out).astype(np.uint32)


def widen_output(words: np.ndarray, parts: int) -> np.ndarray:
    """A transaction's output parts from its 32-bit words (the status, then the results): the status a beat of its
    own, the results ``parts`` to a beat, the last one's unused parts 0."""
    words = np.asarray(words, dtype=np.uint32)
    if parts == 1 or words.size == 0:
        return words
    return widen(words, (1, words.size - 1), parts)


def header_beat_clear(stream: np.ndarray, parts: int) -> bool:
    """Whether the parts of the header beat above its first are 0 (else the PE refuses the header, status 1)."""
    return not np.any(np.asarray(stream[1:parts]))


__all__ = ["beats", "header_beat_clear", "narrow", "padded", "widen", "widen_output"]
