"""Independent reference of the FP-MAC array PE for the golden level: plain loops over one transaction's words.

Written from docs/fpmac_array.md without the golden kernel: the header is
decoded with its own bit arithmetic, the sections are read word by word, and
every output is the chain of exact-rational FP-MACs of
:func:`codesign.numerics.reference.reference_mac` (a Fraction oracle, no
NumPy arithmetic), ``k`` ascending from ``C_in`` or +0.
"""

from __future__ import annotations

from codesign.numerics import FloatFormat
from codesign.numerics.reference import reference_mac


def reference_output(words_in, *, exp_bits: int, max_fb: int, rounding: str, max_m: int, max_n: int, max_k: int,
                     **_array_shape) -> list[int]:
    """The output words the PE must send for the input words ``words_in`` (status first)."""
    words = [int(w) for w in words_in]
    header = words[0]
    m, n, k = header & 0xFF, header >> 8 & 0xFF, header >> 16 & 0xFF
    fb = header >> 24 & 0x1F
    trans_a, trans_b, accumulate = header >> 29 & 1, header >> 30 & 1, header >> 31 & 1
    if m == 0 or n == 0 or k == 0 or fb == 0:
        return [1]
    if m > max_m or n > max_n or k > max_k or fb > max_fb:
        return [2]
    width = 1 + exp_bits + max_fb
    drop = max_fb - fb
    fmt = FloatFormat(exp_bits=exp_bits, frac_bits=fb, rounding=rounding)

    def code(word: int) -> int:  # (exp_bits, fb) code of a stream word: bits above the container and below fb go
        return (word & ((1 << width) - 1)) >> drop

    position = 1
    a = [[0] * k for _ in range(m)]
    b = [[0] * n for _ in range(k)]
    c = [[0] * n for _ in range(m)]
    for outer in range(k if trans_a else m):
        for inner in range(m if trans_a else k):
            i, kk = (inner, outer) if trans_a else (outer, inner)
            a[i][kk] = code(words[position])
            position += 1
    for outer in range(n if trans_b else k):
        for inner in range(k if trans_b else n):
            kk, j = (inner, outer) if trans_b else (outer, inner)
            b[kk][j] = code(words[position])
            position += 1
    if accumulate:
        for i in range(m):
            for j in range(n):
                c[i][j] = code(words[position])
                position += 1
    if position != len(words):
        raise ValueError(f"transaction has {len(words)} words, the header announces {position}")
    out = [0]
    for i in range(m):
        for j in range(n):
            acc = c[i][j]
            for kk in range(k):
                acc = reference_mac(a[i][kk], b[kk][j], acc, fmt)
            out.append(acc << drop)
    return out
