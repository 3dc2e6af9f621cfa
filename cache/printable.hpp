// Text from the file system (file names, paths) made safe to print: a name planted with a
// newline or a terminal escape sequence must not reach a terminal or a log line raw.
#pragma once

#include <string>
#include <string_view>

namespace flashjit::cache {

// Printable ASCII passes through; '\\' becomes "\\\\", '\n' "\\n", '\t' "\\t", and every other
// byte (control characters, DEL, anything non-ASCII) "\\xNN".
std::string printable(std::string_view text);

}  // namespace flashjit::cache
