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
    update_shift,
    weight_grad,
    weight_update,
)
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import build_transactions, count_macs
from codesign.pe.csb.stream import (
    Op,
    decode_output,
    encode_transaction,
    expected_output,
    parse_transaction,
)

__all__ = [
    "CSBMatrix", "CsbSpec", "Op", "backward_error", "block_eb", "block_fp", "block_upd", "block_wg",
    "build_transactions", "count_macs", "decode_output", "encode", "encode_transaction", "expected_output", "forward",
    "parse_transaction", "round_into_buffer", "update_shift", "weight_grad", "weight_update",
]
