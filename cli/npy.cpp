#include "cli/npy.hpp"

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
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
        fail(origin_, "unexpected key '" + key + "' in the .npy header");
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
                                       std::to_string(i_) + " of \"" + s_ + "\"");
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
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        v = v * 10 + (s_[i_++] - '0');
        if (v > (int64_t(1) << 48)) fail(origin_, "shape dimension too large");
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

int item_size_of(const std::string& descr) {
  if (descr.size() < 3) return 0;
  int n = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(descr[i]))) return 0;
    n = n * 10 + (descr[i] - '0');
  }
  return n;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) s << ",";
  s << ")";
  return s.str();
}

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
int NpyArray::item_size() const { return item_size_of(descr); }
std::string NpyArray::shape_string() const { return cli::shape_string(shape); }

NpyArray parse_npy(const std::string& bytes, const std::string& origin) {
  if (bytes.size() < 10 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    fail(origin, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(origin, "truncated .npy header");
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    offset = 12;
  } else {
    fail(origin, "unsupported .npy format version " + std::to_string(major));
  }
  if (offset + header_len > bytes.size()) fail(origin, "truncated .npy header");
  const std::string header = bytes.substr(offset, header_len);

  NpyArray a;
  bool fortran = false;
  DictParser(header, origin).parse(a.descr, fortran, a.shape);
  if (fortran)
    fail(origin, "fortran_order is True; save a C-ordered array (numpy.ascontiguousarray)");
  if (a.descr.size() < 3 || (a.descr[0] != '<' && a.descr[0] != '|' && a.descr[0] != '='))
    fail(origin, "dtype '" + a.descr + "' is not little-endian; flashjit reads '<f2', '<u2', '<V2' and '<f4'");
  const int item = a.item_size();
  if (item <= 0) fail(origin, "unsupported dtype '" + a.descr + "'");
  const size_t expected = static_cast<size_t>(a.elements()) * static_cast<size_t>(item);
  const size_t have = bytes.size() - offset - header_len;
  if (have != expected)
    fail(origin, "holds " + std::to_string(have) + " data bytes; shape " + a.shape_string() + " of '" + a.descr +
                     "' needs " + std::to_string(expected));
  a.data = bytes.substr(offset + header_len);
  return a;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open .npy file");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) fail(path, "read error");
  return parse_npy(bytes, path);
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
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (static_cast<size_t>(n) * static_cast<size_t>(item_size_of(descr)) != bytes)
    fail(path, "internal: " + std::to_string(bytes) + " bytes do not match shape " + shape_string(shape));
  const std::string encoded = encode_npy(descr, shape, data, bytes);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(path, "cannot create .npy file");
  f.write(encoded.data(), static_cast<std::streamsize>(encoded.size()));
  f.close();
  if (!f) fail(path, "write error");
}

}  // namespace flashjit::cli
