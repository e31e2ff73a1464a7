"""The FP-MAC array PE (docs/fpmac_array.md): an accumulating GEMM on rows x cols FB-configurable FP-MACs.

``C = A . B (+ C_in)`` per transaction, every output accumulated in ``k``
order by the FP-MAC of :mod:`codesign.pe.fpmac` in the format
``(exp_bits, fb)``, ``fb`` chosen per transaction. The golden GEMM on
container words is :func:`codesign.pe.fpmac_array.golden.gemm`.
"""

from codesign.pe.fpmac_array.contract import (
           STATUS_BAD_HEADER,
           STATUS_OK,
           STATUS_TOO_LARGE,
           Header,
)
from codesign.pe.fpmac_array.golden import gemm, output, spec_gemm, words
from codesign.pe.fpmac_array.spec import FpmacArraySpec

__all__ = ["STATUS_BAD_HEADER", "STATUS_OK", "STATUS_TOO_LARGE", "FpmacArraySpec", "Header", "gemm", "output",
           "spec_gemm", "words"]
