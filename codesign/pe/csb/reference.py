"""A second, deliberately plain model of the CSB PE, written line by line from docs/csb.md.

It shares no code with :mod:`codesign.pe.csb.golden` or :mod:`codesign.pe.csb.stream`
(Python integers and nested loops, no NumPy), so the ``golden`` verification
level can check every expected word of a transaction file against it: two
independent readings of one contract must agree bit for bit.
"""

from __future__ import annotations

import math
from fractions import Fraction

from codesign.contracts.constants import STATUS_BAD_HEADER, STATUS_OK, status_code

OP_FP, OP_EB, OP_WG, OP_UPD = range(4)
STATUS_NNZ, STATUS_INDEX = status_code("csb", "NNZ"), status_code("csb", "INDEX")
ZERO, G_FIRST, LEFT, ELEMENTWISE, HOLD, CARRY = 4, 8, 16, 32, 64, 128  # header bits 2..7 (docs/csb.md, "Flags ...")
STRIDE_TWO = 1 << 13  # header bit 13: FP, EB, WG step over the input at stride 2
KERNEL_ONE = 1 << 14  # header bit 14: FP, EB, WG, UPD as on the same PE built with kernel 1
RESERVED_MASK = 0xFFFF_FFFF & ~(0x3 | 0xFC | (0x1F << 8) | STRIDE_TWO | KERNEL_ONE | (0x1FF << 16))


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _saturate(value: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, value))


def _word(value: int) -> int:
    return value & 0xFFFF_FFFF


