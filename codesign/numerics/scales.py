"""Power-of-two scales chosen from a tensor's mean magnitude (automatic scale selection).

A fixed-point value is ``code * 2**-frac_bits``; when every scale is a power
of two, moving between two scales is a bit shift. The rule here picks
``frac_bits`` so that the *mean* magnitude of the codes lands in one binade
``[2**(bits-2-headroom_bits), 2**(bits-1-headroom_bits))``: ``headroom_bits``
binades are left between the mean code and the largest code ``2**(bits-1)-1``
for the tail of the distribution (a small margin against overflow), and the
remaining bits resolve the bulk of the values.

Low-precision tensor training tracks the mean absolute value of every
activation, gradient and intermediate result and keeps it in a fixed range
by adjusting such a scale (paper 003, Sec. 3.3). Why the mean and not the
maximum: one outlier in a batch would otherwise cost every other value its
resolution; outliers saturate instead.
"""

from __future__ import annotations

import math

import numpy as np

from codesign.numerics.formats import FIXED_BITS, FIXED_FRAC_BITS

UNSET = -1000  # a tracker that has not measured anything yet (outside every valid frac_bits)


def check_headroom(bits: int, headroom_bits: int, *, name: str = "headroom_bits") -> None:
    """``headroom_bits`` must leave the mean code at least 1 (``0 <= headroom_bits <= bits - 2``)."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= FIXED_BITS[1]:
        raise ValueError(f"bits: must be an int in [2, {FIXED_BITS[1]}], got {bits!r}")
    if isinstance(headroom_bits, bool) or not isinstance(headroom_bits, int) or not 0 <= headroom_bits <= bits - 2:
        raise ValueError(f"{name}: must be an int in [0, {bits - 2}] for {bits}-bit codes, got {headroom_bits!r}")


def mean_code_range(bits: int, headroom_bits: int) -> tuple[float, float]:
    """The half-open interval ``[low, high)`` the mean |code| is kept in (code units, not values)."""
    check_headroom(bits, headroom_bits)
    low = 2.0 ** (bits - 2 - headroom_bits)
    return low, 2.0 * low


def mean_abs(values) -> float:
    """Mean |x| of ``values`` in float64 (0.0 for no values): what every scale tracker measures on a float tensor.

    One function for every side that must pick the same scale (the trainer's
    torch layer, the PE step's host): a float sum's last bits depend on its
    order (torch's vectorised, threaded cascade differs from NumPy's pairwise
    sum, and with the CPU), and a scale is ``floor(log2)`` of the mean, so
    two orders can pick scales a binade apart. The values are summed in C
    order from one contiguous float64 copy, so the result depends on the
    values and their count only, not on shape, strides or the caller.
    """
    flat = np.array(values, dtype=np.float64, order="C").reshape(-1)  # a copy of its own: |x| takes its place
    return float(np.abs(flat, out=flat).mean()) if flat.size else 0.0


def mean_abs_frac_bits(mean_abs: float, *, bits: int, headroom_bits: int, fallback: int) -> int:
    """Fraction bits that put ``mean_abs * 2**frac_bits`` in :func:`mean_code_range`.

    ``fallback`` is returned when there is nothing to measure (mean 0, NaN or
    inf), so a tracker keeps its previous scale on an all-zero tensor. The
    result is clipped to the fraction bits a :class:`FixedFormat` accepts.
    """
    check_headroom(bits, headroom_bits)
    if not math.isfinite(mean_abs) or mean_abs <= 0:
        return int(fallback)
    _, exponent = math.frexp(mean_abs)  # mean_abs = m * 2**exponent, m in [0.5, 1): floor(log2) = exponent - 1, exactly
    frac_bits = (bits - 2 - headroom_bits) - (exponent - 1)
    return max(FIXED_FRAC_BITS[0], min(FIXED_FRAC_BITS[1], frac_bits))


SCALE_RULES = ("exact", "tracked")
NO_MEAN = -1.0  # a running mean that has observed nothing yet (a mean |x| is never negative; NaN != NaN)


HAND_OFFS = ("float32", "exact")


def hand_off_float(hand_off: str) -> str:
    """The float type (``"float32"`` or ``"float64"``) a TT layer's output and input gradient leave it in.

    ``"exact"`` keeps the values as the PEs left them: a layer's output is
    its accumulators at their fraction bits plus the bias codes at theirs,
    its input gradient accumulators times the saturation mask, both in
    float64 (exact where a sum fits 53 bits, as 32-bit accumulators and a
    bias at most 21 binades finer do). The next layer rounds them once to
    its codes, as a PE's rounding stage can; ``"float32"`` rounds them to
    float32 first, as a float host passes them on, so the next layer's
    codes are rounded twice.
    """
    if hand_off not in HAND_OFFS:
        raise ValueError(f"hand_off must be one of {HAND_OFFS}, got {hand_off!r}")
    return "float64" if hand_off == "exact" else "float32"


def check_scale_rule(rule: str, momentum: float, *, prefix: str = "precision") -> None:
    """``rule`` one of :data:`SCALE_RULES`; ``momentum`` a float in [0, 1) (the weight of the past)."""
    if rule not in SCALE_RULES:
        raise ValueError(f"{prefix}.scale_rule: must be one of {SCALE_RULES}, got {rule!r}")
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0.0 <= momentum < 1.0:
        raise ValueError(f"{prefix}.scale_momentum: must be a float in [0, 1), got {momentum!r}")


def aim_scale(observed: float, *, rule: str, current: int, mean: float, momentum: float, bits: int,
              headroom_bits: int, update: bool) -> tuple[int, int, float]:
    """The fraction bits a tensor is rounded at now, those its tracker holds for the next step, and its running mean.

    ``observed`` is this tensor's mean |x| (:func:`mean_abs`, before rounding); ``current`` the tracker's
    fraction bits (:data:`UNSET` before the first sight) and ``mean`` its running mean (:data:`NO_MEAN` before the first).

    - ``"exact"``: the scale is aimed at this tensor itself (when ``update`` or unset), so the rounding must wait
      for the whole tensor; returns ``(aimed, aimed, mean)``.
    - ``"tracked"`` (paper 003, Sec. 3.3): the tensor is rounded at the scale aimed from *earlier* steps, so a PE
      can round its results as it sends them. With ``update`` the running mean takes this tensor's mean
      (``mean = momentum * mean + (1 - momentum) * observed``, float64) and the next step's scale is aimed at
      it. The first sight (an unset tracker) has no history: it is aimed at the tensor, as the exact rule is.

    A tensor of zeros (or a mean that is not finite) measures nothing: the mean and the scale stay. Every step is
    Python float arithmetic on the same inputs, so a host on a board and the desktop's trainers agree bit for bit.
    """
    if rule not in SCALE_RULES:
        raise ValueError(f"scale_rule must be one of {SCALE_RULES}, got {rule!r}")
    fallback = bits - 1 if current == UNSET else current
    if rule == "exact" or current == UNSET:
        if not update and current != UNSET:
            return current, current, mean
        aimed = mean_abs_frac_bits(observed, bits=bits, headroom_bits=headroom_bits, fallback=fallback)
        measured = math.isfinite(observed) and observed > 0
        return aimed, aimed, (observed if measured else mean) if rule == "tracked" else mean
    if not update or not (math.isfinite(observed) and observed > 0):
        return current, current, mean
    tracked = observed if mean < 0 else momentum * mean + (1.0 - momentum) * observed
    return current, mean_abs_frac_bits(tracked, bits=bits, headroom_bits=headroom_bits, fallback=current), tracked


__all__ = ["HAND_OFFS", "NO_MEAN", "SCALE_RULES", "UNSET", "aim_scale", "check_headroom", "check_scale_rule",
           "hand_off_float", "mean_abs", "mean_abs_frac_bits", "mean_code_range"]


def power_of_two_frac_bits(max_abs: float, bits: int) -> int:
    """Fraction bits that fit ``max_abs`` into a signed ``bits``-wide code (a 2**k scale, so rescaling is a shift)."""
    if not math.isfinite(max_abs) or max_abs <= 0:
        return bits - 1
    integer_bits = math.floor(math.log2(max_abs)) + 1  # bits left of the binary point, sign excluded
    return max(-64, min(64, bits - 1 - integer_bits))
