"""Verification stimulus for the CSB PE: directed corner cases plus random transactions, with golden answers.

Random transactions cover the four ops with ``nnz`` uniform in
``0..capacity``, distinct indices stored row-major (as :func:`encode` stores
them) or in a random order (the PE must accept any order), random int8 data
and accumulators drawn either over the whole ``acc_bits`` range or near its
ends so that saturation happens. Bits the PE must ignore (the high bytes of a
byte section's last word, the bits of a word above a narrower field) carry
random garbage in a third of them.

The directed set pins what a uniform draw rarely hits: empty, one-entry and
full blocks; index 0xFF (valid only for 16 x 16 blocks, else status 3) and
other out-of-block indices; accumulator saturation in both directions with the
order of additions visible; WG partial saturation across the P groups; buffer
saturation near +-2^23; UPD ties at several shifts; shifts 0 and 31; EB with
entries in column-major (transposed) order; status-1 and status-2 headers,
which are the whole transaction (the PE reads nothing after them), ``S2`` among
them where this PE or op has no stride 2. Stride-2 transactions, on a PE built
for them, come from :mod:`codesign.pe.csb.stimulus_stride`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codesign.hw.vectors import write_transactions
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import (
    FLAG_BITS,
    FLAG_EW,
    FLAG_S2,
    HEADER_FIELDS,
    STATUS_OK,
    EwOp,
    Op,
    encode_transaction,
    expected_output,
    header_status,
    header_word,
    sections,
)

PE_NAME = "csb"


class TransactionBuilder:
    """Draws the sections of one transaction for ``spec`` from ``rng``; FP, EB and WG at ``stride``."""

    def __init__(self, spec: CsbSpec, rng: np.random.Generator, stride: int = 1) -> None:
        self.spec, self.rng, self.stride = spec, rng, stride
        s = spec
        self.x_shape = (s.block_cols, *s.in_tile(stride), s.batch)
        self.dy_shape = (s.block_rows, s.out_h, s.out_w, s.batch)

    def index(self, nnz: int, order: str = "row") -> np.ndarray:
        s, rng = self.spec, self.rng
        cells = np.sort(rng.choice(s.capacity, size=nnz, replace=False))
        ys, xs = cells // s.block_cols, cells % s.block_cols
        if order == "shuffled":
            perm = rng.permutation(nnz)
            ys, xs = ys[perm], xs[perm]
        elif order == "column":
            perm = np.lexsort((ys, xs))
            ys, xs = ys[perm], xs[perm]
        return (ys << 4 | xs).astype(np.uint8)

    def int8(self, shape) -> np.ndarray:
        return self.rng.integers(-128, 128, size=shape)

    def acc(self, shape, mode: str = "any") -> np.ndarray:
        s, rng = self.spec, self.rng
        if mode == "near":  # within a few products of either end
            margin = 1 << 15
            ends = np.where(rng.random(shape) < 0.5, s.acc_min, s.acc_max - margin)
            return ends + rng.integers(0, margin + 1, size=shape)
        if mode == "small":
            return rng.integers(-(1 << 12), 1 << 12, size=shape)
        return rng.integers(s.acc_min, s.acc_max + 1, size=shape)

    def transaction(self, op: Op, nnz: int, *, order: str = "row", acc_mode: str = "any", index=None,
                    shift: int | None = None, check: bool = True, **given) -> np.ndarray:
        s, k = self.spec, self.spec.kernel
        index = self.index(nnz, order) if index is None else np.asarray(index, dtype=np.uint8)
        nnz = index.size
        if op == Op.FP:
            arrays = dict(weights=self.int8((nnz, k, k)), x=self.int8(self.x_shape), acc=self.acc(self.dy_shape, acc_mode))
        elif op == Op.EB:
            arrays = dict(weights=self.int8((nnz, k, k)), dy=self.int8(self.dy_shape), acc=self.acc(self.x_shape, acc_mode))
        elif op == Op.WG:
            arrays = dict(x=self.int8(self.x_shape), dy=self.int8(self.dy_shape), grads=self.acc((nnz, k, k), acc_mode))
        else:
            shift = int(self.rng.integers(0, 32)) if shift is None else shift
            scale = 1 << min(shift + 10, 31)
            arrays = dict(buffer=self.rng.integers(-(1 << 23), 1 << 23, size=(nnz, k, k)),
                          grads=self.rng.integers(-scale, scale, size=(nnz, k, k)))
        arrays.update(given)
        return encode_transaction(s, op, index=index, shift=shift or 0, check=check,
                                  stride=1 if op == Op.UPD else self.stride, **arrays)

    def garble(self, words: np.ndarray) -> np.ndarray:
        """Random bits where the PE must ignore them: unused bytes of byte sections, bits above narrow fields."""
        s, rng = self.spec, self.rng
        words = words.copy()
        header = int(words[0])
        op, nnz = Op(header & 3), header >> 16 & 0x1FF
        at = 1
        for name, kind, count in sections(s, op, nnz, header & FLAG_BITS):
            if kind == "bytes":
                size = -(-count // 4)
                used = count % 4
                if used:
                    keep = (1 << (8 * used)) - 1
                    words[at + size - 1] = (int(words[at + size - 1]) & keep) | (int(rng.integers(0, 1 << 32)) & ~keep)
                at += size
                continue
            bits = {"acc": s.acc_bits, "buffer": s.buffer_bits}.get(name, s.acc_bits if op == Op.WG else 32)
            if bits < 32:
                noise = rng.integers(0, 1 << 32, size=count, dtype=np.uint64).astype(np.uint32)
                mask = np.uint32(((1 << 32) - 1) ^ ((1 << bits) - 1))
                words[at:at + count] = (words[at:at + count] & ~mask) | (noise & mask)
            at += count
        return words


def _pair(spec: CsbSpec, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    words = np.asarray(words, dtype=np.uint32)
    return words, expected_output(spec, words)


def directed_transactions(spec: CsbSpec, rng: np.random.Generator, stride: int = 1) -> list[np.ndarray]:
    """Input words of the directed cases (see the module docstring), FP, EB and WG at ``stride``; the refused
    headers at stride 1 only."""
    s, k = spec, spec.kernel
    make = TransactionBuilder(spec, rng, stride)
    cap = s.capacity
    out: list[np.ndarray] = []
    for op in Op:
        out.append(make.transaction(op, 0))
        out.append(make.transaction(op, 1))
        out.append(make.transaction(op, cap))
        out.append(make.transaction(op, cap, order="shuffled"))
    # index 0xFF: the last cell of a 16 x 16 block, outside any smaller one (status 3, whole transaction consumed)
    for op in Op:
        out.append(make.transaction(op, 1, index=[0xFF], check=False))
    if s.block_rows < 16:
        out += [make.transaction(op, 1, index=[s.block_rows << 4], check=False) for op in (Op.FP, Op.WG)]
    if s.block_cols < 16:
        out += [make.transaction(op, 1, index=[s.block_cols], check=False) for op in (Op.EB, Op.UPD)]
    if cap >= 2 and (s.block_rows < 16 or s.block_cols < 16):  # a bad index after good ones
        bad = 0xFF if s.block_rows < 16 else 0xF0
        out.append(make.transaction(Op.FP, 2, index=[0x00, bad], check=False))
    # accumulator saturation with the order visible: +127*127 saturates first, -127*127 then pulls back
    top, bottom = s.acc_max - 100, s.acc_min + 100
    x_full = np.full(make.x_shape, 127)
    dy_full = np.full(make.dy_shape, 127)
    for sign, start in ((1, top), (-1, bottom)):
        index = np.array([0x00, 0x00 | min(1, s.block_cols - 1)] if s.block_cols > 1 else [0x00], dtype=np.uint8)
        weights = np.stack([np.full((k, k), 127 * sign), np.full((k, k), -127 * sign)])[:index.size]
        out.append(make.transaction(Op.FP, 0, index=index, weights=weights, x=x_full, acc=np.full(make.dy_shape, start)))
        index_eb = np.array([0x00, min(1, s.block_rows - 1) << 4] if s.block_rows > 1 else [0x00], dtype=np.uint8)
        out.append(make.transaction(Op.EB, 0, index=index_eb, weights=weights[:index_eb.size], dy=dy_full,
                                    acc=np.full(make.x_shape, start)))
        out.append(make.transaction(Op.WG, 0, index=[0x00], x=np.full(make.x_shape, 127 * sign), dy=dy_full,
                                    grads=np.full((1, k, k), start)))
        out.append(make.transaction(Op.WG, 0, index=[0x00], x=np.full(make.x_shape, -128),
                                    dy=np.full(make.dy_shape, -128 if sign > 0 else 127), grads=np.full((1, k, k), -start)))
    for op in Op:  # near-end accumulators with random data
        out.append(make.transaction(op, cap, acc_mode="near"))
    # WG where one group's partial saturates and the others pull it back (depends on P)
    mixed_dy = np.where(np.arange(s.out_pos).reshape(1, s.out_h, s.out_w, 1) % 2 == 0, 127, -128)
    out.append(make.transaction(Op.WG, 0, index=[0x00], x=np.full(make.x_shape, 127),
                                dy=np.broadcast_to(mixed_dy, make.dy_shape), grads=np.zeros((1, k, k), int)))
    # EB with the entries read in transposed (column-major) order
    out.append(make.transaction(Op.EB, cap, order="column"))
    out.append(make.transaction(Op.EB, cap, order="column", acc_mode="near"))
    # UPD: ties to even at several shifts, buffer saturation, shifts 0 and 31
    n = min(cap, 8)
    idx = make.index(n)
    for shift in (1, 2, 7, 16, 31):
        half = 1 << (shift - 1)
        multiples = rng.integers(-4, 5, size=(n, k, k))
        grads = np.clip(multiples * (1 << shift) + half * rng.choice([-1, 1], size=(n, k, k)), -(1 << 31), (1 << 31) - 1)
        buffer = rng.integers(-(1 << 20), 1 << 20, size=(n, k, k))
        out.append(make.transaction(Op.UPD, 0, index=idx, buffer=buffer, grads=grads, shift=shift))
    near = np.where(rng.random((n, k, k)) < 0.5, (1 << 23) - 1 - rng.integers(0, 4, (n, k, k)),
                    -(1 << 23) + rng.integers(0, 4, (n, k, k)))
    push = np.where(near > 0, -(1 << 31), (1 << 31) - 1)
    for shift in (0, 3, 31):
        out.append(make.transaction(Op.UPD, 0, index=idx, buffer=near, grads=push, shift=shift))
        out.append(make.transaction(Op.UPD, 0, index=idx, buffer=near, grads=np.clip(-np.sign(push) * (1 << shift), -(1 << 31), (1 << 31) - 1),
                                    shift=shift))
    out.append(make.transaction(Op.UPD, cap, shift=0))
    out.append(make.transaction(Op.UPD, cap, shift=31))
    # ignored bits carry garbage
    for op in Op:
        out.append(make.garble(make.transaction(op, int(rng.integers(1, cap + 1)), order="shuffled")))
    return out if stride > 1 else out + _refused_headers(spec)


def _refused_headers(spec: CsbSpec) -> list[np.ndarray]:
    """Headers refused with status 1 or 2: each is the whole transaction."""
    cap, out = spec.capacity, []
    reserved = [bit for bit in range(32) if not HEADER_FIELDS >> bit & 1]
    for bit in reserved:
        out.append(np.array([header_word(Op.FP, 0) | 1 << bit], dtype=np.uint32))
    for op in (Op.FP, Op.EB, Op.WG):
        out.append(np.array([header_word(op, 1, 0) | 1 << 8], dtype=np.uint32))  # a shift outside UPD
    for op in Op:
        out.append(np.array([header_word(op, cap + 1)], dtype=np.uint32))
    out.append(np.array([header_word(Op.WG, 0x1FF)], dtype=np.uint32))
    s2_refused = [Op.UPD] if spec.max_stride == 2 else list(Op)  # S2 on UPD, or on a PE built for stride 1
    out += [np.array([header_word(op, 1) | FLAG_S2], dtype=np.uint32) for op in s2_refused]
    out += [np.array([header_word(op, 1, ew=True) | FLAG_S2], dtype=np.uint32) for op in EwOp]
    return out


def random_transactions(spec: CsbSpec, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``count`` random accepted transactions (see the module docstring)."""
    make = TransactionBuilder(spec, rng)
    out = []
    for _ in range(count):
        op = Op(int(rng.integers(0, 4)))
        nnz = int(rng.integers(0, spec.capacity + 1))
        order = "shuffled" if rng.random() < 0.5 else "row"
        mode = str(rng.choice(["any", "near", "small"]))
        words = make.transaction(op, nnz, order=order, acc_mode=mode)
        out.append(make.garble(words) if rng.random() < 1 / 3 else words)
    return out