class _Reader:
    """Pops words; a ValueError once the transaction is exhausted. On a stream of ``parts`` 32-bit parts a beat,
    every section starts a new beat: :meth:`end_section` skips the rest of the current one."""

    def __init__(self, words, parts: int = 1) -> None:
        self.words = [int(w) for w in words]
        self.at = 0
        self.parts = parts

    def end_section(self) -> None:
        self.at = -(-self.at // self.parts) * self.parts
        if self.at > len(self.words):
            raise ValueError(f"transaction truncated inside the last beat of a section ({len(self.words)} parts)")

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
        self.end_section()
        return out[:count]

    def section(self, count: int) -> list[int]:
        out = [self.word() for _ in range(count)]
        self.end_section()
        return out


class _Shape:
    """The PE parameters one transaction is read and computed with (input tile = stride * (output tile - 1) +
    kernel)."""

    def __init__(self, *, block_rows: int, block_cols: int, kernel: int, out_h: int, out_w: int, batch: int,
                 parallel: int, acc_bits: int, stride: int) -> None:
        self.block_rows, self.block_cols, self.k, self.lanes = block_rows, block_cols, kernel, batch
        self.out_h, self.out_w, self.parallel, self.acc_bits = out_h, out_w, parallel, acc_bits
        self.stride = stride
        self.in_h, self.in_w = stride * (out_h - 1) + kernel, stride * (out_w - 1) + kernel
        self.taps = [(ky, kx) for ky in range(kernel) for kx in range(kernel)]


def _read_sections(reader: _Reader, op: int, nnz: int, s: _Shape, flags: int = 0, carried=None) -> dict:
    """The sections after the index bytes, in stream order, as signed values (``carried``: a CARRY's initial sums,
    the signed results the PE holds)."""

    def int8s(count: int) -> list[int]:
        return [_signed(b, 8) for b in reader.bytes(count)]

    def words_signed(count: int, bits: int) -> list[int]:
        return [_signed(word, bits) for word in reader.section(count)]

    def accumulators(count: int) -> list[int]:  # ZERO: not sent, every sum starts at 0; CARRY: at the held ones
        if flags & CARRY:
            return list(carried)
        return [0] * count if flags & ZERO else words_signed(count, s.acc_bits)

    kk, lanes = s.k * s.k, s.lanes
    out_size, in_size = s.out_h * s.out_w * lanes, s.in_h * s.in_w * lanes
    if op == OP_FP:
        weights, data = int8s(nnz * kk), int8s(s.block_cols * in_size)
        return {"weights": weights, "data": data, "acc": accumulators(s.block_rows * out_size)}
    if op == OP_EB:
        weights, data = int8s(nnz * kk), int8s(s.block_rows * out_size)
        return {"weights": weights, "data": data, "acc": accumulators(s.block_cols * in_size)}
    if op == OP_WG:
        grads = accumulators(nnz * kk) if flags & G_FIRST else None
        x_data, dy_data = int8s(s.block_cols * in_size), int8s(s.block_rows * out_size)
        return {"x_data": x_data, "dy_data": dy_data, "grads": grads if flags & G_FIRST else accumulators(nnz * kk)}
    return {"buffer": words_signed(nnz * kk, 24), "grads": words_signed(nnz * kk, 32)}


def _forward(s: _Shape, ys, xs, weights, data, acc) -> list[int]:
    for e in range(len(ys)):
        for t, (ky, kx) in enumerate(s.taps):
            w = weights[e * s.k * s.k + t]
            for oy in range(s.out_h):
                for ox in range(s.out_w):
                    for lane in range(s.lanes):
                        at = ((ys[e] * s.out_h + oy) * s.out_w + ox) * s.lanes + lane
                        iy, ix = s.stride * oy + ky, s.stride * ox + kx
                        x = data[((xs[e] * s.in_h + iy) * s.in_w + ix) * s.lanes + lane]
                        acc[at] = _saturate(acc[at] + w * x, s.acc_bits)
    return [_word(v) for v in acc]


def _error_back(s: _Shape, ys, xs, weights, data, acc) -> list[int]:
    for e in range(len(ys)):
        for t, (ky, kx) in enumerate(s.taps):
            w = weights[e * s.k * s.k + t]
            for iy in range(s.in_h):
                for ix in range(s.in_w):
                    if (iy - ky) % s.stride or (ix - kx) % s.stride:
                        continue  # no output position reads this input position through this tap
                    oy, ox = (iy - ky) // s.stride, (ix - kx) // s.stride
                    if not (0 <= oy < s.out_h and 0 <= ox < s.out_w):
                        continue
                    for lane in range(s.lanes):
                        at = ((xs[e] * s.in_h + iy) * s.in_w + ix) * s.lanes + lane
                        dy = data[((ys[e] * s.out_h + oy) * s.out_w + ox) * s.lanes + lane]
                        acc[at] = _saturate(acc[at] + w * dy, s.acc_bits)
    return [_word(v) for v in acc]


def _weight_gradient(s: _Shape, ys, xs, x_data, dy_data, grads) -> list[int]:
    def x_at(channel: int, row: int, col: int, lane: int) -> int:
        return x_data[((channel * s.in_h + row) * s.in_w + col) * s.lanes + lane]

    result = []
    for e in range(len(ys)):
        for t, (ky, kx) in enumerate(s.taps):
            partial = [0] * s.parallel
            for position in range(s.out_h * s.out_w):
                oy, ox = divmod(position, s.out_w)
                total = sum(x_at(xs[e], s.stride * oy + ky, s.stride * ox + kx, lane)
                            * dy_data[((ys[e] * s.out_h + oy) * s.out_w + ox) * s.lanes + lane]
                            for lane in range(s.lanes))
                group = position % s.parallel
                partial[group] = _saturate(partial[group] + total, s.acc_bits)
            g = grads[e * s.k * s.k + t]
            for group in range(s.parallel):
                g = _saturate(g + partial[group], s.acc_bits)
            result.append(_word(g))
    return result


def _update(shift: int, buffer, grads, left: bool = False) -> list[int]:
    result = []
    if left:  # the gradient times 2^shift, clamped to 32 bits, then an update at shift 0
        grads, shift = [_saturate(g * (1 << shift), 32) for g in grads], 0
    for b, g in zip(buffer, grads):
        numerator = b * (1 << shift) - g  # the exact sum, in units of 2^-shift buffer steps
        quotient, remainder = divmod(numerator, 1 << shift)  # floor division
        half = 1 << shift >> 1
        if shift and (remainder > half or (remainder == half and quotient & 1)):
            quotient += 1
        result.append(_word(_saturate(quotient, 24)))
    return result


def reference_output(words, *, block_rows: int, block_cols: int, kernel: int, out_h: int, out_w: int, batch: int,
                     parallel: int, acc_bits: int, max_stride: int = 1, packed: bool = False, stream_bits: int = 32,
                     loss: bool = False, state: dict | None = None) -> list[int]:
    """The output words (status first) the PE must send for the input words of one transaction (``packed``
    builds compute the same words). With ``stream_bits`` 64 or 128 the words are the 32-bit parts of the stream's
    beats, least significant first: the header a beat (its other parts 0, else status 1), every section from a new
    beat (the rest of its last beat ignored), the status a beat and the results as many to a beat as it has parts,
    the last beat's rest 0.

    ``state``: a dict the caller keeps from one transaction to the next; under ``"held"`` the PE's held results
    as ``(op, nnz, signed values, stride, kernel)`` after an accepted HOLD, else None. Without it the PE holds
    nothing."""
    parts = stream_bits // 32
    state = {} if state is None else state
    reader = _Reader(words, parts)
    answer = _answer(reader, block_rows=block_rows, block_cols=block_cols, kernel=kernel, out_h=out_h, out_w=out_w,
                     batch=batch, parallel=parallel, acc_bits=acc_bits, max_stride=max_stride, loss=loss, state=state)
    results = answer[1:] + [0] * (-(len(answer) - 1) % parts)
    return answer[:1] + [0] * (parts - 1) + results


def _answer(reader: _Reader, *, block_rows: int, block_cols: int, kernel: int, out_h: int, out_w: int, batch: int,
            parallel: int, acc_bits: int, max_stride: int, loss: bool, state: dict) -> list[int]:
    """:func:`reference_output`'s status and results, one word each."""
    held = state.get("held")
    state["held"] = None
    header = reader.word()
    if any(reader.section(reader.parts - 1)):  # the header beat's other parts
        return [STATUS_BAD_HEADER]
    op, shift, nnz = header & 3, (header >> 8) & 0x1F, (header >> 16) & 0x1FF
    flags = header & 0xFC
    stride = 2 if header & STRIDE_TWO else 1
    if header & RESERVED_MASK or (stride == 2 and (flags & ELEMENTWISE or op == OP_UPD or max_stride < 2)) \
            or (header & KERNEL_ONE and flags & ELEMENTWISE):
        return [STATUS_BAD_HEADER]
    if flags & ELEMENTWISE and op == 3:
        if not loss:
            return [STATUS_BAD_HEADER]  # no LOSS unit on this build
        return _loss(reader, shift, nnz, flags, min(min(block_rows * block_cols * kernel * kernel, 511) // batch, 32),
                     batch, acc_bits)
    if flags & ELEMENTWISE:
        sums = None  # SELECT with CARRY masks the FP (or EB) sums held: one per output (input) channel, position, lane
        if held is not None and held[0] in (OP_FP, OP_EB):
            sums = held[2]
        return _elementwise(reader, op, shift, nnz, flags, min(block_rows * block_cols * kernel * kernel, 511),
                            acc_bits, sums)
    run_kernel = 1 if header & KERNEL_ONE else kernel
    if (shift and op != OP_UPD) or (flags & ZERO and op == OP_UPD) or (flags & G_FIRST and op != OP_WG) \
            or (flags & LEFT and op != OP_UPD) or (flags & (HOLD | CARRY) and op == OP_UPD):
        return [STATUS_BAD_HEADER]
    if flags & CARRY and (flags & (ZERO | G_FIRST) or held is None or held[0] != op
                          or (op == OP_WG and held[1] != nnz) or held[3:] != (stride, run_kernel)):
        return [STATUS_BAD_HEADER]  # nothing of this op (size, stride, kernel) held by the transaction just before
    if nnz > block_rows * block_cols:
        return [STATUS_NNZ]
    index = reader.bytes(nnz)
    ys, xs = [b >> 4 for b in index], [b & 15 for b in index]
    shape = _Shape(block_rows=block_rows, block_cols=block_cols, kernel=run_kernel, out_h=out_h, out_w=out_w,
                   batch=batch, parallel=parallel, acc_bits=acc_bits, stride=stride)
    sections = _read_sections(reader, op, nnz, shape, flags, held[2] if flags & CARRY else None)
    if reader.at != len(reader.words):
        raise ValueError(f"transaction has {len(reader.words) - reader.at} words beyond its sections")
    if any(y >= block_rows or x >= block_cols for y, x in zip(ys, xs)):
        return [STATUS_INDEX]
    if op == OP_FP:
        results = _forward(shape, ys, xs, **sections)
    elif op == OP_EB:
        results = _error_back(shape, ys, xs, **sections)
    elif op == OP_WG:
        results = _weight_gradient(shape, ys, xs, **sections)
    else:
        results = _update(shift, **sections, left=bool(flags & LEFT))
    if flags & HOLD:  # the results stay in the PE; the status goes out alone
        state["held"] = (op, nnz, [_signed(word, 32) for word in results], stride, run_kernel)
        return [STATUS_OK]
    return [STATUS_OK] + results


def _elementwise(reader: _Reader, op: int, shift: int, count: int, flags: int, capacity: int,
                 acc_bits: int, sums=None) -> list[int]:
    """SELECT (op 0): v where z > 0, else 0, on acc_bits values; SHR (op 1): a 24-bit word shifted right, floored;
    RELU (op 2): v where v > 0, else 0, one section of acc_bits values. SELECT with CARRY takes v from ``sums``
    (the held FP or EB sums, as many as its elements) and reads z alone."""
    carry = flags == ELEMENTWISE | CARRY and op == 0
    if op > 2 or (flags != ELEMENTWISE and not carry) or (shift and op != 1):
        return [STATUS_BAD_HEADER]
    if carry and (sums is None or len(sums) != count):
        return [STATUS_BAD_HEADER]
    if count > capacity:
        return [STATUS_NNZ]
    if op == 1:
        values = [_signed(word, 24) for word in reader.section(count)]
        result = [_word(value // (1 << shift)) for value in values]
    elif op == 2:
        result = [_word(max(_signed(word, acc_bits), 0)) for word in reader.section(count)]
    else:
        values = list(sums) if carry else [_signed(word, acc_bits) for word in reader.section(count)]
        signs = [_signed(word, acc_bits) for word in reader.section(count)]
        result = [_word(value if sign > 0 else 0) for value, sign in zip(values, signs)]
    if reader.at != len(reader.words):
        raise ValueError(f"transaction has {len(reader.words) - reader.at} words beyond its sections")
    return [STATUS_OK] + result


def loss_codes(logits: list[list[int]], labels: list[int], *, batch: int, exp_shift: int,
               recip_shift: int) -> list[list[int]]:
    """The loss gradient's codes (docs/csb.md, "The loss on the PE"), a sample at a time in Python integers:
    ``logits[c][j]`` class ``c`` of lane ``j``; a label of -1 marks a lane without a sample (codes 0). The
    exponent table is tabulated here by its own rounding; the final rounding is a Fraction's (ties to even)."""
    table = [math.floor(Fraction(2) ** 16 * Fraction(2 ** (-f / 256)) + Fraction(1, 2)) for f in range(256)]
    classes = len(logits)
    out = [[0] * len(labels) for _ in range(classes)]
    for j, label in enumerate(labels):
        if label == -1:
            continue
        column = [logits[c][j] for c in range(classes)]
        es = []
        for value in column:
            u = ((max(column) - value) * 94548) // 2 ** exp_shift
            es.append(0 if u // 256 >= 17 else table[u % 256] // 2 ** (u // 256))
        total = sum(es)
        recip = 2 ** recip_shift // (total * batch)
        for c, e in enumerate(es):
            code = round(Fraction((e - (total if c == label else 0)) * recip, 2 ** 32))
            out[c][j] = max(-128, min(127, code))
    return out


def _loss(reader: _Reader, shift: int, classes: int, flags: int, most: int, lanes: int, acc_bits: int) -> list[int]:
    """LOSS (op 3): P (recip_shift in bits 5..0, at most 48; the batch in 27..16), a label a lane (-1 as 0xFFFFFFFF: no
    sample), then ``classes`` rows of ``lanes`` accumulators; out the codes of :func:`loss_codes`, row by row.
    Status 3 for reserved bits of P, a recip_shift above 48, a batch of 0 or a label outside the classes."""
    if flags != ELEMENTWISE or classes == 0:
        return [STATUS_BAD_HEADER]
    if classes > most:
        return [STATUS_NNZ]
    param = reader.section(1)[0]
    labels = reader.section(lanes)
    values = [_signed(word, acc_bits) for word in reader.section(classes * lanes)]
    if reader.at != len(reader.words):
        raise ValueError(f"transaction has {len(reader.words) - reader.at} words beyond its sections")
    batch = (param >> 16) & 0xFFF
    bad_label = any(label >= classes and label != 0xFFFFFFFF for label in labels)
    if param & ~0x0FFF003F or param & 0x3F > 48 or batch == 0 or bad_label:
        return [STATUS_INDEX]
    labels = [-1 if label == 0xFFFFFFFF else label for label in labels]
    rows = [values[c * lanes:(c + 1) * lanes] for c in range(classes)]
    codes = loss_codes(rows, labels, batch=batch, exp_shift=shift, recip_shift=param & 0x3F)
    return [STATUS_OK] + [_word(code) for row in codes for code in row]
