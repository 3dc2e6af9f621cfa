// Access to the embedded device templates: lookup by include path, and flattening of a
// translation unit into one self-contained source (what `flashjit generate --flat` prints and
// what the cache key hashes).
#pragma once

#include <string>
#include <vector>

namespace flashjit {

// Text of an embedded template, or nullptr. `path` as written in #include "...".
const std::string* find_template(const std::string& path);
std::vector<std::string> template_paths();

// Replaces every #include "x" that names an embedded template by its text, recursively, each
// file once (#pragma once). Other lines are kept. Throws if an included template is missing.
std::string flatten(const std::string& unit);

// The templates a unit includes, directly or not, in first-include order.
std::vector<std::string> included_templates(const std::string& unit);

}  // namespace flashjit
