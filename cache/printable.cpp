#include "cache/printable.hpp"

namespace flashjit::cache {

std::string printable(std::string_view text) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c >= 0x20 && c < 0x7f) out.push_back(ch);
    else out += {'\\', 'x', digits[c >> 4], digits[c & 15]};
  }
  return out;
}

}  // namespace flashjit::cache
