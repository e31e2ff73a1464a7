"""Real values to and from FP-MAC container words at one run-time FB, in as few NumPy passes as the format allows.

Why a codec of its own: a list step's host (``codesign.loops.fb_lists``)
encodes the batch and the loss gradient and decodes the logits every step,
a few thousand values each. Through :func:`codesign.numerics.encode` and
:func:`~codesign.pe.fpmac.golden.to_container` that is a dozen NumPy passes
and as many wrappers a call, most of the host's time at these sizes. Here a
value in the format's normal binades (or a zero) is rounded on its float64
bit pattern by one integer addition and lands in its container by one
shift; every other value (the format's subnormal range, beyond its largest
binade, NaN) goes through the general path, which also raises its errors.
Equal bit for bit to ``to_container(encode(x, fmt), fb, max_fb)`` and
``decode(from_container(w, fb, max_fb), fmt)`` (``tests/pe/fpmac/test_container_codec.py``).
"""

from __future__ import annotations

import numpy as np

from codesign.numerics import FloatFormat, decode, encode
from codesign.pe.fpmac.golden import from_container, to_container

_SIGN = np.int64(-(1 << 63))


class ContainerCodec:
    """Values <-> container words of ``fmt`` (its ``frac_bits`` is the FB) in a ``max_fb`` container."""

    def __init__(self, fmt: FloatFormat, *, max_fb: int) -> None:
        if not isinstance(fmt, FloatFormat):
            raise TypeError(f"fmt must be a FloatFormat, got {type(fmt).__name__}")
        if isinstance(max_fb, bool) or not isinstance(max_fb, int) or not fmt.frac_bits <= max_fb <= 50:
            raise ValueError(f"max_fb={max_fb!r} must be an int in [{fmt.frac_bits} (the FB), 50]")
        self.fmt, self.max_fb = fmt, max_fb
        self.width = 1 + fmt.exp_bits + max_fb  # the container's bits
        fb, shift = fmt.frac_bits, 52 - fmt.frac_bits
        self._low = np.int64(fmt.emin + 1023) << 52  # the smallest normal value's pattern
        self._span = np.uint64((fmt.emax + 1 - fmt.emin) << 52)  # patterns from there to the largest binade's end
        self._rebias = np.int64(1023 - fmt.bias) << 52
        self._shift = np.int64(shift)
        self._half = np.int64((1 << (shift - 1)) - 1) if fmt.rounding == "nearest_even" else \
            np.int64(1 << (shift - 1)) if fmt.rounding == "nearest_away" else np.int64(0)
        self._even = fmt.rounding == "nearest_even"
        # a rounding without random bits, and a saturating format (the general path raises on overflow)
        self._fast = fmt.rounding in ("nearest_even", "nearest_away", "toward_zero") and fmt.saturate
        self._max = np.int64(fmt.max_code)
        self._place = np.int64(max_fb - fb)  # the code's shift into its container
        self._sign_at = np.uint64(self.width - 1)
        self._magnitude = np.uint64((1 << (self.width - 1)) - 1)
        self._normal = np.uint64(1 << max_fb)  # a container whose exponent field is not 0
        self._kept = np.uint64(((1 << (fmt.exp_bits + max_fb)) - 1) ^ ((1 << (max_fb - fb)) - 1))
        self._to_double = np.int64(52 - max_fb)

    def words(self, values) -> np.ndarray:
        """Container words (uint64, shaped as ``values``) of real ``values`` rounded once to the format."""
        x = np.asarray(values)
        if not self._fast or x.dtype.kind not in "fiu":
            return self._general_words(x)
        flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
        bits = flat.view(np.int64)
        size = bits & ~_SIGN
        field = size - self._low  # the pattern's offset above the smallest normal value
        inside = field.view(np.uint64) < self._span
        field += self._low - self._rebias  # the pattern rebiased to the format's exponent
        if self._even:
            odd = field >> self._shift
            odd &= 1
            odd += self._half
            field += odd
        else:
            field += self._half
        field >>= self._shift
        np.clip(field, 0, self._max, out=field)  # a zero's is negative; a carry past the top clips
        field <<= self._place
        out = field.view(np.uint64)
        sign = bits.view(np.uint64) >> np.uint64(63)
        sign <<= self._sign_at
        out |= sign
        if not inside.all():
            rest = ~inside & (size != 0)
            if rest.any():
                out[rest] = self._general_words(flat[rest])
        return out.reshape(x.shape)

    def values(self, words) -> np.ndarray:
        """Exact float64 values of container ``words`` (their bits below the FB ignored)."""
        w = np.asarray(words)
        if w.dtype.kind not in "ui" or (w.dtype.kind == "i" and w.size and w.min() < 0):
            return self._general_values(w)
        w = w.astype(np.uint64, copy=False)
        if w.size and int(w.max()) >> self.width:
            return self._general_values(w)  # which names the bad word
        magnitude = w & self._magnitude
        normal = magnitude >= self._normal
        patterns = ((magnitude & self._kept).view(np.int64) << self._to_double) + self._rebias
        patterns = np.where(normal, patterns, 0) | ((w >> self._sign_at).view(np.int64) << 63)
        out = patterns.view(np.float64)
        subnormal = ~normal & (magnitude >> np.uint64(self.max_fb - self.fmt.frac_bits) != 0)
        if subnormal.any():
            out[subnormal] = self._general_values(w[subnormal])
        return out

    def _general_words(self, x) -> np.ndarray:
        return to_container(encode(np.asarray(x, dtype=np.float64), self.fmt), self.fmt.frac_bits, max_fb=self.max_fb)

    def _general_values(self, words) -> np.ndarray:
        return decode(from_container(words, self.fmt.frac_bits, max_fb=self.max_fb), self.fmt)


__all__ = ["ContainerCodec"]
