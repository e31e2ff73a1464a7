// codesign_vectors.h -- golden vector-file readers for C testbenches (codesign, Apache-2.0).
//
// Every generated testbench reads its golden vectors through this header, so
// the file formats of codesign/hw/vectors.py are parsed in one place:
//
//   column files       "# codesign-vectors v1"       one row per vector, one hex field per column;
//   transaction files  "# codesign-transactions v1"  one line per transaction: n_in n_out, the
//                                                     input words, the expected output words (hex).
//
// A file that is missing, short, malformed, written for another PE, or whose
// metadata disagrees with the build is refused: the reader prints why on
// stderr and exits with EXIT_BAD_VECTORS. A testbench never falls back to
// default stimulus. Testbench-only code (std::string, iostreams): never
// included by a synthesised kernel.
#ifndef CODESIGN_VECTORS_H
#define CODESIGN_VECTORS_H

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace codesign {
namespace vectors {

const int EXIT_MISMATCH = 1;
const int EXIT_BAD_VECTORS = 2;
const int EXIT_KERNEL_PROTOCOL = 3;  // the kernel read or wrote the wrong number of stream words

typedef std::map<std::string, std::string> Fields;

struct Transaction {
  std::vector<unsigned long long> in;        // words streamed into the kernel
  std::vector<unsigned long long> expected;  // words it must stream out
};

[[noreturn]] inline void fail(const std::string &path, const std::string &message) {
  std::fprintf(stderr, "testbench: vector file %s: %s\n", path.c_str(), message.c_str());
  std::exit(EXIT_BAD_VECTORS);
}

inline std::string strip_cr(const std::string &line) {
  return (!line.empty() && line[line.size() - 1] == '\r') ? line.substr(0, line.size() - 1) : line;
}

inline std::vector<std::string> split_words(const std::string &text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  std::string word;
  while (stream >> word) words.push_back(word);
  return words;
}

inline std::string to_text(long long value) {
  std::ostringstream stream;
  stream << value;
  return stream.str();
}

// Up to 16 hexadecimal digits into a 64-bit value; false for anything else.
inline bool parse_hex(const std::string &text, unsigned long long &value) {
  if (text.empty() || text.size() > 16) return false;
  value = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (!std::isxdigit(static_cast<unsigned char>(ch))) return false;
    const int digit = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0' : (std::tolower(ch) - 'a' + 10);
    value = (value << 4) | static_cast<unsigned long long>(digit);
  }
  return true;
}

// A positive decimal count of at most 12 digits.
inline bool parse_count(const std::string &text, std::size_t &value) {
  if (text.empty() || text.size() > 12) return false;
  value = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    value = value * 10 + static_cast<std::size_t>(text[i] - '0');
  }
  return true;
}

// "# key=value key=value ..." to a map; any other shape is malformed.
inline Fields parse_fields(const std::string &path, const std::string &line, const char *what) {
  if (line.size() < 2 || line.compare(0, 2, "# ") != 0) fail(path, std::string("the ") + what + " line must start with '# '");
  Fields fields;
  const std::vector<std::string> words = split_words(line.substr(2));
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::size_t eq = words[i].find('=');
    if (eq == std::string::npos || eq == 0) fail(path, std::string("malformed ") + what + " field '" + words[i] + "'");
    fields[words[i].substr(0, eq)] = words[i].substr(eq + 1);
  }
  return fields;
}

// A metadata value that is present must equal what the kernel was built with.
inline void check_meta(const std::string &path, const Fields &meta, const char *key, const std::string &built) {
  Fields::const_iterator found = meta.find(key);
  if (found != meta.end() && found->second != built)
    fail(path, std::string("vectors are for ") + key + "=" + found->second + " but this PE was built with " + key + "=" +
                   built);
}

// Magic, header and metadata lines; checks magic and PE, returns header and metadata fields.
inline void read_preamble(std::ifstream &file, const std::string &path, const char *magic, const char *pe,
                          Fields &header, Fields &meta) {
  std::string line;
  if (!file) fail(path, "cannot be opened");
  if (!std::getline(file, line) || strip_cr(line) != magic) fail(path, std::string("first line must be '") + magic + "'");
  if (!std::getline(file, line)) fail(path, "missing header line");
  header = parse_fields(path, strip_cr(line), "header");
  if (header["pe"] != pe) fail(path, "holds vectors for pe='" + header["pe"] + "', expected '" + pe + "'");
  if (!std::getline(file, line)) fail(path, "missing metadata line");
  meta = parse_fields(path, strip_cr(line), "metadata");
}

