#include "cli/npy.hpp"

#include "cli/output_file.hpp"
#include "generator/excerpt.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace flashjit::cli {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw NpyError(origin + ": " + what);
}

// A cursor over the header dict: {'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }
class DictParser {
 public:
  DictParser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip();
    expect('{');
    while (true) {
      skip();
      if (peek() == '}') {
        ++i_;
        break;
      }
      const std::string key = string_literal();
      skip();
      expect(':');
      skip();
      if (key == "descr") {
        descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        shape = tuple();
        have_shape = true;
      } else {
        fail(origin_, "unexpected key " + quoted_excerpt(key) + " in the .npy header");
      }
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip();
      expect('}');
      break;
    }
    if (!have_descr || !have_fortran || !have_shape)
      fail(origin_, "the .npy header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(origin_, std::string("malformed .npy header: expected '") + c + "' at offset " +
                                       std::to_string(i_) + " of " + quoted_excerpt(s_, 120));
    ++i_;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail(origin_, "malformed .npy header: expected a string at offset " + std::to_string(i_));
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) out += s_[i_++];
    expect(q);
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail(origin_, "malformed .npy header: fortran_order must be True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (true) {
      skip();
      if (peek() == ')') {
        ++i_;
        return dims;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        fail(origin_, "malformed .npy header: shape must be a tuple of non-negative integers");
      if (dims.size() == kMaxNpyDims)
        fail(origin_, "the shape has more than " + std::to_string(kMaxNpyDims) + " dimensions");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        v = v * 10 + (s_[i_++] - '0');  // at most 10 * 2^48 + 9: no overflow
        if (v > kMaxNpyDim) fail(origin_, "a shape dimension exceeds 2^48");
      }
      if (peek() == 'L') ++i_;  // Python 2 longs
      dims.push_back(v);
      skip();
      if (peek() == ',') ++i_;
    }
  }

  const std::string& s_;
  const std::string& origin_;
  size_t i_ = 0;
};

// The byte count after the descr's kind ('<f4' -> 4); 0 when the descr has none.
int item_size_of(const std::string& descr) {
  if (descr.size() < 3 || descr.size() > 8) return 0;
  int n = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(descr[i]))) return 0;
    n = n * 10 + (descr[i] - '0');  // at most 6 digits
  }
  return n;
}

// The preamble: magic, version and header length. Needs the first 12 bytes (10 for version 1).
struct Preamble {
  size_t header_offset = 0;
  size_t header_len = 0;
};

Preamble read_preamble(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 10 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    fail(origin, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  Preamble p;
  if (major == 1) {
    p.header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    p.header_offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(origin, "truncated .npy header");
    for (int i = 3; i >= 0; --i) p.header_len = (p.header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    p.header_offset = 12;
  } else {
    fail(origin, "unsupported .npy format version " + std::to_string(major));
  }
  if (p.header_len > kMaxNpyHeaderBytes)
    fail(origin, "the .npy header is " + std::to_string(p.header_len) + " bytes; flashjit reads headers of up to " +
                     std::to_string(kMaxNpyHeaderBytes));
  return p;
}

// Parses and checks the header dict; returns the data size it declares.
uint64_t read_header(const std::string& header, const std::string& origin, NpyArray& a) {
  bool fortran = false;
  DictParser(header, origin).parse(a.descr, fortran, a.shape);
  if (fortran)
    fail(origin, "fortran_order is True; save a C-ordered array (numpy.ascontiguousarray)");
  if (a.descr.size() < 3 || (a.descr[0] != '<' && a.descr[0] != '|' && a.descr[0] != '='))
    fail(origin, "dtype " + quoted_excerpt(a.descr) +
                     " is not little-endian; flashjit reads '<f2', '<u2', '<V2' and '<f4'");
  const int item = a.item_size();
  if (item <= 0) fail(origin, "unsupported dtype " + quoted_excerpt(a.descr));
  uint64_t bytes = 0;
  if (!npy_bytes(a.shape, item, bytes))
    fail(origin, "shape " + a.shape_string() + " of " + quoted_excerpt(a.descr) + " holds more than " +
                     std::to_string(kMaxNpyDataBytes) + " bytes (1 TiB), the most flashjit reads");
  return bytes;
}

std::string size_mismatch(uint64_t have, const NpyArray& a, uint64_t expected) {
  return "holds " + std::to_string(have) + " data bytes; shape " + a.shape_string() + " of " +
         quoted_excerpt(a.descr) + " needs " + std::to_string(expected);
}

}  // namespace

bool npy_bytes(const std::vector<int64_t>& shape, int item_size, uint64_t& bytes) {
  if (item_size < 0) return false;
  uint64_t n = static_cast<uint64_t>(item_size);
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) n = 0;
    else if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) || n > kMaxNpyDataBytes) return false;
  }
  bytes = n;
  return n <= kMaxNpyDataBytes;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) s << ",";
  s << ")";
  return s.str();
}

