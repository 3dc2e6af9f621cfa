#include "runtime/nvrtc_targets.hpp"

#include "generator/arch.hpp"
#include "generator/excerpt.hpp"
#include "runtime/compiler.hpp"

#include <algorithm>

namespace flashjit {

namespace {
const std::vector<int>& supported() {
  static const std::vector<int> ccs = nvrtc_supported_compute_capabilities();
  return ccs;
}
}  // namespace

std::string nvrtc_target_list() {
  std::string s;
  for (int cc : supported()) {
    if (cc < 80) continue;  // older than flashjit's oldest family
    for (char suffix : {'\0', 'a', 'f'}) {
      if (!has_arch_variant(cc, suffix)) continue;
      s += (s.empty() ? "sm_" : ", sm_") + std::to_string(cc);
      if (suffix) s += suffix;
    }
  }
  return s;
}

std::vector<ConfigIssue> nvrtc_target_issues(const std::string& arch) {
  const auto a = parse_arch(arch);
  if (!a) return {};
  const auto& ccs = supported();
  if (std::find(ccs.begin(), ccs.end(), a->cc()) != ccs.end()) return {};
  return {{"arch", quoted_excerpt(arch),
           "NVRTC " + nvrtc_identity().substr(0, nvrtc_identity().find(' ')) +
               " cannot compile for it; it supports " + nvrtc_target_list()}};
}

void check_nvrtc_target(const std::string& arch) {
  auto issues = nvrtc_target_issues(arch);
  if (!issues.empty()) throw ConfigError(std::move(issues));
}

}  // namespace flashjit
