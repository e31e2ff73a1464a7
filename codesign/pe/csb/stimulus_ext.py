"""Verification stimulus for the CSB PE's header flags and element-wise ops (docs/csb.md, "Flags and element-wise
operations"): directed corner cases plus random transactions until each new feature has ``target`` values.

What each feature's directed set pins:

* ``ZERO`` (FP, EB, WG without the initial section): empty, one-entry and full blocks; the first additions of a
  sum saturating from 0 in both directions (16-bit sums), so a PE that started from a stale buffer would differ;
* ``G_FIRST`` (WG with G before X and DY): G near both ends, with and without ``ZERO``;
* ``LEFT`` (UPD with the gradient shifted left, 32-bit saturation first): shifts 0, 1, 2, 3, 16 and 31, gradients
  whose shift saturates (both signs) or lands exactly on the 32-bit ends, buffers at both 24-bit ends;
* SELECT: ``z`` at 0, +1, -1 and the ``acc_bits`` ends, ``v`` at its ends and 0, counts 0, 1 and the capacity,
  and ``z = v`` (a ReLU);
* SHR: shifts 0, 1, 7, 8, 15, 16, 23, 24 and 31 on the 24-bit ends, -1, 0, 1 and random words;
* RELU: ``v`` at 0, +1, -1 and the ``acc_bits`` ends among random values, counts 0, 1 and the capacity;
* bits the PE must ignore (above ``acc_bits`` or 24) carry random garbage in a third of the random transactions;
* every refused combination (LOSS, op 3, has its own: :mod:`codesign.pe.csb.stimulus_loss`): ``EW`` with another
  flag (RELU with ``CARRY`` included), SELECT
  and RELU with a shift, a count above
  :attr:`~codesign.pe.csb.spec.CsbSpec.ew_capacity`, ``ZERO`` on UPD, ``G_FIRST`` outside WG, ``LEFT`` outside UPD.
"""

from __future__ import annotations

import numpy as np

from codesign.pe.csb.spec import BUFFER_BITS, CsbSpec
from codesign.pe.csb.stream import (
    FLAG_EW,
    FLAG_CARRY,
    FLAG_G_FIRST,
    FLAG_HOLD,
    FLAG_LEFT,
    FLAG_ZERO,
    STATUS_OK,
    EwOp,
    Op,
    encode_elementwise,
    expected_output,
    header_status,
    header_word,
)

FEATURES = ("zero", "g_first", "left", "select", "shr", "relu")
_COUNTED = {EwOp.SELECT: "select", EwOp.SHR: "shr", EwOp.RELU: "relu"}
SHR_SHIFTS = (0, 1, 7, 8, 15, 16, 23, 24, 31)
LEFT_SHIFTS = (0, 1, 2, 3, 16, 31)


def _garble(words: np.ndarray, bits: int, rng: np.random.Generator) -> np.ndarray:
    """Random bits above the low ``bits`` of every word after the header (the PE ignores them)."""
    words = words.copy()
    if bits < 32 and words.size > 1:
        noise = rng.integers(0, 1 << 32, size=words.size - 1, dtype=np.uint64).astype(np.uint32)
        high = np.uint32(((1 << 32) - 1) ^ ((1 << bits) - 1))
        words[1:] = (words[1:] & ~high) | (noise & high)
    return words