def build_transactions(spec: CsbSpec, *, count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Directed cases then ``count`` random transactions, each ``(words_in, words_out)`` (uint32), reproducible."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an int >= 0, got {count!r}")
    rng = np.random.default_rng(seed)
    words = directed_transactions(spec, rng) + random_transactions(spec, count, rng)
    return [_pair(spec, w) for w in words]


def top_up_updates(spec: CsbSpec, transactions, *, target: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``transactions`` plus full-block UPD transactions (random shifts, both index orders) until UPD has
    updated at least ``target`` buffer words: UPD does no MACs, so the random mix alone reaches it last."""
    missing = target - count_macs(spec, transactions)["upd"]
    make = TransactionBuilder(spec, np.random.default_rng([seed, 3]))
    extra = [_pair(spec, make.transaction(Op.UPD, spec.capacity, order="shuffled" if i % 2 else "row"))
             for i in range(max(0, -(-missing // (spec.capacity * spec.kk))))]
    return list(transactions) + extra


def count_macs(spec: CsbSpec, transactions) -> dict[str, int]:
    """MACs checked per op (accepted FP, EB, WG transactions), buffer words updated (UPD), and refusals."""
    counts = {"fp": 0, "eb": 0, "wg": 0, "upd": 0, "refused": 0}
    per_entry = spec.kk * spec.out_pos * spec.batch  # FP, EB and WG all do this many MACs per stored entry
    for words_in, words_out in transactions:
        header = int(words_in[0])
        if header_status(spec, header) != STATUS_OK or int(words_out[0]) != STATUS_OK:
            counts["refused"] += 1
            continue
        op, nnz = Op(header & 3), header >> 16 & 0x1FF
        if header & FLAG_EW:  # element-wise: counted by codesign.pe.csb.stimulus_ext.count_ext
            continue
        if op == Op.UPD:
            counts["upd"] += nnz * spec.kk
        else:
            counts[op.name.lower()] += nnz * per_entry
    return counts


def write_stimulus(path: Path, spec: CsbSpec, *, count: int, seed: int) -> Path:
    """Build the stimulus and write it as a transaction file whose metadata is ``spec.to_dict()``."""
    return write_transactions(path, pe=PE_NAME, transactions=build_transactions(spec, count=count, seed=seed),
                              meta=spec.to_dict())
