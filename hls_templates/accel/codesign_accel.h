// codesign_accel.h -- the three processes of the accelerator shell (codesign, Apache-2.0).
//
// The shell (docs/accelerator.md) wraps any stream PE -- one 32-bit input and one
// 32-bit output word stream, one transaction per pe_t::process(in, out) call --
// into an IP with two m_axi data ports and an s_axilite control port. Its top
// function is a DATAFLOW region of three processes:
//
//   read_words        n_in words from memory (`in`, one INCR burst per loop) into a stream;
//   run_transactions  n_transactions calls of PE::process on that stream;
//   write_words       n_out words of the PE's output stream to memory (`out`).
//
// The loops live here, once, for every PE; the generated top only declares the
// interface and calls them. Memory words are uint32_t so that a host (or the
// ctypes bridge, codesign/hw/bridge.py) hands plain 32-bit buffers over. A PE
// whose stream words are wider (a TT PE built with 64- or 128-bit streams)
// takes word_t::width / 32 consecutive memory words, least significant first,
// as one stream word: the word's little-endian layout in memory. n_in and
// n_out still count 32-bit memory words (whole stream words' worth of them);
// the m_axi ports are widened to the stream word (max_widen_bitwidth) so that
// a stream word moves per cycle.
#ifndef CODESIGN_ACCEL_H
#define CODESIGN_ACCEL_H

#include <stdint.h>

#include <hls_stream.h>

#include "codesign_round.h"