int64_t NpyArray::elements() const {
  uint64_t n = 0;
  if (!npy_bytes(shape, 1, n)) throw NpyError("shape " + shape_string() + " holds too many elements");
  return static_cast<int64_t>(n);
}
int NpyArray::item_size() const { return item_size_of(descr); }
std::string NpyArray::shape_string() const { return cli::shape_string(shape); }

NpyArray parse_npy(const std::string& bytes, const std::string& origin) {
  const Preamble p = read_preamble(bytes, origin);
  if (p.header_offset + p.header_len > bytes.size()) fail(origin, "truncated .npy header");
  NpyArray a;
  const uint64_t expected = read_header(bytes.substr(p.header_offset, p.header_len), origin, a);
  const size_t data_offset = p.header_offset + p.header_len;
  const uint64_t have = bytes.size() - data_offset;
  if (have != expected) fail(origin, size_mismatch(have, a, expected));
  a.data = bytes.substr(data_offset);
  return a;
}

NpyArray read_npy(const std::string& path) {
  // Read as the header says, not to the end: a short header may sit in front of an endless
  // stream (a FIFO, /dev/zero), and a declared size is checked before it is allocated.
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open .npy file");
  auto read = [&](size_t n) {
    std::string out(n, '\0');
    f.read(out.data(), static_cast<std::streamsize>(n));
    if (f.bad()) fail(path, "read error");
    out.resize(static_cast<size_t>(f.gcount()));
    return out;
  };
  std::string head = read(10);
  if (head.size() == 10 && head.compare(0, kMagicLen, kMagic, kMagicLen) == 0 && head[6] != '\1') head += read(2);
  const Preamble p = read_preamble(head, path);
  head += read(p.header_offset + p.header_len - head.size());
  if (head.size() != p.header_offset + p.header_len) fail(path, "truncated .npy header");
  NpyArray a;
  const uint64_t expected = read_header(head.substr(p.header_offset), path, a);
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);  // fails for pipes: then just read
  if (!ec && file_size != head.size() + expected) fail(path, size_mismatch(file_size - head.size(), a, expected));
  a.data = read(static_cast<size_t>(expected));
  if (a.data.size() != expected) fail(path, size_mismatch(a.data.size(), a, expected));
  if (f.peek() != std::char_traits<char>::eof()) fail(path, "holds more data bytes than shape " + a.shape_string() +
                                                                " of " + quoted_excerpt(a.descr) + " needs (" +
                                                                std::to_string(expected) + ")");
  return a;
}

std::string encode_npy(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                       size_t bytes) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
  // Magic, version and length, then the dict padded with spaces and a newline so that the data
  // starts on a multiple of 64 bytes.
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  bool v2 = false;
  if (total + 63 > 65535 + prefix) {
    v2 = true;
    prefix = 12;
    total = prefix + dict.size() + 1;
  }
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const size_t len = dict.size();
  if (v2) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  } else {
    out += static_cast<char>(len & 0xff);
    out += static_cast<char>((len >> 8) & 0xff);
  }
  out += dict;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* data, size_t bytes) {
  uint64_t n = 0;
  if (!npy_bytes(shape, item_size_of(descr), n) || n != bytes)
    fail(path, "internal: " + std::to_string(bytes) + " bytes do not match shape " + shape_string(shape));
  const std::string encoded = encode_npy(descr, shape, data, bytes);
  cache::Fd f;
  if (const std::string why = open_output_file(path, f); !why.empty()) fail(path, "cannot create .npy file: " + why);
  // The file was named and created: failing to fill it is a failure of the run, not bad input.
  if (const std::string why = write_and_close(f, encoded); !why.empty())
    throw std::runtime_error(path + ": cannot write .npy file: " + why);
}

}  // namespace flashjit::cli