class ExtBuilder:
    """Draws transactions of the new features for ``spec`` from ``rng`` (the classic sections through
    :class:`codesign.pe.csb.stimulus.TransactionBuilder`)."""

    def __init__(self, spec: CsbSpec, rng: np.random.Generator, stride: int = 1) -> None:
        from codesign.pe.csb.stimulus import TransactionBuilder

        self.spec, self.rng, self.make = spec, rng, TransactionBuilder(spec, rng, stride)

    def acc(self, n: int, mode: str = "any") -> np.ndarray:
        return self.make.acc((n,), mode)

    def select(self, n: int, mode: str = "any", relu: bool = False) -> np.ndarray:
        s, rng = self.spec, self.rng
        v = self.acc(n, mode)
        if relu:
            return encode_elementwise(s, EwOp.SELECT, v, v)
        z = np.where(rng.random(n) < 0.3, rng.choice([0, 1, -1, s.acc_min, s.acc_max], size=n), self.acc(n, mode))
        return encode_elementwise(s, EwOp.SELECT, v, z)

    def relu(self, n: int, mode: str = "any") -> np.ndarray:
        s, rng = self.spec, self.rng
        v = np.where(rng.random(n) < 0.3, rng.choice([0, 1, -1, s.acc_min, s.acc_max], size=n), self.acc(n, mode))
        return encode_elementwise(s, EwOp.RELU, v)

    def shr(self, n: int, shift: int | None = None) -> np.ndarray:
        rng = self.rng
        shift = int(rng.integers(0, 32)) if shift is None else shift
        v = rng.integers(-(1 << 23), 1 << 23, size=n)
        special = rng.random(n) < 0.2
        v[special] = rng.choice([-(1 << 23), (1 << 23) - 1, -1, 0, 1], size=int(special.sum()))
        return encode_elementwise(self.spec, EwOp.SHR, v, shift=shift)

    def left(self, nnz: int, shift: int | None = None) -> np.ndarray:
        rng, k = self.rng, self.spec.kernel
        shift = int(rng.integers(0, 32)) if shift is None else shift
        scale = 1 << max(0, 31 - shift + int(rng.integers(-2, 3)))  # around where G * 2^s meets the 32-bit ends
        grads = rng.integers(-min(scale, 1 << 31), min(scale, (1 << 31) - 1), size=(nnz, k, k))
        buffer = rng.integers(-(1 << 23), 1 << 23, size=(nnz, k, k))
        return self.make.transaction(Op.UPD, nnz, buffer=buffer, grads=grads, shift=shift, left=True)

    def flagged(self, op: Op, nnz: int, *, zero: bool, g_first: bool = False, mode: str = "any",
                order: str = "row", hold: bool = False, carry: bool = False, index=None) -> np.ndarray:
        """An FP, EB or WG transaction with random operands and the given flags; the initial section (left out
        with ``zero`` or ``carry``) drawn in ``mode``; ``index`` given, or ``nnz`` entries drawn in ``order``."""
        s, k, make = self.spec, self.spec.kernel, self.make
        nnz = nnz if index is None else len(index)
        if op == Op.FP:
            arrays, name, shape = dict(weights=make.int8((nnz, k, k)), x=make.int8(make.x_shape)), "acc", make.dy_shape
        elif op == Op.EB:
            arrays, name, shape = dict(weights=make.int8((nnz, k, k)), dy=make.int8(make.dy_shape)), "acc", make.x_shape
        else:
            arrays, name, shape = dict(x=make.int8(make.x_shape), dy=make.int8(make.dy_shape)), "grads", (nnz, k, k)
        arrays[name] = None if zero or carry else make.acc(shape, mode)
        index = make.index(nnz, order) if index is None else index
        from codesign.pe.csb.stream import encode_transaction

        return encode_transaction(s, op, index=index, zero=zero, g_first=g_first, hold=hold, carry=carry,
                                  stride=make.stride, **arrays)


