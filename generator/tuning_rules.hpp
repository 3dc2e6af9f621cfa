// Small helpers the families share for tuning checks.
#pragma once

#include "generator/config.hpp"

#include <optional>
#include <string>
#include <vector>

namespace flashjit::rules {

// A tuning field that only another family reads must be left unset.
template <class T>
void not_for_family(const std::optional<T>& field, const char* name, const char* family,
                    std::vector<ConfigIssue>& issues) {
  if (field)
    issues.push_back({std::string("tuning.") + name, "set",
                      std::string("does not apply to the ") + family + " family; leave it unset"});
}

// A field the family supports with one value only (for now).
template <class T>
void only_value(const std::optional<T>& field, const T& allowed, const char* name,
                const char* family, std::vector<ConfigIssue>& issues) {
  if (field && !(*field == allowed)) {
    std::string a;
    if constexpr (std::is_same_v<T, bool>) a = allowed ? "true" : "false";
    else a = std::to_string(allowed);
    issues.push_back({std::string("tuning.") + name, "",
                      std::string("the ") + family + " family supports only " + a});
  }
}

inline int align_up(int x, int a) { return (x + a - 1) / a * a; }

}  // namespace flashjit::rules
