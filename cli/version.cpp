#include "cache/store.hpp"
#include "cli/commands.hpp"
#include "runtime/artifact.hpp"
#include "runtime/compiler.hpp"

namespace flashjit::cli {

std::string version_text() {
  std::string nvrtc;
  try {
    nvrtc = nvrtc_identity();
  } catch (const std::exception& e) {
    nvrtc = std::string("unavailable (") + e.what() + ")";
  }
  return std::string("flashjit ") + version() + "\nNVRTC " + nvrtc + "\ncache format " +
         std::to_string(cache::kFormatVersion);
}

}  // namespace flashjit::cli