def directed_ext(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """Input words of the directed cases of the new features (see the module docstring)."""
    s, k, b = spec, spec.kernel, ExtBuilder(spec, rng)
    cap, ew = s.capacity, s.ew_capacity
    out: list[np.ndarray] = []
    for op in (Op.FP, Op.EB, Op.WG):
        for nnz in (0, 1, cap):
            out.append(b.flagged(op, nnz, zero=True))
    from codesign.pe.csb.stream import encode_transaction

    x_full, dy_full = np.full(b.make.x_shape, 127), np.full(b.make.dy_shape, 127)
    for sign in (1, -1):  # from 0, +-127*127 per addition: 16-bit sums saturate after two, then are pulled back
        index = np.array([0x00] * 1 + ([0x01] if s.block_cols > 1 else []), dtype=np.uint8)
        weights = np.stack([np.full((k, k), 127 * sign), np.full((k, k), -64 * sign)])[:index.size]
        out.append(encode_transaction(s, Op.FP, index=index, weights=weights, x=x_full, zero=True))
        out.append(encode_transaction(s, Op.EB, index=np.array([0x00], dtype=np.uint8), weights=weights[:1],
                                      dy=dy_full * sign, zero=True))
        out.append(encode_transaction(s, Op.WG, index=np.array([0x00], dtype=np.uint8), x=x_full * sign, dy=dy_full,
                                      zero=True))
    for zero in (False, True):
        for mode in ("near", "any"):
            out.append(b.flagged(Op.WG, cap, zero=zero, g_first=True, mode=mode, order="shuffled"))
        out.append(b.flagged(Op.WG, 0, zero=zero, g_first=True))
    n = min(cap, 8)
    for shift in LEFT_SHIFTS:
        out.append(b.left(n, shift))
        ends = np.array([(1 << 31) - 1, -(1 << 31), 1 << (31 - shift) if shift else 1, -(1 << (31 - shift)),
                         (1 << (31 - shift)) - 1, -1, 0, 1][:n]).reshape(-1, 1, 1) * np.ones((1, k, k), int)
        ends = np.clip(ends, -(1 << 31), (1 << 31) - 1)
        buffer = np.where(np.arange(ends.shape[0]).reshape(-1, 1, 1) % 2, (1 << 23) - 1, -(1 << 23)) \
            * np.ones((1, k, k), int)
        out.append(encode_transaction(s, Op.UPD, index=b.make.index(ends.shape[0]), buffer=buffer, grads=ends,
                                      shift=shift, left=True))
    for count in sorted({0, 1, ew}):
        out.append(b.select(count, "near"))
        out.append(b.select(count, "any", relu=True))
        out.append(b.relu(count, "near"))
    specials = np.array([0, 1, -1, s.acc_min, s.acc_max])
    grid_v, grid_z = np.meshgrid(specials, specials)
    pairs = np.resize(np.stack([grid_v.reshape(-1), grid_z.reshape(-1)]), (2, min(ew, 25)))
    if pairs.shape[1]:
        out.append(encode_elementwise(s, EwOp.SELECT, pairs[0], pairs[1]))
        out.append(encode_elementwise(s, EwOp.RELU, np.resize(specials, min(ew, 10))))
    ends = np.resize(np.array([-(1 << 23), (1 << 23) - 1, -1, 0, 1, -(1 << 22), (1 << 16) - 1, -(1 << 16)]), min(ew, 8))
    for shift in SHR_SHIFTS:
        out.append(encode_elementwise(s, EwOp.SHR, ends, shift=shift))
        out.append(b.shr(ew, shift))
    return out + refused_ext(spec)


def refused_ext(spec: CsbSpec) -> list[np.ndarray]:
    """Headers the PE refuses with status 1 or 2 under the new rules (each is its whole transaction)."""
    s, words = spec, []
    for flag in (FLAG_ZERO, FLAG_G_FIRST, FLAG_LEFT):
        words += [FLAG_EW | flag | op | 1 << 16 for op in EwOp]
    words += [header_word(op, 1, ew=True) | 3 << 8 for op in (EwOp.SELECT, EwOp.RELU)]
    words += [header_word(EwOp.RELU, 1, ew=True) | flag for flag in (FLAG_HOLD, FLAG_CARRY)]
    words += [header_word(op, s.ew_capacity + 1, ew=True) for op in EwOp if s.ew_capacity < 0x1FF]
    words.append(header_word(Op.UPD, 1) | FLAG_ZERO)
    words += [header_word(op, 1) | FLAG_G_FIRST for op in (Op.FP, Op.EB, Op.UPD)]
    words += [header_word(op, 1) | FLAG_LEFT for op in (Op.FP, Op.EB, Op.WG)]
    words += [header_word(Op.FP, 1) | FLAG_ZERO | 1 << 15, header_word(Op.WG, s.capacity + 1) | FLAG_ZERO]
    for word in words:
        if header_status(spec, word) == STATUS_OK:
            raise AssertionError(f"header 0x{word:08x} was meant to be refused")
    return [np.array([word], dtype=np.uint32) for word in words]


def random_ext(spec: CsbSpec, feature: str, rng: np.random.Generator) -> np.ndarray:
    """One random accepted transaction exercising ``feature`` (one of :data:`FEATURES`)."""
    b, s = ExtBuilder(spec, rng), spec
    mode = str(rng.choice(["any", "near", "small"]))
    order = "shuffled" if rng.random() < 0.5 else "row"
    if feature in ("zero", "g_first"):
        op = Op(int(rng.integers(0, 3))) if feature == "zero" else Op.WG
        words = b.flagged(op, int(rng.integers(0, s.capacity + 1)), zero=feature == "zero" or rng.random() < 0.3,
                          g_first=op == Op.WG and (feature == "g_first" or rng.random() < 0.5), mode=mode, order=order)
        return b.make.garble(words) if rng.random() < 1 / 3 else words
    if feature == "left":
        words = b.left(int(rng.integers(0, s.capacity + 1)))
        return b.make.garble(words) if rng.random() < 1 / 3 else words
    n = int(rng.integers(0, s.ew_capacity + 1))
    if feature == "shr":
        words, bits = b.shr(n), BUFFER_BITS
    else:
        words = b.select(n, mode, relu=rng.random() < 0.3) if feature == "select" else b.relu(n, mode)
        bits = s.acc_bits
    return _garble(words, bits, rng) if rng.random() < 1 / 3 else words


def count_ext(spec: CsbSpec, transactions) -> dict[str, int]:
    """Values checked per new feature: MACs of accepted ``ZERO`` and ``G_FIRST`` block ops, words of ``LEFT``
    updates, elements of SELECT, SHR and RELU."""
    counts = dict.fromkeys(FEATURES, 0)
    per_entry = spec.kk * spec.out_pos * spec.batch
    for words_in, words_out in transactions:
        header = int(words_in[0])
        if header_status(spec, header) != STATUS_OK or int(words_out[0]) != STATUS_OK:
            continue
        op, nnz = header & 3, header >> 16 & 0x1FF
        if header & FLAG_EW:
            if EwOp(op) in _COUNTED:  # LOSS: stimulus_loss counts its codes
                counts[_COUNTED[EwOp(op)]] += nnz
            continue
        if header & FLAG_ZERO:
            counts["zero"] += nnz * per_entry
        if header & FLAG_G_FIRST:
            counts["g_first"] += nnz * per_entry
        if header & FLAG_LEFT:
            counts["left"] += nnz * spec.kk
    return counts


def ext_transactions(spec: CsbSpec, *, target: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Directed cases, then random transactions of each feature until it has ``target`` values; pairs
    ``(words_in, words_out)``, reproducible from ``seed``."""
    rng = np.random.default_rng([seed, 40])
    pairs = [(w, expected_output(spec, w)) for w in directed_ext(spec, rng)]
    counts = count_ext(spec, pairs)
    for feature in FEATURES:
        while counts[feature] < target:
            words = random_ext(spec, feature, rng)
            pair = (words, expected_output(spec, words))
            pairs.append(pair)
            for key, value in count_ext(spec, [pair]).items():
                counts[key] += value
    return pairs


__all__ = ["FEATURES", "count_ext", "directed_ext", "ext_transactions", "random_ext", "refused_ext"]
