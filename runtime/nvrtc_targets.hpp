// Whether the linked NVRTC compiles for a config's target. The generator checks the form of an
// arch and its suffix (sm_89a has no 'a' variant); which compute capabilities exist is this
// NVRTC's to say (sm_999 is well formed, and no NVRTC knows it).
#pragma once

#include "generator/config.hpp"

#include <string>
#include <vector>

namespace flashjit {

// Every target of this NVRTC that flashjit can build for: "sm_80, sm_86, ..., sm_90, sm_90a, ...".
std::string nvrtc_target_list();

// An issue naming `arch` when it is well formed but this NVRTC cannot compile for it; empty
// otherwise (malformed names are check_config's to report).
std::vector<ConfigIssue> nvrtc_target_issues(const std::string& arch);

// Throws ConfigError with those issues.
void check_nvrtc_target(const std::string& arch);

}  // namespace flashjit
