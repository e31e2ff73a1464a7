"""Stimulus for the FP-MAC PE: random containers plus directed corner cases, with golden results.

Random operands are drawn over all codes (every exponent equally likely), so
subnormals, overflow and cancellation all occur; the directed set pins the
cases a uniform draw rarely hits exactly: signed zeros, ties, saturation,
exact cancellation, fb clamping and garbage below the active fb.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.numerics import FloatFormat, decode, encode
from codesign.pe.fpmac.golden import clamp_fb, golden_container_mac, to_container
from codesign.pe.fpmac.spec import FpmacSpec

COLUMNS = ("a", "b", "c", "fb", "expected")


@dataclass(frozen=True)
class Stimulus:
    """Container words a, b, c, run-time fb and the golden result, all uint64 arrays of one length."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    fb: np.ndarray
    expected: np.ndarray

    def __len__(self) -> int:
        return int(self.a.size)

    def columns(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in COLUMNS}

    @staticmethod
    def concat(parts: list[Stimulus]) -> Stimulus:
        return Stimulus(*(np.concatenate([getattr(p, name) for p in parts]) for name in COLUMNS))


def with_golden(spec: FpmacSpec, a, b, c, fb) -> Stimulus:
    a, b, c, fb = (np.asarray(v, dtype=np.uint64).reshape(-1) for v in np.broadcast_arrays(a, b, c, fb))
    expected = golden_container_mac(a, b, c, fb, exp_bits=spec.exp_bits, max_fb=spec.max_fb, rounding=spec.rounding)
    return Stimulus(a, b, c, fb, expected)


def random_stimulus(spec: FpmacSpec, fb: int, count: int, rng: np.random.Generator) -> Stimulus:
    """``count`` random MACs at run-time ``fb``: codes uniform over the ``(exp_bits, fb)`` format."""
    active = int(clamp_fb(fb, spec.max_fb))
    width = 1 + spec.exp_bits + active
    words = [to_container(rng.integers(0, 1 << width, count, dtype=np.uint64), active, max_fb=spec.max_fb) for _ in range(3)]
    # A third of the accumulators get the product's exponent so that additions cancel and round.
    exp_mask = np.uint64((1 << spec.exp_bits) - 1)
    bias = (1 << (spec.exp_bits - 1)) - 1
    exponents = [((w >> np.uint64(spec.max_fb)) & exp_mask).astype(np.int64) for w in words[:2]]
    product_exp = np.clip(exponents[0] + exponents[1] - bias, 0, int(exp_mask)).astype(np.uint64)
    sign_and_fraction = words[2] & ~(exp_mask << np.uint64(spec.max_fb))
    near = rng.random(count) < 1 / 3
    words[2] = np.where(near, sign_and_fraction | (product_exp << np.uint64(spec.max_fb)), words[2])
    return with_golden(spec, *words, np.full(count, fb, dtype=np.uint64))


