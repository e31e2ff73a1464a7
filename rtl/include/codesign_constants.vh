// codesign_constants.vh -- the stream contract's word width and status codes.
// Generated from codesign/hw/constants.py by `python -m codesign.hw.constants_gen`; do not edit.
`ifndef CODESIGN_CONSTANTS_VH
`define CODESIGN_CONSTANTS_VH

`define CODESIGN_WORD_BITS 32
`define CODESIGN_STATUS_BITS 2

`define CODESIGN_CSB_STATUS_OK 2'd0
`define CODESIGN_CSB_STATUS_BAD_HEADER 2'd1
`define CODESIGN_CSB_STATUS_NNZ 2'd2
`define CODESIGN_CSB_STATUS_INDEX 2'd3

`define CODESIGN_FPMAC_ARRAY_STATUS_OK 2'd0
`define CODESIGN_FPMAC_ARRAY_STATUS_BAD_HEADER 2'd1
`define CODESIGN_FPMAC_ARRAY_STATUS_TOO_LARGE 2'd2

`define CODESIGN_TT_STATUS_OK 2'd0
`define CODESIGN_TT_STATUS_BAD_HEADER 2'd1
`define CODESIGN_TT_STATUS_TOO_LARGE 2'd2

`endif  // CODESIGN_CONSTANTS_VH