inline std::size_t declared_count(const std::string &path, Fields &header) {
  std::size_t count = 0;
  if (!parse_count(header["count"], count) || count == 0)
    fail(path, "header count='" + header["count"] + "' is not a positive integer");
  return count;
}

// A column file: `columns` is the comma-separated list the file must declare. Each row has one
// value per column. `meta` receives the metadata line for the caller's check_meta calls.
inline std::vector<std::vector<unsigned long long> > read_columns(const std::string &path, const char *magic,
                                                                   const char *pe, const char *columns, Fields &meta) {
  std::ifstream file(path.c_str());
  Fields header;
  read_preamble(file, path, magic, pe, header, meta);
  if (header["columns"] != columns) fail(path, "has columns '" + header["columns"] + "', expected '" + columns + "'");
  std::size_t width = 1;
  for (const char *c = columns; *c; ++c) width += (*c == ',');
  const std::size_t count = declared_count(path, header);
  std::vector<std::vector<unsigned long long> > rows;
  rows.reserve(count);
  std::string line;
  std::size_t line_number = 3;
  while (std::getline(file, line)) {
    ++line_number;
    const std::vector<std::string> words = split_words(strip_cr(line));
    if (words.empty()) continue;
    const std::string where = "line " + to_text(static_cast<long long>(line_number));
    if (rows.size() == count) fail(path, where + ": more rows than count=" + header["count"]);
    if (words.size() != width)
      fail(path, where + ": expected " + to_text(static_cast<long long>(width)) + " hexadecimal fields, found " +
                     to_text(static_cast<long long>(words.size())));
    std::vector<unsigned long long> row(width);
    for (std::size_t k = 0; k < width; ++k)
      if (!parse_hex(words[k], row[k])) fail(path, where + ": '" + words[k] + "' is not hexadecimal");
    rows.push_back(row);
  }
  if (rows.size() != count)
    fail(path, "declares count=" + header["count"] + " but holds " + to_text(static_cast<long long>(rows.size())) + " rows");
  return rows;
}

// A transaction file; every word must fit `word_bits` bits (the file must declare the same width).
inline std::vector<Transaction> read_transactions(const std::string &path, const char *magic, const char *pe,
                                                  int word_bits, Fields &meta) {
  std::ifstream file(path.c_str());
  Fields header;
  read_preamble(file, path, magic, pe, header, meta);
  if (header["word_bits"] != to_text(word_bits))
    fail(path, "has word_bits='" + header["word_bits"] + "', expected " + to_text(word_bits));
  const std::size_t count = declared_count(path, header);
  const unsigned long long limit = word_bits >= 64 ? ~0ULL : ((1ULL << word_bits) - 1);
  std::vector<Transaction> transactions;
  transactions.reserve(count);
  std::string line;
  std::size_t line_number = 3;
  while (std::getline(file, line)) {
    ++line_number;
    const std::vector<std::string> words = split_words(strip_cr(line));
    if (words.empty()) continue;
    const std::string where = "line " + to_text(static_cast<long long>(line_number));
    if (transactions.size() == count) fail(path, where + ": more transactions than count=" + header["count"]);
    std::vector<unsigned long long> values(words.size());
    for (std::size_t k = 0; k < words.size(); ++k)
      if (!parse_hex(words[k], values[k])) fail(path, where + ": '" + words[k] + "' is not hexadecimal");
    if (values.size() < 2 || values[0] == 0 || values[0] > values.size() || values[1] > values.size() ||
        values.size() != 2 + values[0] + values[1])
      fail(path, where + ": truncated or too long for the word counts it declares");
    Transaction transaction;
    for (std::size_t k = 2; k < values.size(); ++k) {
      if (values[k] > limit) fail(path, where + ": word '" + words[k] + "' is wider than " + to_text(word_bits) + " bits");
      (k < 2 + values[0] ? transaction.in : transaction.expected).push_back(values[k]);
    }
    transactions.push_back(transaction);
  }
  if (transactions.size() != count)
    fail(path, "declares count=" + header["count"] + " but holds " +
                   to_text(static_cast<long long>(transactions.size())) + " transactions");
  return transactions;
}

}  // namespace vectors
}  // namespace codesign

#endif  // CODESIGN_VECTORS_H
