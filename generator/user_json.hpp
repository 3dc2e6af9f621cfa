// JSON that users write (configs, manifests), read within bounds: a size limit, a nesting limit
// and every key at most once per object. nlohmann's parser alone keeps the last of repeated
// keys ({"mask": "causal", "mask": "none"} silently means "none") and builds values nested so
// deep that anything walking them recursively (dump(), copies) overflows the stack.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <istream>
#include <stdexcept>
#include <string>

namespace flashjit {

inline constexpr int kMaxJsonDepth = 64;                      // objects and arrays inside each other
inline constexpr std::size_t kMaxConfigBytes = 1u << 20;      // 1 MiB
inline constexpr std::size_t kMaxManifestBytes = 16u << 20;   // 16 MiB

// What is wrong with a JSON text: where (a JSON path such as "tuning.BM" or "matrix[2].vary";
// empty for the text as a whole) and the rule it breaks. Neither holds raw input.
class JsonInputError : public std::runtime_error {
 public:
  JsonInputError(std::string path, std::string rule);
  const std::string& path() const { return path_; }
  const std::string& rule() const { return rule_; }

 private:
  std::string path_;
  std::string rule_;
};

// Throws JsonInputError when `text` is longer than `max_bytes`, is not JSON, nests deeper than
// kMaxJsonDepth or repeats a key within one object. `what` names the kind of document in the
// size rule ("a config").
void check_user_json(const std::string& text, std::size_t max_bytes, const char* what);

template <class Json = nlohmann::json>
Json parse_user_json(const std::string& text, std::size_t max_bytes, const char* what) {
  check_user_json(text, max_bytes, what);
  return Json::parse(text);
}

// Reads all of `in` into `out`, but no more than max_bytes + 1 bytes, so that an endless or huge
// input (/dev/zero, a 10 GB file) is recognised as too large at once. False on a read error.
bool read_at_most(std::istream& in, std::size_t max_bytes, std::string& out);

// "1 MiB (1048576 bytes)" for the size rules.
std::string byte_limit_text(std::size_t bytes);

}  // namespace flashjit
