"""The sparse-CSB training PE (docs/csb.md): CSB storage, the exact integer golden model and its word stream."""

from codesign.pe.csb.format import CSBMatrix, encode
from codesign.pe.csb.golden import (
    backward_error,
    block_eb,
    block_fp,
    block_upd,
    block_wg,
    forward,
    round_into_buffer,
    weight_grad,
    weight_update,
)
from codesign.pe.csb.spec import CsbSpec

__all__ = [
    "CSBMatrix", "CsbSpec", "backward_error", "block_eb", "block_fp", "block_upd", "block_wg", "encode", "forward",
    "round_into_buffer", "weight_grad", "weight_update",
]
