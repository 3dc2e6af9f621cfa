// The JSON paths of the rules a config breaks, as the CPU suites compare them.
#pragma once

#include "generator/config.hpp"
#include "generator/resolve.hpp"

#include <set>
#include <string>

namespace flashjit {

inline std::set<std::string> issue_paths(const Config& c) {
  std::set<std::string> paths;
  for (const auto& i : check_config(c)) paths.insert(i.path);
  return paths;
}

}  // namespace flashjit
