// A program that uses an installed flashjit through find_package(flashjit): it compiles (or finds
// in the cache) the kernel of a config without needing a GPU, and launches nothing.
#include <flashjit/flashjit.hpp>

#include <cstdio>

int main() {
  flashjit::Config config;  // the defaults: bf16, head dim 128, no mask
  config.arch = "sm_90a";
  flashjit::Artifact kernel = flashjit::build(config);
  std::printf("%s: %zu-byte cubin, %d registers, %d bytes spilled\n", kernel.name.c_str(),
              kernel.cubin.size(), kernel.ptxas.registers, kernel.ptxas.spill_stores);
  std::printf("gpu: %s\n", flashjit::gpu_available() ? "available"
                                                     : flashjit::gpu_unavailable_reason().c_str());
  return kernel.cubin.empty() ? 1 : 0;
}
