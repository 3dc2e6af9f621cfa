#include "cli/config_input.hpp"

#include "generator/user_json.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"
#include "runtime/nvrtc_targets.hpp"

#include <iostream>

namespace flashjit::cli {

Config load_config_input(const std::string& path) {
  if (path == "-") return parse_config_text(read_config_text(path), "<stdin>");
  return load_config_file(path);
}

std::string read_config_text(const std::string& path) {
  if (path != "-") return read_config_file(path);
  std::string text;
  if (!read_at_most(std::cin, kMaxConfigBytes, text)) throw ConfigError({{"", "<stdin>", "read error"}});
  return text;
}

namespace {
bool erase_path(nlohmann::json& j, const std::string& path) {
  const size_t dot = path.rfind('.');
  nlohmann::json* parent = &j;
  if (dot != std::string::npos) {
    for (size_t start = 0; start < dot;) {
      size_t next = path.find('.', start);
      if (next == std::string::npos || next > dot) next = dot;
      auto it = parent->find(path.substr(start, next - start));
      if (it == parent->end() || !it->is_object()) return false;
      parent = &*it;
      start = next + 1;
    }
  }
  return parent->is_object() && parent->erase(dot == std::string::npos ? path : path.substr(dot + 1)) > 0;
}
}  // namespace

Config parse_config_collecting(const nlohmann::json& input, std::vector<ConfigIssue>& issues,
                               std::vector<std::string>& removed) {
  nlohmann::json j = input;
  for (int round = 0; round < 8; ++round) {
    try {
      return parse_config(j);
    } catch (const ConfigError& e) {
      bool progress = false;
      for (const auto& i : e.issues()) {
        issues.push_back(i);
        if (!i.path.empty() && erase_path(j, i.path)) {
          removed.push_back(i.path);
          progress = true;
        }
      }
      if (!progress) break;
    }
  }
  return Config{};
}

std::string native_arch() {
  if (!gpu_available())
    throw NoDeviceError("no GPU for arch \"native\" (" + gpu_unavailable_reason() +
                        "); name a target instead, e.g. --arch sm_90a");
  return current_device().arch();
}

Config with_arch(Config c, const std::string& arch) {
  if (!arch.empty()) c.arch = arch;
  if (c.arch == "native") c.arch = native_arch();
  check_nvrtc_target(c.arch);
  return c;
}

}  // namespace flashjit::cli
