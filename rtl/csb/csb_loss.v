// csb_loss: the CSB PE's LOSS transaction after its header (docs/csb.md, "The loss on the PE"): the logits'
// accumulators in, the softmax cross-entropy gradient's 8-bit codes out, bit for bit as
// codesign.numerics.loss_grad.loss_grad_codes.
//
//   load  P (recip_shift, the batch n), Y (a label a lane; 0xFFFFFFFF: no sample) and V (classes rows of BATCH
//         accumulators), a beat a cycle; V goes into a RAM and each lane's maximum is kept as it streams in.
//   E     one element a cycle, three stages: read V; d = max - v (capped at 2^27) times log2(e) (two DSP slices);
//         e = table(u mod 256) >> (u / 256) with u = that product >> exp_shift, written over V, and S += e.
//   Q, R  a restoring divider, a quotient bit a cycle: Qn = floor(2^recip_shift / n) (49 cycles: dividend bits 48
//         down to 0), then for each lane r = floor(Qn / S) (33 cycles; equal to floor(2^recip_shift / (S * n))).
//   ST    the status loaded into the output register (status 3 goes out alone, right after the load).
//   O     one element a cycle while the output register is free or given, three stages: read e;
//         w = (e - [c == y] * S) * r (two DSP slices); round_half_to_even(w / 2^32) saturated to 8 bits,
//         sign-extended into the output beat, which loads the register at its last part.
//
// The PE's output register is csb_pe's: this module loads it (`load`, `beat`) when it is free (`out_free`) and says
// `done` the cycle the last beat is given. Stall-free cycles: codesign.pe.csb.cycles.loss_cycles.
`include "codesign_constants.vh"  // status codes

/* verilator lint_off WIDTHEXPAND */
/* verilator lint_off WIDTHTRUNC */
module csb_loss #(
    parameter BATCH       = 16,        // lanes (samples a transaction), a multiple of PARTS
    parameter ACC_BITS    = 32,        // accumulator width (bits), 16..32
    parameter STREAM_BITS = 32,        // stream beat
    parameter CAP         = 256        // elements (classes * BATCH) at most
) (
    input  wire                   clk,
    input  wire                   rst,
    input  wire                   start,        // an accepted LOSS header is taken this cycle
    input  wire [5:0]             classes_in,   // its nnz field
    input  wire [4:0]             exp_shift_in, // its shift field
    input  wire [STREAM_BITS-1:0] in_data,
    input  wire                   in_valid,
    output wire                   in_ready,
    input  wire                   out_free,     // csb_pe's output register may be loaded this cycle
    input  wire                   out_given,    // ... its word is taken this cycle
    output wire                   load,         // load the output register with `beat` this cycle
    output wire [STREAM_BITS-1:0] beat,
    output wire                   done
);
`include "codesign_loss_table.vh"
    localparam PARTS = STREAM_BITS / 32;
    localparam LP    = (PARTS == 4) ? 2 : ((PARTS == 2) ? 1 : 0);
    localparam EW    = (ACC_BITS > 17) ? ACC_BITS : 17;         // a stored element: v, then e
    localparam ROWS  = (CAP + PARTS - 1) / PARTS;
    localparam RAW   = (ROWS <= 2) ? 1 : $clog2(ROWS);
    localparam [31:0] P_FIELDS = 32'h0FFF003F;                 // recip_shift [5:0], n [27:16]

    localparam [3:0] L_IDLE = 4'd0, L_P = 4'd1, L_Y = 4'd2, L_V = 4'd3, L_ST = 4'd4, L_E = 4'd5, L_Q = 4'd6,
                     L_R = 4'd7, L_O = 4'd8, L_END = 4'd9;
    reg [3:0]  state;
    reg [5:0]  classes;
    reg [4:0]  exp_shift;
    reg [5:0]  recip_shift;
    reg [11:0] n;
    reg        bad;
    reg [4:0]  lbl [0:BATCH-1];
    reg        nos [0:BATCH-1];                        // a lane without a sample
    // per-lane words in distributed RAM (one write port each): S (2^16 .. 32 * 2^16), r (2^15 .. 2^32), and the
    // maxima in PARTS banks (lane l in bank l mod PARTS, word l / PARTS: a beat writes one word a bank)
    reg [21:0] sm [0:BATCH-1];
    reg [32:0] rc [0:BATCH-1];

    // issue counters of a pass (the element whose address is presented): row, lane, element
    reg [5:0]  row;
    reg [4:0]  lane;
    reg [9:0]  el;
    reg        issuing;                                // E, O: elements are still to be presented
    wire       issue_last = (row == classes - 6'd1) && (lane == BATCH - 1);

    assign in_ready = (state == L_P) || (state == L_Y) || (state == L_V);
    wire take = in_ready && in_valid;

    // ---- the element RAM: PARTS lanes a row, element i at row i / PARTS, lane i mod PARTS
    reg  [PARTS-1:0]    ram_we;
    reg  [RAW-1:0]      ram_waddr;
    reg  [EW*PARTS-1:0] ram_wdata;
    wire [EW*PARTS-1:0] ram_q;
    reg  [RAW-1:0]      ram_raddr;
    csb_ram #(.LANES(PARTS), .LANE_BITS(EW), .DEPTH(ROWS), .AW(RAW)) u_ram (
        .clk(clk), .we(ram_we), .waddr(ram_waddr), .wdata(ram_wdata), .raddr(ram_raddr), .rdata(ram_q)
    );

    // ---- E: stage 1 (the element read), stage 2 (its product)
    reg        e1_valid, e1_last, e1_first;
    reg [4:0]  e1_lane;
    reg [9:0]  e1_el;
    reg        e2_valid, e2_last, e2_first;
    reg [4:0]  e2_lane;
    reg [9:0]  e2_el;
    reg [48:0] e2_prod;
    wire [EW-1:0] e1_word = ram_q >> (EW * (e1_el & (PARTS - 1)));
    wire signed [ACC_BITS-1:0] e1_v = e1_word[ACC_BITS-1:0];
    wire signed [ACC_BITS-1:0] mx_lane;                // the maximum of e1's lane (the banks below)
    wire signed [ACC_BITS:0]   e1_d = mx_lane - e1_v;  // 0 .. 2^acc_bits - 1
    wire [32:0]  d_u = $unsigned($signed({{(32-ACC_BITS){1'b0}}, e1_d}));   // as 33 bits (it is not negative)
    // d past 2^27 gives e = 0 at every exp_shift, as 2^27 does (2^27 * LOG2E_Q16 / 2^31 > 17 * 256): 28 bits
    wire [27:0]  d_c = (d_u >= 33'd1 << 27) ? 28'd1 << 27 : d_u[27:0];
    // d * LOG2E_Q16 on DSP slices (two: 28 x 17 bits): a board runs out of LUT before DSP
    wire [48:0]  d_prod = d_c * 17'd`CODESIGN_LOSS_LOG2E_Q16;
    wire [48:0]  e2_u = e2_prod >> exp_shift;
    wire         e2_zero = |e2_u[48:13] || (e2_u[12:8] >= `CODESIGN_LOSS_EXP_LIMIT);
    wire [16:0]  e2_e = e2_zero ? 17'd0 : (codesign_exp_table(e2_u[7:0]) >> e2_u[12:8]);

    // ---- Q, R: the restoring divider
    reg  [48:0] dv_num;                                // dividend bits still to shift in, top first
    reg  [48:0] dv_quo;
    reg  [22:0] dv_rem;
    reg  [21:0] dv_den;
    reg  [5:0]  dv_left;                               // iterations left
    reg  [48:0] qn;                                    // floor(2^48 / n)
    wire [23:0] dv_rs = {dv_rem, dv_num[48]};
    wire        dv_ge = dv_rs >= {2'b00, dv_den};
    wire [23:0] dv_rn = dv_ge ? dv_rs - {2'b00, dv_den} : dv_rs;
    wire [48:0] dv_qn = {dv_quo[47:0], dv_ge};

    // ---- O: stage 1 (the element read), stage 2 (its product); en: the output register is free
    reg        o1_valid, o1_last;
    reg [4:0]  o1_lane;
    reg [5:0]  o1_row;
    reg [9:0]  o1_el;
    reg        o2_valid, o2_last, o2_nos;
    reg [9:0]  o2_el;
    reg signed [51:0] o2_w;
    reg [STREAM_BITS-1:0] o_beat;                      // the codes of the beat being filled
    wire       en = out_free;
    wire [EW-1:0] o1_word = ram_q >> (EW * (o1_el & (PARTS - 1)));
    wire        o1_hit = !nos[o1_lane] && (lbl[o1_lane] == o1_row[4:0]);
    wire signed [22:0] o1_diff = $signed({6'd0, o1_word[16:0]}) - (o1_hit ? $signed({1'b0, sm[o1_lane]}) : 23'sd0);
    // w = diff * r as two products of 23 x 18 bits, a DSP slice each
    wire [32:0]        o1_r  = rc[o1_lane];
    wire signed [40:0] o1_lo = o1_diff * $signed({1'b0, o1_r[16:0]});
    wire signed [39:0] o1_hi = o1_diff * $signed({1'b0, o1_r[32:17]});
    wire signed [55:0] o1_w  = (o1_hi <<< 17) + o1_lo;
    // round_half_to_even(w / 2^32), saturated to 8 bits: a fixed shift, no shifter
    wire signed [19:0] o_floor = o2_w[51:32];
    wire        o_up = (o2_w[31:0] > 32'h80000000) || (o2_w[31:0] == 32'h80000000 && o2_w[32]);
    wire signed [20:0] o_round = o_floor + $signed({1'b0, o_up});
    wire signed [7:0] o_code = o2_nos ? 8'sd0 : ((o_round > 21'sd127) ? 8'sd127
                                             : ((o_round < -21'sd128) ? -8'sd128 : o_round[7:0]));
    wire signed [31:0] o_code32 = o_code;
    wire [STREAM_BITS-1:0] o_full = o_beat | ({{(STREAM_BITS-32){1'b0}}, o_code32} << (32 * (o2_el & (PARTS - 1))));

    wire st_load = (state == L_ST) && out_free;       // the status
    wire o_load  = (state == L_O) && en && o2_valid && ((o2_el & (PARTS - 1)) == PARTS - 1);  // a beat of codes
    assign load = st_load || o_load;
    assign beat = st_load ? {{(STREAM_BITS-2){1'b0}}, bad ? `CODESIGN_CSB_STATUS_INDEX : `CODESIGN_CSB_STATUS_OK}
                          : o_full;
    assign done = (state == L_END) && out_given;

    // ---- the maxima: PARTS banks of BATCH / PARTS words, a word a bank written each beat of V
    localparam MB = BATCH / PARTS;
    wire [ACC_BITS*PARTS-1:0] mx_banks;                // bank q's word of e1's lane
    genvar g;
    generate
        for (g = 0; g < PARTS; g = g + 1) begin : g_mx
            reg signed [ACC_BITS-1:0] mem [0:MB-1];
            wire signed [ACC_BITS-1:0] v = in_data[32*g +: ACC_BITS];
            wire [4:0] at = lane >> LP;
            always @(posedge clk)
                if (state == L_V && take && (row == 6'd0 || v > mem[at])) mem[at] <= v;
            assign mx_banks[ACC_BITS*g +: ACC_BITS] = mem[e1_lane >> LP];
        end
    endgenerate
    assign mx_lane = mx_banks >> (ACC_BITS * (e1_lane & (PARTS - 1)));

    // ---- the RAM's ports
    integer q;
    always @* begin
        ram_we    = {PARTS{1'b0}};
        ram_waddr = {RAW{1'b0}};
        ram_wdata = {(EW*PARTS){1'b0}};
        if (state == L_V && take) begin
            ram_we    = {PARTS{1'b1}};
            ram_waddr = el;                            // L_V: el counts beats
            for (q = 0; q < PARTS; q = q + 1)
                ram_wdata[EW*q +: EW] = $signed(in_data[32*q +: ACC_BITS]);
        end else if (e2_valid) begin
            ram_we    = 1 << (e2_el & (PARTS - 1));
            ram_waddr = e2_el >> LP;
            ram_wdata = {PARTS{{(EW-17){1'b0}}, e2_e}};
        end
        ram_raddr = (state == L_O && !en) ? (o1_el >> LP) : (el >> LP);
    end

    always @(posedge clk) begin
        if (rst) begin
            state <= L_IDLE;
        end else begin
            e1_valid <= 1'b0;
            e2_valid <= e1_valid;
            if (start) begin
                state     <= L_P;
                classes   <= classes_in;
                exp_shift <= exp_shift_in;
            end
            case (state)
                L_P: if (take) begin
                    recip_shift <= in_data[5:0];
                    n         <= in_data[27:16];
                    bad       <= ((in_data[31:0] & ~P_FIELDS) != 32'd0) || (in_data[5:0] > 6'd48) ||
                                 (in_data[27:16] == 12'd0);
                    lane      <= 5'd0;
                    state     <= L_Y;
                end
                L_Y: if (take) begin
                    for (q = 0; q < PARTS; q = q + 1) begin
                        lbl[lane + q] <= in_data[32*q +: 5];
                        nos[lane + q] <= (in_data[32*q +: 32] == 32'hFFFFFFFF);
                        if (in_data[32*q +: 32] >= classes && in_data[32*q +: 32] != 32'hFFFFFFFF)
                            bad <= 1'b1;
                    end
                    lane <= lane + PARTS;
                    if (lane + PARTS == BATCH) begin
                        lane <= 5'd0;
                        row  <= 6'd0;
                        el   <= 10'd0;
                        state <= L_V;
                    end
                end
                L_V: if (take) begin                    // the maxima: g_mx
                    el   <= el + 10'd1;
                    lane <= lane + PARTS;
                    if (lane + PARTS == BATCH) begin
                        lane <= 5'd0;
                        row  <= row + 6'd1;
                    end
                    if (row == classes - 6'd1 && lane + PARTS == BATCH) begin
                        issuing <= 1'b1;                // E from the next cycle (or status 3 alone)
                        row     <= 6'd0;
                        el      <= 10'd0;
                        state   <= bad ? L_ST : L_E;
                    end
                end
                L_ST: if (out_free) begin               // the status, after the load (3) or before the codes
                    row      <= 6'd0;
                    lane     <= 5'd0;
                    el       <= 10'd0;
                    issuing  <= 1'b1;
                    o1_valid <= 1'b0;
                    o2_valid <= 1'b0;
                    o_beat   <= {STREAM_BITS{1'b0}};
                    state    <= bad ? L_END : L_O;
                end
                L_E: begin
                    if (issuing) begin                  // the address of element el is presented now
                        e1_valid <= 1'b1;
                        e1_last  <= issue_last;
                        e1_first <= (row == 6'd0);
                        e1_lane  <= lane;
                        e1_el    <= el;
                        el       <= el + 10'd1;
                        lane     <= (lane == BATCH - 1) ? 5'd0 : lane + 5'd1;
                        row      <= (lane == BATCH - 1) ? row + 6'd1 : row;
                        issuing  <= !issue_last;
                    end
                    e2_last  <= e1_last;
                    e2_first <= e1_first;
                    e2_lane  <= e1_lane;
                    e2_el    <= e1_el;
                    e2_prod  <= d_prod;
                    if (e2_valid) begin
                        sm[e2_lane] <= e2_first ? {5'd0, e2_e} : sm[e2_lane] + e2_e;
                        if (e2_last) begin
                            state   <= L_Q;
                            dv_num  <= 49'd1 << recip_shift;
                            dv_rem  <= 23'd0;
                            dv_quo  <= 49'd0;
                            dv_den  <= {10'd0, n};
                            dv_left <= 6'd49;
                        end
                    end
                end
                L_Q, L_R: begin
                    dv_rem  <= dv_rn[22:0];
                    dv_quo  <= dv_qn;
                    dv_num  <= dv_num << 1;
                    dv_left <= dv_left - 6'd1;
                    if (dv_left == 6'd1) begin
                        if (state == L_Q) begin
                            qn <= dv_qn;
                            lane <= 5'd0;
                        end else begin
                            rc[lane] <= dv_qn[32:0];
                            lane <= lane + 5'd1;
                        end
                        // the next lane's division (lane 0's after Q): Qn / S from Qn >> 33, 33 bits to go
                        dv_rem  <= (state == L_Q) ? dv_qn[48:33] : qn[48:33];
                        dv_num  <= ((state == L_Q) ? dv_qn : qn) << 16;
                        dv_quo  <= 49'd0;
                        dv_den  <= sm[(state == L_Q) ? 5'd0 : lane + 5'd1];
                        dv_left <= 6'd33;
                        if (state == L_Q)
                            state <= L_R;
                        else if (lane == BATCH - 1)
                            state <= L_ST;
                    end
                end
                L_O: if (en) begin
                    // stage 2 -> the beat (and the output register at the beat's last part)
                    if (o2_valid) begin
                        o_beat <= o_load ? {STREAM_BITS{1'b0}} : o_full;
                        if (o2_last) state <= L_END;
                    end
                    // stage 1 -> stage 2
                    o2_valid <= o1_valid;
                    o2_last  <= o1_last;
                    o2_nos   <= nos[o1_lane];
                    o2_el    <= o1_el;
                    o2_w     <= o1_w;
                    // issue -> stage 1
                    o1_valid <= issuing;
                    if (issuing) begin
                        o1_last <= issue_last;
                        o1_lane <= lane;
                        o1_row  <= row;
                        o1_el   <= el;
                        el      <= el + 10'd1;
                        lane    <= (lane == BATCH - 1) ? 5'd0 : lane + 5'd1;
                        row     <= (lane == BATCH - 1) ? row + 6'd1 : row;
                        issuing <= !issue_last;
                    end
                end
                L_END: if (out_given) state <= L_IDLE;
                default: ;
            endcase
        end
    end
endmodule
/* verilator lint_on WIDTHTRUNC */
/* verilator lint_on WIDTHEXPAND */
