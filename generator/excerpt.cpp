#include "generator/excerpt.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace flashjit {

namespace {

constexpr int kMaxExcerptDepth = 4;

void append_hex(std::string& out, const char* format, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, format, value);
  out += buf;
}

// Length of the valid UTF-8 sequence at s[i] (0 when it is not one).
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  std::size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (c >= 0xf5 || n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) ||
      (c == 0xf4 && c1 >= 0x90))
    return 0;  // overlong forms, surrogates, beyond U+10FFFF
  return n;
}

// Escapes `text` into `out` until about `max_chars` characters were written; returns whether
// all of it fit.
bool escape_into(const std::string& text, std::size_t max_chars, bool quotes, std::string& out) {
  std::size_t written = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (written >= max_chars) return false;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::size_t before = out.size();
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (quotes && (c == '"' || c == '\\')) (out += '\\') += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) append_hex(out, "\\u%04x", c);
    else if (c < 0x80) out += static_cast<char>(c);
    else if (const std::size_t n = utf8_length(text, i)) {
      // C1 controls (U+0080..U+009F) start terminal escape sequences too.
      if (n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0)
        append_hex(out, "\\u%04x", static_cast<unsigned char>(text[i + 1]));
      else out.append(text, i, n);
      i += n;
      written += out.size() - before;
      continue;
    } else {
      append_hex(out, "\\x%02x", c);
    }
    ++i;
    written += out.size() - before;
  }
  return true;
}

std::string length_note(std::size_t bytes) { return " (" + std::to_string(bytes) + " bytes)"; }

std::size_t room(std::size_t budget, const std::string& out) {
  return out.size() < budget ? budget - out.size() : 0;
}

// Writes `v` compactly, giving up (false) once `out` is longer than `budget`.
bool write_json(const nlohmann::json& v, std::size_t budget, int depth, std::string& out) {
  if (out.size() > budget) return false;
  switch (v.type()) {
    case nlohmann::json::value_t::string: {
      out += '"';
      const bool all = escape_into(v.get_ref<const std::string&>(), room(budget, out), true, out);
      out += '"';
      return all;
    }
    case nlohmann::json::value_t::object:
    case nlohmann::json::value_t::array: {
      const bool object = v.is_object();
      if (v.empty()) {
        out += object ? "{}" : "[]";
        return true;
      }
      if (depth >= kMaxExcerptDepth) return false;
      out += object ? '{' : '[';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ',';
        first = false;
        if (object) {
          out += '"';
          if (!escape_into(it.key(), room(budget, out), true, out)) return false;
          out += "\":";
        }
        if (!write_json(it.value(), budget, depth + 1, out)) return false;
      }
      out += object ? '}' : ']';
      return out.size() <= budget;
    }
    case nlohmann::json::value_t::discarded:
      out += "<discarded>";
      return true;
    default:
      out += v.dump();  // numbers and literals are short, and exact as dumped
      return true;
  }
}

}  // namespace

std::string excerpt(const std::string& text, std::size_t max_chars) {
  std::string out;
  if (!escape_into(text, max_chars, false, out)) out += "..." + length_note(text.size());
  return out;
}

std::string quoted_excerpt(const std::string& text, std::size_t max_chars) {
  std::string out = "\"";
  if (escape_into(text, max_chars, true, out)) return out + '"';
  return out + "...\"" + length_note(text.size());
}

std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars) {
  if (v.is_string()) return quoted_excerpt(v.get_ref<const std::string&>(), max_chars);
  std::string out;
  if (write_json(v, max_chars, 0, out)) return out;
  out.resize(std::min(out.size(), max_chars));
  // Do not leave half a UTF-8 sequence behind.
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xc0) == 0x80) out.pop_back();
  if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xc0) out.pop_back();
  const std::string what = v.is_object() ? "an object of " + std::to_string(v.size()) + " keys"
                                         : "an array of " + std::to_string(v.size()) + " values";
  return out + "... (" + what + ")";
}

}  // namespace flashjit
