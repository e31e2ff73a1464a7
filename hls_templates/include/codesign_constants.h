// codesign_constants.h -- the stream contract's word width and status codes.
// Generated from codesign/contracts/constants.py by `python -m codesign.hw.constants_gen`; do not edit.
#ifndef CODESIGN_CONSTANTS_H
#define CODESIGN_CONSTANTS_H

namespace codesign {

const int WORD_BITS = 32;  // stream words (bits)
const int STATUS_BITS = 2;  // the status field in the low bits of the status word

namespace csb {
enum { STATUS_OK = 0, STATUS_BAD_HEADER = 1, STATUS_NNZ = 2, STATUS_INDEX = 3 };
}  // namespace csb

namespace fpmac_array {
enum { STATUS_OK = 0, STATUS_BAD_HEADER = 1, STATUS_TOO_LARGE = 2 };
}  // namespace fpmac_array

namespace tt {
enum { STATUS_OK = 0, STATUS_BAD_HEADER = 1, STATUS_TOO_LARGE = 2 };
}  // namespace tt

}  // namespace codesign

#endif  // CODESIGN_CONSTANTS_H
