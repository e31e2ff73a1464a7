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
// ctypes bridge, codesign/hw/bridge.py) hands plain 32-bit buffers over.
#ifndef CODESIGN_ACCEL_H
#define CODESIGN_ACCEL_H

#include <stdint.h>

#include <hls_stream.h>

namespace codesign {
namespace accel {

// Words in[0 .. n_in) into `words`, one per cycle (a sequential read Vitis HLS turns into bursts).
template <typename word_t>
void read_words(const uint32_t *in, uint32_t n_in, hls::stream<word_t> &words) {
  for (uint32_t i = 0; i < n_in; ++i) {
#pragma HLS PIPELINE II = 1
    words.write(word_t(in[i]));
  }
}

// n_transactions transactions of the stream PE, back to back on the same two streams.
template <typename pe_t, typename word_t>
void run_transactions(hls::stream<word_t> &in, hls::stream<word_t> &out, uint32_t n_transactions) {
  for (uint32_t t = 0; t < n_transactions; ++t) pe_t::process(in, out);
}

// The first n_out words of `words` to out[0 .. n_out), one per cycle (bursts, as for the read).
template <typename word_t>
void write_words(hls::stream<word_t> &words, uint32_t *out, uint32_t n_out) {
  for (uint32_t i = 0; i < n_out; ++i) {
#pragma HLS PIPELINE II = 1
    out[i] = static_cast<uint32_t>(words.read());
  }
}

}  // namespace accel
}  // namespace codesign

#endif  // CODESIGN_ACCEL_H
