"""Plain-loop reference of the TT PEs' word streams, written from docs/tt_pe.md without the golden code.

It reads the input words one by one as the hardware does (header, chunked
operand rows, slot fields) and accumulates with Python integers, one product
at a time within a chunk, so it shares no arithmetic with the vectorised
golden kernel in :mod:`codesign.pe.tt.golden`. The golden level of
``codesign verify`` compares every expected word with it. A stream word of
``stream_bits`` bits arrives and leaves as ``stream_bits // 32`` 32-bit
parts, least significant first; results fill the parts of a word in order.
"""

from __future__ import annotations


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _slot(bits: int) -> int:
    for slot in (4, 8, 16):
        if bits <= slot:
            return slot
    raise ValueError(bits)


class _Reader:
    def __init__(self, words: list[int], stream_bits: int) -> None:
        if stream_bits not in (32, 64, 128):
            raise ValueError(f"stream_bits={stream_bits} is not 32, 64 or 128")
        self.words, self.at, self.width = words, 0, stream_bits

    def word(self) -> int:
        """The next stream word, put together from its 32-bit parts."""
        value = 0
        for part in range(self.width // 32):
            value |= self.words[self.at] << (32 * part)
            self.at += 1
        return value

    def left(self) -> int:
        return len(self.words) - self.at

    def row(self, length: int, lanes: int, bits: int) -> list[int]:
        """One operand row of ``length`` values, as chunks of ``lanes`` slots; padding lanes are dropped."""
        slot = _slot(bits)
        per_chunk = (lanes * slot + self.width - 1) // self.width
        values = []
        for _ in range((length + lanes - 1) // lanes):
            bitstring = 0
            for w in range(per_chunk):
                bitstring |= self.word() << (self.width * w)
            for lane in range(lanes):
                if len(values) < length:
                    values.append(_signed(bitstring >> (lane * slot), bits))
        return values


def _words_out(status: int, results: list[int], stream_bits: int) -> list[int]:
    """The status word, then the results as 32-bit parts, ``stream_bits // 32`` to a word, the last padded with 0."""
    per_word = stream_bits // 32
    out = [status] + [0] * (per_word - 1)
    out += [value & 0xFFFF_FFFF for value in results]
    return out + [0] * (-len(results) % per_word)


def _clamp(value: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, value))


def _dims(header: int) -> tuple[int, int, int, int]:
    """(I, J, K, L) from the four header bytes of a PE1 or PE2 transaction."""
    return header & 255, header >> 8 & 255, header >> 16 & 255, header >> 24 & 255


def _contraction_status(i_dim: int, j_dim: int, k_dim: int, l_dim: int, *, max_j: int, max_k: int, max_l: int) -> int:
    """1 for a zero dimension, 2 for one over the buffers, 0 to go on (PE1 and PE2 alike)."""
    if i_dim == 0 or j_dim == 0 or k_dim == 0 or l_dim == 0:
        return 1
    if j_dim > max_j or k_dim > max_k or l_dim > max_l:
        return 2
    return 0


def _header(reader: _Reader, fields_bits: int = 32) -> tuple[int, bool]:
    """The header word and whether every bit above its ``fields_bits`` low bits is 0."""
    header = reader.word()
    return header, header >> fields_bits == 0


def pe1_reference(words_in, *, lanes: int, rows: int, a_bits: int, b_bits: int, acc_bits: int, max_j: int,
                  max_k: int, max_l: int, stream_bits: int = 32, b_order: str = "lj", j_pairs: bool = False
                  ) -> list[int]:
    """Expected output parts of one PE1 transaction (``rows`` does not change results); ``B``'s rows arrive
    ``l`` outer (``b_order`` ``"lj"``) or ``j`` outer (``"jl"``); with ``j_pairs`` and ``K <= lanes / 2`` the
    products of rows ``2p`` and ``2p + 1`` are one sum, added into the accumulator once."""
    del rows
    reader = _Reader([int(w) for w in words_in], stream_bits)
    header, clean = _header(reader)
    i_dim, j_dim, k_dim, l_dim = _dims(header)
    status = _contraction_status(i_dim, j_dim, k_dim, l_dim, max_j=max_j, max_k=max_k, max_l=max_l)
    status = status if clean else 1  # a set bit above the four fields: a bad header, whatever the fields say
    if status:
        return _words_out(status, [], stream_bits)
    if b_order == "jl":
        by_j = [[reader.row(k_dim, lanes, b_bits) for _ in range(l_dim)] for _ in range(j_dim)]
        b = [[by_j[j][l] for j in range(j_dim)] for l in range(l_dim)]
    elif b_order == "lj":
        b = [[reader.row(k_dim, lanes, b_bits) for _ in range(j_dim)] for _ in range(l_dim)]
    else:
        raise ValueError(f"b_order={b_order!r} is neither 'lj' nor 'jl'")
    out = []
    for _ in range(i_dim):
        a = [reader.row(k_dim, lanes, a_bits) for _ in range(j_dim)]
        step = 2 if j_pairs and lanes > 1 and 2 * k_dim <= lanes else 1  # rows j summed together
        for l in range(l_dim):
            acc = 0
            for first in range(0, j_dim, step):
                for start in range(0, k_dim, lanes):
                    chunk = 0
                    for j in range(first, min(first + step, j_dim)):
                        for k in range(start, min(start + lanes, k_dim)):
                            chunk += a[j][k] * b[l][j][k]
                    acc = _clamp(acc + chunk, acc_bits)
            out.append(acc)
    if reader.left():
        raise ValueError(f"{reader.left()} input parts left over")
    return _words_out(0, out, stream_bits)


def pe2_reference(words_in, *, lanes: int, rows: int, a_bits: int, b_bits: int, acc_bits: int, max_j: int,
                  max_k: int, max_l: int, stream_bits: int = 32, row_pairs: bool = False) -> list[int]:
    """Expected output parts of one PE2 transaction: ``Z[i, l, k] = sum_j A[i, j, k] * B[l, j]``, saturating per product
    (row pairs move cycles, not numbers)."""
    del rows, row_pairs
    reader = _Reader([int(w) for w in words_in], stream_bits)
    header, clean = _header(reader)
    i_dim, j_dim, k_dim, l_dim = _dims(header)
    status = _contraction_status(i_dim, j_dim, k_dim, l_dim, max_j=max_j, max_k=max_k, max_l=max_l)
    status = status if clean else 1  # a set bit above the four fields: a bad header, whatever the fields say
    if status:
        return _words_out(status, [], stream_bits)
    b = [reader.row(j_dim, lanes, b_bits) for _ in range(l_dim)]
    out = []
    for _ in range(i_dim):
        a = [reader.row(k_dim, lanes, a_bits) for _ in range(j_dim)]
        for l in range(l_dim):
            for k in range(k_dim):
                acc = 0
                for j in range(j_dim):
                    acc = _clamp(acc + a[j][k] * b[l][j], acc_bits)
                out.append(acc)
    if reader.left():
        raise ValueError(f"{reader.left()} input parts left over")
    return _words_out(0, out, stream_bits)


def pe3_reference(words_in, *, lanes: int, a_bits: int, b_bits: int, max_j: int, stream_bits: int = 32) -> list[int]:
    """Expected output parts of one PE3 transaction: ``Z[i, j] = A[i] * B[j]``, row-major."""
    reader = _Reader([int(w) for w in words_in], stream_bits)
    header, clean = _header(reader, 16)
    i_dim, j_dim = header & 255, (header >> 8) & 255
    if not clean or i_dim == 0 or j_dim == 0:
        return _words_out(1, [], stream_bits)
    if j_dim > max_j:
        return _words_out(2, [], stream_bits)
    b = reader.row(j_dim, lanes, b_bits)
    a = reader.row(i_dim, lanes, a_bits)
    out = [x * y for x in a for y in b]
    if reader.left():
        raise ValueError(f"{reader.left()} input parts left over")
    return _words_out(0, out, stream_bits)