namespace codesign {
namespace accel {

// 32-bit memory words per stream word (1 for streams of 32 bits or fewer).
template <typename word_t>
struct parts_of {
  static const int value = word_t::width > 32 ? word_t::width / 32 : 1;
};

// Words in[0 .. n_in) into `words`, one stream word per cycle (a sequential read Vitis HLS turns into bursts).
template <typename word_t>
void read_words(const uint32_t *in, uint32_t n_in, hls::stream<word_t> &words) {
  const int PARTS = parts_of<word_t>::value;
  for (uint32_t i = 0; i < n_in; i += PARTS) {
#pragma HLS PIPELINE II = 1
    if (PARTS == 1) {
      words.write(word_t(in[i]));
    } else {
      word_t word = 0;
      for (int p = 0; p < PARTS; ++p) {
#pragma HLS UNROLL
        if (i + p < n_in) word.range(32 * p + 31, 32 * p) = in[i + p];
      }
      words.write(word);
    }
  }
}

// n_transactions transactions of the stream PE, back to back on the same two streams.
template <typename pe_t, typename word_t>
void run_transactions(hls::stream<word_t> &in, hls::stream<word_t> &out, uint32_t n_transactions) {
  for (uint32_t t = 0; t < n_transactions; ++t) pe_t::process(in, out);
}

// The first n_out memory words of `words` to out[0 .. n_out), one stream word per cycle (bursts, as for the read).
template <typename word_t>
void write_words(hls::stream<word_t> &words, uint32_t *out, uint32_t n_out) {
  const int PARTS = parts_of<word_t>::value;
  for (uint32_t i = 0; i < n_out; i += PARTS) {
#pragma HLS PIPELINE II = 1
    const word_t word = words.read();
    if (PARTS == 1) {
      out[i] = static_cast<uint32_t>(word);
    } else {
      for (int p = 0; p < PARTS; ++p) {
#pragma HLS UNROLL
        if (i + p < n_out) out[i + p] = static_cast<uint32_t>(word.range(32 * p + 31, 32 * p));
      }
    }
  }
}

// The direct call: the three processes above as one DATAFLOW region (the shell with n_calls = 0).
template <typename pe_t, typename word_t>
void run_direct(const uint32_t *in, uint32_t *out, uint32_t n_in, uint32_t n_out, uint32_t n_transactions) {
#pragma HLS DATAFLOW
  hls::stream<word_t> pe_in("pe_in"), pe_out("pe_out");
  read_words(in, n_in, pe_in);
  run_transactions<pe_t>(pe_in, pe_out, n_transactions);
  write_words(pe_out, out, n_out);
}

// ---- call lists (codesign/contracts/calls.py is the contract; rtl/accel/accel_seq.v the RTL) ----------------

const int DESCRIPTOR_WORDS = 32;
const int RECORD_WORDS = 8;
const uint32_t RECORD_DONE = 0x0D0ECA11u;
const uint32_t FLAG_HEADER = 1, FLAG_ROUND = 2, FLAG_ACC_ADD = 4, FLAG_ACC_HOLD = 8;
const int ACC_DEPTH = 4096;  // sums the accumulation buffer holds (HELD_BITS each: one 36K block RAM per 768)
enum { D_FLAGS = 0, D_HEADER = 1, D_SEG0 = 2, D_SEG1 = 6, D_OUT = 10, D_COUNT = 14, D_ROUND = 15, D_ROW_VALUES = 16,
       D_RECORD = 17, D_SEG0_PLANES = 18, D_SEG1_PLANES = 20, D_OUT_PLANES = 22, D_SEG2 = 24, D_SEG2_PLANES = 28,
       D_KEPT = 30 };

// A 3-D block of the arena (byte offsets and strides, 32-bit words): planes outer, rows, words inner.
struct block_t {
  uint32_t offset, words, rows, stride, planes, plane_stride;
};

// The block of descriptor words d[at .. at + 4) (offset, words, rows, stride) and d[planes_at .. planes_at + 2)
// (planes, plane stride): planes 0 is a 2-D block (one plane).
inline block_t block_of(const uint32_t *d, int at, int planes_at) {
  block_t b;
  b.offset = d[at];
  b.words = d[at + 1];
  b.rows = d[at + 2];
  b.stride = d[at + 3];
  b.planes = d[planes_at] == 0 ? 1u : d[planes_at];
  b.plane_stride = d[planes_at + 1];
  return b;
}

// Rows of a 3-D block of the arena `in` into a stream, plane by plane, parts_of<word_t> memory words to a stream
// word (blocks are whole stream words; the host checks it).
template <typename word_t>
void read_block(const uint32_t *in, const block_t &block, hls::stream<word_t> &words, uint32_t &sent) {
  const int PARTS = parts_of<word_t>::value;
  for (uint32_t p = 0; block.words != 0 && p < block.planes; ++p) {
    for (uint32_t r = 0; r < block.rows; ++r) {
      const uint32_t first = (block.offset + p * block.plane_stride + r * block.stride) / 4;
      for (uint32_t w = 0; w < block.words; w += PARTS) {
#pragma HLS PIPELINE II = 1
        word_t word = 0;
        for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
          word |= word_t(in[first + w + q]) << (32 * q);
        }
        words.write(word);
        sent += PARTS;
      }
    }
  }
}

// The words of `words` into the rows of the out block of the arena `out`, plane by plane.
inline void write_block(hls::stream<round::word_t> &words, uint32_t *out, const block_t &block, uint32_t &written) {
  for (uint32_t p = 0; block.words != 0 && p < block.planes; ++p) {
    for (uint32_t r = 0; r < block.rows; ++r) {
      const uint32_t first = (block.offset + p * block.plane_stride + r * block.stride) / 4;
      for (uint32_t w = 0; w < block.words; ++w) {
#pragma HLS PIPELINE II = 1
        out[first + w] = static_cast<uint32_t>(words.read());
        ++written;
      }
    }
  }
}

// The rounding stage's fields of a descriptor.
inline round::config round_config(const uint32_t *d) {
  round::config cfg;
  cfg.enable = (d[D_FLAGS] & FLAG_ROUND) != 0;
  cfg.shift = ap_int<7>(d[D_ROUND] & 0x7F);
  cfg.bits = (d[D_ROUND] >> 8) & 0x1F;
  cfg.lanes = (d[D_ROUND] >> 16) & 0x1F;
  cfg.group_words = (d[D_ROUND] >> 24) & 0x7;
  cfg.row_values = d[D_ROW_VALUES] & 0xFFFF;
  cfg.field_bits = (d[D_ROUND] >> 27) & 0x1F;
  return cfg;
}

// An accumulating call's results into the buffer (docs/accelerator.md, "Accumulating calls"): each sign-extended,
// added to the sum held (acc_add) or alone; kept (acc_hold) or sent on to `drained` (the chain's last call). The
// host keeps a chain within MAX_CHAIN calls, so no sum leaves HELD_BITS bits.
inline void accumulate(hls::stream<round::word_t> &results, round::held_t *held, hls::stream<round::held_t> &drained,
                       uint32_t count, bool add, bool hold) {
  for (uint32_t n = 0; n < count; ++n) {
#pragma HLS PIPELINE II = 1
    const round::held_t value = ap_int<32>(results.read());
    const round::held_t sum = add ? round::held_t(held[n] + value) : value;
    if (hold) {
      held[n] = sum;
    } else {
      drained.write(sum);
    }
  }
}

// The PE's `count` results (PARTS to a stream word, the last one's rest 0) to the stage as 32-bit words.
template <typename word_t>
void take_results(hls::stream<word_t> &pe_out, hls::stream<round::word_t> &results, uint32_t count) {
  const int PARTS = parts_of<word_t>::value;
  for (uint32_t i = 0; i < count; i += PARTS) {
    const word_t word = pe_out.read();
    for (int p = 0; p < PARTS && i + p < count; ++p)
      results.write(round::word_t(static_cast<uint32_t>(word >> (32 * p))));
  }
}

// The results of an accepted call into the arena: raw or rounded, or through the accumulation buffer (nothing sent
// while holding; the sums rounded, or raw as 64-bit words, when draining). Returns the words written.
template <typename word_t>
uint32_t send_results(hls::stream<word_t> &pe_out, uint32_t *out, const uint32_t *d, round::held_t *held,
                      round::stats &st) {
  hls::stream<round::word_t> results("list_results"), codes("list_codes");
  hls::stream<round::held_t> sums("list_sums");
  const uint32_t count = d[D_COUNT], flags = d[D_FLAGS];
  const bool add = (flags & FLAG_ACC_ADD) != 0, hold = (flags & FLAG_ACC_HOLD) != 0;
  uint32_t written = 0;
  take_results(pe_out, results, count);
  if (add || hold) {
    accumulate(results, held, sums, count, add, hold);
    if (hold) return 0;  // the record's statistics stay 0
    round::round_held_stream(sums, codes, round_config(d), count, st);
  } else {
    round::round_stream(results, codes, round_config(d), count, st);
  }
  write_block(codes, out, block_of(d, D_OUT, D_OUT_PLANES), written);
  return written;
}

// One call of a list: the PE's transaction from the arena, its results (raw, rounded or accumulated) back into the
// arena, the record after them. `held` is the shell's accumulation buffer. Returns the call's status (not 0: the
// list ends).
template <typename pe_t, typename word_t>
uint32_t run_call(const uint32_t *in, uint32_t *out, const uint32_t *d, round::held_t *held) {
  hls::stream<word_t> pe_in("list_pe_in"), pe_out("list_pe_out");
  uint32_t sent = 0, written = 0;
  const int PARTS = parts_of<word_t>::value;
  if (d[D_FLAGS] & FLAG_HEADER) {
    pe_in.write(word_t(d[D_HEADER]));  // one stream word, zero above bit 31
    sent += PARTS;
  }
  read_block(in, block_of(d, D_SEG0, D_SEG0_PLANES), pe_in, sent);
  read_block(in, block_of(d, D_SEG1, D_SEG1_PLANES), pe_in, sent);
  read_block(in, block_of(d, D_SEG2, D_SEG2_PLANES), pe_in, sent);
  pe_t::process(pe_in, pe_out);
  const uint32_t status = static_cast<uint32_t>(pe_out.read());
  round::stats st = {0, 0};
  if (status == 0 && d[D_COUNT] != 0) written = send_results(pe_out, out, d, held, st);
  // A refused transaction's remaining words (on the PL the PE takes them as headers; the list ends here).
  // Otherwise nothing is drained: words left in either stream are a call that does not match its PE, which the
  // C-sim reports as leftover data (the emulated board then stalls, as the PL would misbehave).
  if (status != 0)
    while (!pe_in.empty()) pe_in.read();
  uint32_t *record = out + d[D_RECORD] / 4;
  const uint64_t sum = static_cast<uint64_t>(st.sum_abs);
  record[0] = status;
  record[1] = static_cast<uint32_t>(st.saturated);
  record[2] = static_cast<uint32_t>(sum);
  record[3] = static_cast<uint32_t>(sum >> 32);
  record[4] = 0;  // reserved
  record[5] = sent;
  record[6] = written;
  record[7] = RECORD_DONE;
  return status;
}

// A list of n_calls calls, one after the other: every address in a descriptor is a byte offset into the arena
// (`in` for reads, `out` for writes; the host passes the same buffer), so a call reads what an earlier call wrote.
// The accumulation buffer lives for the list (the host ends every chain within it).
template <typename pe_t, typename word_t>
void run_list(const uint32_t *in, uint32_t *out, const uint32_t *calls, uint32_t n_calls) {
  static round::held_t held[ACC_DEPTH];  // block RAM on the PL; static keeps 32 KiB of C-sim state off the stack
  for (uint32_t c = 0; c < n_calls; ++c) {
    uint32_t d[D_KEPT];
    for (int w = 0; w < D_KEPT; ++w) d[w] = calls[c * DESCRIPTOR_WORDS + w];
    if (run_call<pe_t, word_t>(in, out, d, held) != 0) return;
  }
}

// One ap_start of the shell: the direct call (n_calls = 0) or the call list at `calls`.
template <typename pe_t, typename word_t>
void run_shell(const uint32_t *in, uint32_t *out, uint32_t n_in, uint32_t n_out, uint32_t n_transactions,
               const uint32_t *calls, uint32_t n_calls) {
  if (n_calls == 0) {
    run_direct<pe_t, word_t>(in, out, n_in, n_out, n_transactions);
  } else {
    run_list<pe_t, word_t>(in, out, calls, n_calls);
  }
}

}  // namespace accel
}  // namespace codesign

#endif  // CODESIGN_ACCEL_H
