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

}  // namespace accel
}  // namespace codesign

#endif  // CODESIGN_ACCEL_H
