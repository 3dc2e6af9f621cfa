// Reading the CONFIG argument of a command, and applying --arch (with "native" meaning the GPU
// of this machine).
#pragma once

#include "generator/config.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace flashjit::cli {

// Loads a config file; "-" reads standard input. Throws ConfigError.
Config load_config_input(const std::string& path);
std::string read_config_text(const std::string& path);  // throws ConfigError when unreadable

// Parses as much of `j` as it can: the fields parse_config rejects are reported and left at
// their defaults, so that the rules of the remaining fields can be checked too. `removed` gets
// the paths of the rejected fields.
Config parse_config_collecting(const nlohmann::json& j, std::vector<ConfigIssue>& issues,
                               std::vector<std::string>& removed);

// The arch to compile for on this machine's GPU ("sm_90a" on an H200). Throws NoDeviceError
// (its message starts with "no GPU" or names the missing driver) without one.
std::string native_arch();

// `arch` replaces the config's arch (when not empty); "native", from either, becomes
// native_arch(). Throws ConfigError when the linked NVRTC cannot compile for the target.
Config with_arch(Config c, const std::string& arch = "");

}  // namespace flashjit::cli
