// User input as it appears in messages: control characters, NULs and invalid UTF-8 escaped (so
// a message can neither be cut short nor steer a terminal), long values cut with their length
// stated, numbers exactly as written.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>

namespace flashjit {

inline constexpr std::size_t kExcerptChars = 64;

// `text` escaped; cut after about `max_chars` characters, then "... (N bytes)".
std::string excerpt(const std::string& text, std::size_t max_chars = kExcerptChars);
// The same in double quotes, JSON-style: "sm_90a".
std::string quoted_excerpt(const std::string& text, std::size_t max_chars = kExcerptChars);
// A JSON value, compactly: scalars exact, strings as quoted_excerpt, objects and arrays cut
// (and never walked deeper than a few levels, however deep they are).
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = kExcerptChars);

}  // namespace flashjit
