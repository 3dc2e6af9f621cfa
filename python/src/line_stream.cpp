#include "line_stream.hpp"

namespace flashjit::python {

LineStreamBuf::~LineStreamBuf() {
  if (!line_.empty()) on_line_(line_);
}

void LineStreamBuf::put_locked(char c) {
  if (c != '\n') {
    line_ += c;
    return;
  }
  std::string line;
  line.swap(line_);
  on_line_(line);
}

LineStreamBuf::int_type LineStreamBuf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  std::lock_guard<std::mutex> lock(mutex_);
  put_locked(traits_type::to_char_type(c));
  return c;
}

std::streamsize LineStreamBuf::xsputn(const char* s, std::streamsize n) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::streamsize i = 0; i < n; ++i) put_locked(s[i]);
  return n;
}

}  // namespace flashjit::python
