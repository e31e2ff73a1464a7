"""A second, deliberately plain model of the CSB PE, written line by line from docs/csb.md.

It shares no code with :mod:`codesign.pe.csb.golden` or :mod:`codesign.pe.csb.stream`
(Python integers and nested loops, no NumPy), so the ``golden`` verification
level can check every expected word of a transaction file against it: two
independent readings of one contract must agree bit for bit.
"""

from __future__ import annotations

OP_FP, OP_EB, OP_WG, OP_UPD = range(4)
STATUS_OK, STATUS_BAD_HEADER, STATUS_NNZ, STATUS_INDEX = range(4)
RESERVED_MASK = 0xFFFF_FFFF & ~(0x3 | (0x1F << 8) | (0x1FF << 16))


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _saturate(value: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, value))


def _word(value: int) -> int:
    return value & 0xFFFF_FFFF


class _Reader:
    """Pops words; ``None`` once the transaction is exhausted (the caller reports a truncated stream)."""

    def __init__(self, words) -> None:
        self.words = [int(w) for w in words]
        self.at = 0

    def word(self) -> int:
        if self.at >= len(self.words):
            raise ValueError(f"transaction truncated after {len(self.words)} words")
        self.at += 1
        return self.words[self.at - 1]

    def bytes(self, count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            word = self.word()
            out += [(word >> (8 * k)) & 0xFF for k in range(4)]
        return out[:count]


def reference_output(words, *, block_rows: int, block_cols: int, kernel: int, out_h: int, out_w: int, batch: int,
                     parallel: int, acc_bits: int) -> list[int]:
    """The output words (status first) the PE must send for the input words of one transaction."""
    reader = _Reader(words)
    header = reader.word()
    op, shift, nnz = header & 3, (header >> 8) & 0x1F, (header >> 16) & 0x1FF
    if header & RESERVED_MASK or (shift and op != OP_UPD):
        return [STATUS_BAD_HEADER]
    if nnz > block_rows * block_cols:
        return [STATUS_NNZ]
    index = reader.bytes(nnz)
    ys, xs = [b >> 4 for b in index], [b & 15 for b in index]
    k, lanes = kernel, batch
    in_h, in_w = out_h + k - 1, out_w + k - 1
    taps = [(ky, kx) for ky in range(k) for kx in range(k)]

    def int8s(count: int) -> list[int]:
        return [_signed(b, 8) for b in reader.bytes(count)]

    def words_signed(count: int, bits: int) -> list[int]:
        return [_signed(reader.word(), bits) for _ in range(count)]

    if op in (OP_FP, OP_EB):
        weights = int8s(nnz * k * k)
        if op == OP_FP:
            data = int8s(block_cols * in_h * in_w * lanes)
            acc = words_signed(block_rows * out_h * out_w * lanes, acc_bits)
        else:
            data = int8s(block_rows * out_h * out_w * lanes)
            acc = words_signed(block_cols * in_h * in_w * lanes, acc_bits)
    elif op == OP_WG:
        x_data = int8s(block_cols * in_h * in_w * lanes)
        dy_data = int8s(block_rows * out_h * out_w * lanes)
        grads = words_signed(nnz * k * k, acc_bits)
    else:
        buffer = words_signed(nnz * k * k, 24)
        grads = words_signed(nnz * k * k, 32)
    if reader.at != len(reader.words):
        raise ValueError(f"transaction has {len(reader.words) - reader.at} words beyond its sections")
    if any(y >= block_rows or x >= block_cols for y, x in zip(ys, xs)):
        return [STATUS_INDEX]

    def x_at(channel: int, row: int, col: int, lane: int) -> int:
        return x_data[((channel * in_h + row) * in_w + col) * lanes + lane]

    if op == OP_FP:
        for e in range(nnz):
            for t, (ky, kx) in enumerate(taps):
                w = weights[e * k * k + t]
                for oy in range(out_h):
                    for ox in range(out_w):
                        for lane in range(lanes):
                            at = ((ys[e] * out_h + oy) * out_w + ox) * lanes + lane
                            x = data[((xs[e] * in_h + oy + ky) * in_w + ox + kx) * lanes + lane]
                            acc[at] = _saturate(acc[at] + w * x, acc_bits)
        return [STATUS_OK] + [_word(v) for v in acc]
    if op == OP_EB:
        for e in range(nnz):
            for t, (ky, kx) in enumerate(taps):
                w = weights[e * k * k + t]
                for iy in range(in_h):
                    for ix in range(in_w):
                        oy, ox = iy - ky, ix - kx
                        if not (0 <= oy < out_h and 0 <= ox < out_w):
                            continue
                        for lane in range(lanes):
                            at = ((xs[e] * in_h + iy) * in_w + ix) * lanes + lane
                            dy = data[((ys[e] * out_h + oy) * out_w + ox) * lanes + lane]
                            acc[at] = _saturate(acc[at] + w * dy, acc_bits)
        return [STATUS_OK] + [_word(v) for v in acc]
    if op == OP_WG:
        result = []
        for e in range(nnz):
            for t, (ky, kx) in enumerate(taps):
                partial = [0] * parallel
                for position in range(out_h * out_w):
                    oy, ox = divmod(position, out_w)
                    total = sum(x_at(xs[e], oy + ky, ox + kx, lane)
                                * dy_data[((ys[e] * out_h + oy) * out_w + ox) * lanes + lane] for lane in range(lanes))
                    group = position % parallel
                    partial[group] = _saturate(partial[group] + total, acc_bits)
                g = grads[e * k * k + t]
                for group in range(parallel):
                    g = _saturate(g + partial[group], acc_bits)
                result.append(_word(g))
        return [STATUS_OK] + result
    result = []
    for b, g in zip(buffer, grads):
        numerator = b * (1 << shift) - g  # the exact sum, in units of 2^-shift buffer steps
        quotient, remainder = divmod(numerator, 1 << shift)  # floor division
        half = 1 << shift >> 1
        if shift and (remainder > half or (remainder == half and quotient & 1)):
            quotient += 1
        result.append(_word(_saturate(quotient, 24)))
    return [STATUS_OK] + result
