"""The TT processing elements (docs/tt_pe.md): tensor contractions of TT training on a fixed-point datapath.

PE1 contracts the last two axes of two 3-D operands (paper 003, Eq. (5)),
PE2 one axis that is not the last (Eq. (6)), PE3 forms the outer products
of the dense weight gradient (App. A.2).
The contract (code ranges, saturating order, chunked word stream) is
:mod:`codesign.pe.tt.contract`; the golden kernels and their word streams are
:mod:`codesign.pe.tt.golden`.
"""

from codesign.pe.tt.contract import STATUS_BAD_HEADER, STATUS_OK, STATUS_TOO_LARGE, TtOperandSpec, TtSpecBase
from codesign.pe.tt.golden import (contract_last, contract_middle, inner_core_operands, kernel, last_core_operands,
                                   outer, output, words)
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec

__all__ = ["STATUS_BAD_HEADER", "STATUS_OK", "STATUS_TOO_LARGE", "Tt1Spec", "Tt2Spec", "Tt3Spec", "TtOperandSpec",
           "TtSpecBase", "contract_last", "contract_middle", "inner_core_operands", "kernel", "last_core_operands",
           "outer", "output", "words"]
