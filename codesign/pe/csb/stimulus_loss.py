"""Verification stimulus for the CSB PE's LOSS (element-wise op 3, :mod:`codesign.pe.csb.loss`): directed corner
cases plus random transactions until ``target`` codes are checked.

What the directed set pins:

* the maximum's ties (every logit equal), one class (every code 0), the most classes the PE takes;
* logits at the ``acc_bits`` ends (``max - z`` up to ``2^acc_bits - 1``, the exponent's integer part far past 17),
  exponent shifts 0 and 31;
* the reciprocal and the final rounding: a tie to even (four equal classes at ``recip_shift`` 33 give 0.5 and
  -1.5), ``recip_shift`` 48 (both saturations), 0, 31 and 32 (codes 0 or near it); batches 1, 3, a power of two
  and 4095;
* lanes without a sample, and garbage above ``acc_bits`` in the logits' words (the PE ignores it);
* status 3: a reserved bit of ``P``, a ``recip_shift`` of 49 or 63, a batch of 0, a label equal to the classes,
  ``0x7FFFFFFF`` and ``0xFFFFFFFE``; status 1 and 2: LOSS with ``ZERO``, ``HOLD``, ``CARRY``, ``S2`` or ``K1``, no
  classes, more
  classes than the PE takes.
"""

from __future__ import annotations

import numpy as np

from codesign.numerics.loss_grad import NO_SAMPLE
from codesign.pe.csb.loss import max_classes, param_word
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import (FLAG_CARRY, FLAG_EW, FLAG_HOLD, FLAG_K1, FLAG_S2, FLAG_ZERO, STATUS_OK, EwOp,
                                    encode_loss, expected_output, header_status, header_word)


def _garble(words: np.ndarray, spec: CsbSpec, rng: np.random.Generator) -> np.ndarray:
    """Random bits above ``acc_bits`` in the logits' words (the last ``classes * batch``)."""
    if spec.acc_bits >= 32:
        return words
    words = words.copy()
    count = int(words[0]) >> 16 & 0x1FF
    tail = slice(words.size - count * spec.batch, words.size)
    noise = rng.integers(0, 1 << 32, size=count * spec.batch, dtype=np.uint64).astype(np.uint32)
    high = np.uint32(((1 << 32) - 1) ^ ((1 << spec.acc_bits) - 1))
    words[tail] = (words[tail] & ~high) | (noise & high)
    return words


def _labels(spec: CsbSpec, classes: int, rng: np.random.Generator, empty: float = 0.15) -> np.ndarray:
    labels = rng.integers(0, classes, size=spec.batch)
    labels[rng.random(spec.batch) < empty] = NO_SAMPLE
    return labels


def random_loss(spec: CsbSpec, rng: np.random.Generator) -> np.ndarray:
    """One random accepted LOSS: logits of a random spread (from every ``e`` alike to most of them 0), random
    shifts, batch and labels (some lanes without a sample); a third with garbage above ``acc_bits``."""
    classes = int(rng.integers(1, max_classes(spec) + 1))
    spread = int(rng.integers(0, spec.acc_bits))
    logits = rng.integers(-(1 << spread), (1 << spread) + 1, size=(classes, spec.batch))
    logits = np.clip(logits, spec.acc_min, spec.acc_max)
    words = encode_loss(spec, logits, _labels(spec, classes, rng), exp_shift=int(rng.integers(0, 32)),
                        recip_shift=int(rng.integers(0, 49)), batch=int(rng.integers(1, 4096)))
    return _garble(words, spec, rng) if rng.random() < 1 / 3 else words


def directed_loss(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """Input words of the directed cases (see the module docstring)."""
    most, lanes = max_classes(spec), spec.batch
    out = []

    def add(logits, labels=None, *, exp_shift=8, recip_shift=45, batch=64, **raw):
        logits = np.asarray(logits).reshape(-1, lanes)
        labels = _labels(spec, logits.shape[0], rng) if labels is None else np.asarray(labels)
        out.append(encode_loss(spec, logits, labels, exp_shift=exp_shift, recip_shift=recip_shift, batch=batch, **raw))

    for classes in sorted({1, 2, 4, most}):
        add(np.zeros((classes, lanes), np.int64))
    if most >= 4:
        add(np.zeros((4, lanes), np.int64), np.zeros(lanes, np.int64), recip_shift=33, batch=1)  # 0.5, -1.5
    ends = np.resize(np.array([spec.acc_max, spec.acc_min, 0, -1, 1]), (min(most, 5), lanes))
    for exp_shift in (0, 31):
        add(ends, exp_shift=exp_shift, recip_shift=44, batch=1)
    spread = rng.integers(-2000, 2001, size=(min(most, 10), lanes))
    for recip_shift in (0, 31, 32, 48):
        add(spread, recip_shift=recip_shift, batch=1)
    for batch in (1, 3, 64, 4095):
        add(spread, batch=batch, recip_shift=48)
    add(spread, np.full(lanes, NO_SAMPLE))
    out.append(_garble(out[-2], spec, rng))
    classes = spread.shape[0]
    bad_labels = [classes, 0x7FFF_FFFF, 0xFFFF_FFFE]
    for label in bad_labels:
        labels = _labels(spec, classes, rng, empty=0.0)
        labels[rng.integers(0, lanes)] = label
        add(spread, labels, check=False)
    good = param_word(recip_shift=45, batch=64)
    for param in (good | 1 << 6, good | 1 << 31, good & 0xFFFF, good & ~0x3F | 49, good | 0x3F):
        add(spread, param=param)  # reserved bits, a batch of 0, recip_shift 49 and 63
    return out + refused_loss(spec)


def refused_loss(spec: CsbSpec) -> list[np.ndarray]:
    """LOSS headers refused with status 1 or 2 (each its whole transaction)."""
    words = [header_word(EwOp.LOSS, 1, ew=True) | flag for flag in (FLAG_ZERO, FLAG_HOLD, FLAG_CARRY, FLAG_S2,
                                                                      FLAG_K1)]
    words += [header_word(EwOp.LOSS, 0, ew=True), header_word(EwOp.LOSS, max_classes(spec) + 1, ew=True)]
    for word in words:
        if header_status(spec, word) == STATUS_OK:
            raise AssertionError(f"LOSS header 0x{word:08x} was meant to be refused")
    return [np.array([word], dtype=np.uint32) for word in words]


def count_loss(spec: CsbSpec, transactions) -> int:
    """Codes checked: the elements of LOSS transactions answered with status 0."""
    total = 0
    for words_in, words_out in transactions:
        header = int(words_in[0])
        if header & FLAG_EW and header & 3 == EwOp.LOSS and header & ~0x1FF_1F23 == 0 \
                and int(words_out[0]) == STATUS_OK:
            total += (header >> 16 & 0x1FF) * spec.batch
    return total


def loss_transactions(spec: CsbSpec, *, target: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Directed cases, then random LOSS transactions until ``target`` codes are checked; pairs
    ``(words_in, words_out)``, reproducible from ``seed``. A build without the LOSS unit: its refused headers."""
    if not spec.loss:
        return [(w, expected_output(spec, w)) for w in refused_loss(spec)]
    rng = np.random.default_rng([seed, 41])
    pairs = [(w, expected_output(spec, w)) for w in directed_loss(spec, rng)]
    checked = count_loss(spec, pairs)
    while checked < target:
        words = random_loss(spec, rng)
        pairs.append((words, expected_output(spec, words)))
        checked += count_loss(spec, pairs[-1:])
    return pairs


__all__ = ["count_loss", "directed_loss", "loss_transactions", "random_loss", "refused_loss"]
