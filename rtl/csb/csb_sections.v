// csb_sections: the CSB PE's section order (docs/csb.md, input words): the state after `cur` for op `o`.
//
// Sections that hold no byte (nnz = 0) are skipped; after the last section the PE computes, or drains when
// nothing is computed. Element-wise ops: S_BW takes SELECT's v, then the status load S_EWST, after which
// S_EWS streams the last section (v; SELECT's z). WG with G_FIRST: index, G, X, DY. CARRY: no ACC (FP, EB)
// or G (WG) section. The state codes are csb_pe's. Purely combinational.
module csb_sections (
    input  wire [1:0] o,               // the op (FP, EB, WG, UPD; an element-wise op's number)
    input  wire [3:0] cur,             // the state now
    input  wire       empty,           // nnz == 0
    input  wire       refused,         // an index outside the block
    input  wire       e_w,             // an element-wise op
    input  wire       gf,              // G_FIRST
    input  wire       cy,              // CARRY
    output reg  [3:0] next
);
    localparam [3:0] S_HEAD = 4'd0, S_IDX = 4'd1, S_W8 = 4'd2, S_XB = 4'd3, S_DB = 4'd4, S_RB = 4'd5,
                     S_GW = 4'd6, S_BW = 4'd7, S_UG = 4'd8, S_RUN = 4'd9, S_SEND = 4'd10, S_EWST = 4'd11;
    localparam [1:0] OP_FP = 2'd0, OP_EB = 2'd1, OP_WG = 2'd2, OP_UPD = 2'd3, EW_SELECT = 2'd0;
    wire [3:0] finish = (o != OP_UPD && !e_w && !refused && !empty) ? S_RUN : S_SEND;
    always @* begin
        if (e_w)
            next = (cur == S_HEAD) ? (empty ? S_SEND : ((o == EW_SELECT && !cy) ? S_BW : S_EWST)) : S_EWST;
        else
            case (cur)
                S_HEAD:  next = !empty ? S_IDX : ((o == OP_EB) ? S_DB : ((o == OP_UPD) ? S_SEND : S_XB));
                S_IDX:   next = (o == OP_WG) ? (gf ? S_GW : S_XB) : ((o == OP_UPD) ? S_BW : S_W8);
                S_W8:    next = (o == OP_FP) ? S_XB : S_DB;
                S_XB:    next = (o == OP_FP) ? (cy ? finish : S_RB) : S_DB;
                S_DB:    next = (o == OP_EB) ? (cy ? finish : S_RB) : ((empty || gf || cy) ? finish : S_GW);
                S_GW:    next = gf ? S_XB : finish;
                S_BW:    next = S_UG;
                default: next = finish;
            endcase
    end
endmodule
