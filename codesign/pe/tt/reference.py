"""Plain-loop reference of the TT PEs' word streams, written from docs/tt_pe.md without the golden code.

It reads the input words one by one as the hardware does (header, chunked
operand rows, slot fields) and accumulates with Python integers, one product
at a time within a chunk, so it shares no arithmetic with the vectorised
golden kernel in :mod:`codesign.pe.tt.golden`. The golden level of
``codesign verify`` compares every expected word with it.
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
    def __init__(self, words: list[int]) -> None:
        self.words, self.at = words, 0

    def word(self) -> int:
        value = self.words[self.at]
        self.at += 1
        return value

    def row(self, length: int, lanes: int, bits: int) -> list[int]:
        """One operand row of ``length`` values, as chunks of ``lanes`` slots; padding lanes are dropped."""
        slot = _slot(bits)
        per_chunk = (lanes * slot + 31) // 32
        values = []
        for _ in range((length + lanes - 1) // lanes):
            bitstring = 0
            for w in range(per_chunk):
                bitstring |= self.word() << (32 * w)
            for lane in range(lanes):
                if len(values) < length:
                    values.append(_signed(bitstring >> (lane * slot), bits))
        return values


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


def pe1_reference(words_in, *, lanes: int, rows: int, a_bits: int, b_bits: int, acc_bits: int, max_j: int,
                  max_k: int, max_l: int) -> list[int]:
    """Expected output words of one PE1 transaction (``rows`` does not change results)."""
    del rows
    reader = _Reader([int(w) for w in words_in])
    i_dim, j_dim, k_dim, l_dim = _dims(reader.word())
    status = _contraction_status(i_dim, j_dim, k_dim, l_dim, max_j=max_j, max_k=max_k, max_l=max_l)
    if status:
        return [status]
    b = [[reader.row(k_dim, lanes, b_bits) for _ in range(j_dim)] for _ in range(l_dim)]
    out = [0]
    for _ in range(i_dim):
        a = [reader.row(k_dim, lanes, a_bits) for _ in range(j_dim)]
        for l in range(l_dim):
            acc = 0
            for j in range(j_dim):
                for start in range(0, k_dim, lanes):
                    chunk = 0
                    for k in range(start, min(start + lanes, k_dim)):
                        chunk += a[j][k] * b[l][j][k]
                    acc = _clamp(acc + chunk, acc_bits)
            out.append(acc & 0xFFFF_FFFF)
    if reader.at != len(reader.words):
        raise ValueError(f"{len(reader.words) - reader.at} input words left over")
    return out


def pe2_reference(words_in, *, lanes: int, rows: int, a_bits: int, b_bits: int, acc_bits: int, max_j: int,
                  max_k: int, max_l: int) -> list[int]:
    """Expected output words of one PE2 transaction: ``Z[i, l, k] = sum_j A[i, j, k] * B[l, j]``, saturating per product."""
    del rows
    reader = _Reader([int(w) for w in words_in])
    i_dim, j_dim, k_dim, l_dim = _dims(reader.word())
    status = _contraction_status(i_dim, j_dim, k_dim, l_dim, max_j=max_j, max_k=max_k, max_l=max_l)
    if status:
        return [status]
    b = [reader.row(j_dim, lanes, b_bits) for _ in range(l_dim)]
    out = [0]
    for _ in range(i_dim):
        a = [reader.row(k_dim, lanes, a_bits) for _ in range(j_dim)]
        for l in range(l_dim):
            for k in range(k_dim):
                acc = 0
                for j in range(j_dim):
                    acc = _clamp(acc + a[j][k] * b[l][j], acc_bits)
                out.append(acc & 0xFFFF_FFFF)
    if reader.at != len(reader.words):
        raise ValueError(f"{len(reader.words) - reader.at} input words left over")
    return out


def pe3_reference(words_in, *, lanes: int, a_bits: int, b_bits: int, max_j: int) -> list[int]:
    """Expected output words of one PE3 transaction: ``Z[i, j] = A[i] * B[j]``, row-major."""
    reader = _Reader([int(w) for w in words_in])
    header = reader.word()
    i_dim, j_dim = header & 255, (header >> 8) & 255
    if header >> 16 or i_dim == 0 or j_dim == 0:
        return [1]
    if j_dim > max_j:
        return [2]
    b = reader.row(j_dim, lanes, b_bits)
    a = reader.row(i_dim, lanes, a_bits)
    out = [0] + [(x * y) & 0xFFFF_FFFF for x in a for y in b]
    if reader.at != len(reader.words):
        raise ValueError(f"{len(reader.words) - reader.at} input words left over")
    return out
