"""Independent reference of the FP-MAC array PE for the golden level: plain loops over one transaction's words.

Written from docs/fpmac_array.md without the golden kernel: the header is
decoded with its own bit arithmetic, the sections are read word by word, and
every output is the chain of exact-rational FP-MACs of
:func:`codesign.numerics.reference.reference_mac` (a Fraction oracle, no
NumPy arithmetic), ``k`` ascending from ``C_in`` or +0; an element-wise
transaction (``K = 0``) selects or updates element by element.
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
    if k == 0:
        return _element_wise(words, header >> 29, m, n, fb, exp_bits=exp_bits, max_fb=max_fb, rounding=rounding,
                             max_m=max_m, max_n=max_n)
    relu, m = m >> 7, m & 0x7F  # a GEMM's M field: M in bits 6..0, ReLU on the results in bit 7
    if m == 0 or n == 0 or fb == 0:
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
            negative = acc >> (exp_bits + fb) & 1
            out.append(0 if relu and negative else acc << drop)
    return out


def _element_wise(words: list[int], op: int, m: int, n: int, fb: int, *, exp_bits: int, max_fb: int, rounding: str,
                  max_m: int, max_n: int) -> list[int]:
    """An element-wise transaction (K = 0; op 1 ReLU, 2 mask, 3 momentum SGD), element by element."""
    if op not in (1, 2, 3) or m == 0 or n == 0 or fb == 0:
        return [1]
    if m > max_m or n > max_n or fb > max_fb:
        return [2]
    width = 1 + exp_bits + max_fb
    drop = max_fb - fb
    fmt = FloatFormat(exp_bits=exp_bits, frac_bits=fb, rounding=rounding)
    codes = [(word & ((1 << width) - 1)) >> drop for word in words[1:]]
    scalars = 3 if op == 3 else 0
    sections = {1: 1, 2: 2, 3: 3}[op]
    count = m * n
    if len(codes) != scalars + sections * count:
        raise ValueError(f"transaction has {len(words)} words, the header announces {1 + scalars + sections * count}")

    def positive(code: int) -> bool:
        return code != 0 and not code >> (exp_bits + fb)

    section = [codes[scalars + index * count:scalars + (index + 1) * count] for index in range(sections)]
    if op == 1:
        results = [[x if positive(x) else 0 for x in section[0]]]
    elif op == 2:
        results = [[x if positive(z) else 0 for x, z in zip(section[0], section[1])]]
    else:
        wd, mu, step = codes[:3]
        params, velocities = [], []
        for g, p, v in zip(*section):
            velocity = reference_mac(mu, v, reference_mac(wd, p, g, fmt), fmt)
            params.append(reference_mac(step, velocity, p, fmt))
            velocities.append(velocity)
        results = [params, velocities]
    return [0] + [code << drop for result in results for code in result]
