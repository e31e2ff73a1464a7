"""What the quantisers take: real numbers, and codes that are non-negative integers.

Why a check of its own: ``np.asarray(x, dtype=np.float64)`` accepts far more
than numbers. A complex array loses its imaginary part with only a
``ComplexWarning``, strings such as ``"1.5"`` are parsed, ``True`` becomes 1
and a float code is truncated to an integer pattern. Each would give a
plausible-looking but wrong result, so every public quantiser, encoder and
decoder passes its input through here first and refuses the rest with a
``TypeError`` naming the dtype (a ``ValueError`` for values a dtype allows
but a code cannot take). NumPy alone, as the rest of the package.
"""

from __future__ import annotations

import numpy as np

SEED_RANGE = (0, 2**32 - 1)  # what NumPy's and torch's generators take as a seed
REAL_KINDS = "iuf"  # signed and unsigned integers, floats (NumPy dtype kinds); bool is "b", complex "c"
CODE_KINDS = "iu"


def _array(x, what: str) -> np.ndarray:
    try:
        return np.asarray(x)
    except ValueError as error:  # a ragged nest of lists
        raise ValueError(f"{what} is not a rectangular array of numbers: {error}") from None


def real_array(x, *, what: str = "the input") -> np.ndarray:
    """``x`` as a float64 array when it holds real numbers (ints or floats); a ``TypeError`` otherwise."""
    array = _array(x, what)
    kind = array.dtype.kind
    if kind == "c":
        raise TypeError(f"{what} is complex ({array.dtype}): a number format holds real values only; pass "
                        "x.real (or abs(x)) if dropping the imaginary part is meant")
    if kind not in REAL_KINDS:
        raise TypeError(f"{what} must hold real numbers (ints or floats), got dtype {array.dtype}"
                        + (" (True and False are not numbers here)" if kind == "b" else ""))
    return array.astype(np.float64, copy=False)


def code_array(codes, *, what: str = "the codes") -> np.ndarray:
    """``codes`` as a uint64 array when it holds non-negative integers; ``TypeError``/``ValueError`` otherwise."""
    array = _array(codes, what)
    if array.dtype.kind not in CODE_KINDS:
        raise TypeError(f"{what} must be integer bit patterns, got dtype {array.dtype}")
    if array.dtype.kind == "i" and np.any(array < 0):
        raise ValueError(f"{what} must be non-negative bit patterns, got {int(array.min())}")
    return array.astype(np.uint64, copy=False)


def check_seed(value, name: str = "seed") -> int:
    """``value`` as a seed (an int in :data:`SEED_RANGE`, not a bool), or a ValueError naming ``name``."""
    low, high = SEED_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return value
