// libFuzzer target: arbitrary bytes through the .npy reader of `flashjit run`. Any input must be
// rejected with an NpyError or give an array whose data is exactly what its shape declares and
// which the writer reproduces; nothing may crash, overflow or throw anything else.
#include "cli/npy.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  flashjit::cli::NpyArray a;
  try {
    a = flashjit::cli::parse_npy(bytes, "fuzz.npy");
  } catch (const flashjit::cli::NpyError&) {
    return 0;
  }
  uint64_t expected = 0;
  if (!flashjit::cli::npy_bytes(a.shape, a.item_size(), expected) || expected != a.data.size()) std::abort();
  if (a.elements() * a.item_size() != static_cast<int64_t>(a.data.size())) std::abort();
  flashjit::cli::NpyArray b;
  try {
    b = flashjit::cli::parse_npy(flashjit::cli::encode_npy(a.descr, a.shape, a.data.data(), a.data.size()), "again.npy");
  } catch (const flashjit::cli::NpyError&) {
    return 0;  // a descr holding a quote does not survive the writer's quoting
  }
  if (b.descr != a.descr || b.shape != a.shape || b.data != a.data) std::abort();
  return 0;
}