def directed_stimulus(spec: FpmacSpec, fb: int) -> Stimulus:
    """Corner cases at run-time ``fb`` (see the module docstring)."""
    active = int(clamp_fb(fb, spec.max_fb))
    fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=active, rounding=spec.rounding)
    sign = np.uint64(1 << (fmt.width - 1))
    ulp_one = 2.0**-active

    def code(value: float) -> int:
        return int(encode(np.array([value]), fmt)[0])

    pos_zero, neg_zero = 0, int(sign)
    max_code, min_sub = fmt.max_code, 1
    max_sub = (1 << active) - 1
    min_norm = 1 << active
    one, two, half = code(1.0), code(2.0), code(0.5)
    cases: list[tuple[int, int, int]] = []
    # signed zeros: zero products and zero sums in every sign combination
    for x in (pos_zero, neg_zero):
        for y in (pos_zero, neg_zero):
            for z in (pos_zero, neg_zero):
                cases.append((x, y, z))
                cases.append((x, one, z))
    # sign combinations of a normal product and accumulator
    for sa in (0, int(sign)):
        for sb in (0, int(sign)):
            for sc in (0, int(sign)):
                cases.append((two | sa, code(1.5) | sb, one | sc))
    # subnormals: as operands, products that underflow to subnormals and to zero
    cases += [(min_sub, one, pos_zero), (max_sub, one, min_sub), (max_sub, two, pos_zero), (min_sub, half, pos_zero),
              (min_sub, min_sub, pos_zero), (min_sub | int(sign), min_sub, pos_zero), (max_sub, max_sub, min_norm),
              (min_norm, half, pos_zero), (min_norm, one, int(sign) | min_sub), (max_sub, one, max_sub)]
    # exact ties in the adder: 1 + ulp/2 and 1 + 3ulp/2 (RNE goes down, then up), and their negatives
    for base in (one, code(1.0 + ulp_one)):
        for s in (0, int(sign)):
            cases.append((base | s, one, code(ulp_one / 2) | s))
    if active >= 2:
        # ties created in the multiplier: 1.5 * (1 + ulp) = 1.5 + ulp + ulp/2, and 1.5 * (1 + 3 ulp)
        cases.append((code(1.0 + ulp_one), code(1.5), pos_zero))
        cases.append((code(1.0 + 3 * ulp_one), code(1.5), pos_zero))
    # overflow and saturation
    cases += [(max_code, max_code, pos_zero), (max_code, one, max_code), (max_code | int(sign), one, max_code | int(sign)),
              (max_code, two, int(sign)), (max_code, one, int(sign) | max_code), (code(fmt.max_value / 2), two, pos_zero)]
    # exact cancellation to +0 in every sign arrangement
    for s in (0, int(sign)):
        cases.append((two | s, code(1.5), code(3.0) | (int(sign) ^ s)))
        cases.append((max_code | s, one, max_code | (int(sign) ^ s)))
    # near cancellation: the result loses many leading bits
    cases.append((code(1.0 + ulp_one), one, one | int(sign)))
    a, b, c = (to_container(np.array(column, dtype=np.uint64), active, max_fb=spec.max_fb) for column in zip(*cases))
    stimulus = [with_golden(spec, a, b, c, fb)]
    # garbage below the active fb is ignored (container bits masked on input)
    if active < spec.max_fb:
        junk = np.uint64((1 << (spec.max_fb - active)) - 1)
        stimulus.append(with_golden(spec, a | junk, b | junk, c | junk, fb))
    return Stimulus.concat(stimulus)


def fb_clamp_stimulus(spec: FpmacSpec, rng: np.random.Generator, count: int = 64) -> Stimulus:
    """Run-time fb outside [1, max_fb]: 0 acts as 1, the largest port values as max_fb."""
    out_of_range = [0, (1 << spec.fb_bits) - 1] if (1 << spec.fb_bits) - 1 > spec.max_fb else [0]
    parts = []
    for fb in out_of_range:
        words = [rng.integers(0, 1 << spec.width, count, dtype=np.uint64) for _ in range(3)]
        parts.append(with_golden(spec, *words, np.full(count, fb, dtype=np.uint64)))
    return Stimulus.concat(parts)


def default_fb_values(spec: FpmacSpec, count: int = 6) -> list[int]:
    """``count`` run-time fb values spread evenly over [min(3, max_fb), max_fb]."""
    low = min(3, spec.max_fb)
    return sorted({int(round(v)) for v in np.linspace(low, spec.max_fb, count)})


def build_stimulus(spec: FpmacSpec, *, fb_values: list[int] | None = None, random_per_fb: int = 10_000, seed: int = 2024) -> Stimulus:
    """The verification set: random MACs and the directed set per fb, fb = 1 and 2 briefly, and the fb-clamp cases."""
    rng = np.random.default_rng(seed)
    parts = []
    chosen = fb_values or default_fb_values(spec)
    for fb in chosen:
        parts.append(random_stimulus(spec, fb, random_per_fb, rng))
        parts.append(directed_stimulus(spec, fb))
    # the narrowest widths are the least forgiving: always cover fb = 1 and 2 briefly
    for fb in sorted({1, 2} & set(range(1, spec.max_fb + 1)) - set(chosen)):
        parts.append(random_stimulus(spec, fb, min(random_per_fb, 1000), rng))
        parts.append(directed_stimulus(spec, fb))
    parts.append(fb_clamp_stimulus(spec, rng))
    return Stimulus.concat(parts)


def describe(value_words: np.ndarray, fb: int, spec: FpmacSpec) -> np.ndarray:
    """Container words to float64 values at run-time fb (for reports)."""
    fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=fb)
    return decode(np.asarray(value_words, dtype=np.uint64) >> np.uint64(spec.max_fb - fb), fmt)
