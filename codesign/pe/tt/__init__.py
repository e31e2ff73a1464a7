"""The TT processing elements (docs/tt_pe.md): tensor contractions of TT training on a fixed-point datapath.

PE1 contracts the last two axes of two 3-D operands (paper 003, Eq. (5)).
The contract (code ranges, saturating order, chunked word stream) is
:mod:`codesign.pe.tt.contract`; the golden kernels and their word streams are
:mod:`codesign.pe.tt.golden`.
"""

from codesign.pe.tt.contract import STATUS_BAD_HEADER, STATUS_OK, STATUS_TOO_LARGE, TtSpecBase
from codesign.pe.tt.golden import contract_last, last_core_operands, pe1_output, pe1_words
from codesign.pe.tt.spec import Tt1Spec

__all__ = ["STATUS_BAD_HEADER", "STATUS_OK", "STATUS_TOO_LARGE", "Tt1Spec", "TtSpecBase", "contract_last",
           "last_core_operands", "pe1_output", "pe1_words"]
