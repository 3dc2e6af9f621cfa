// libFuzzer target: arbitrary bytes through config parsing, validation and source generation.
// Any input must either be rejected with a ConfigError or produce a flat, deterministic source;
// nothing may crash, hang or throw anything else.
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "generator/templates.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  flashjit::Config config;
  try {
    config = flashjit::parse_config_text(text, "fuzz");
  } catch (const flashjit::ConfigError&) {
    return 0;
  }
  if (!flashjit::check_config(config).empty()) return 0;
  const flashjit::KernelSource a = flashjit::generate(config);
  const flashjit::KernelSource b = flashjit::generate(config);
  if (a.unit != b.unit) std::abort();  // generation must be deterministic
  const std::string flat = flashjit::flatten(a.unit);
  if (flat.find("#include \"") != std::string::npos) std::abort();
  flashjit::generate_reference(config);
  return 0;
}
