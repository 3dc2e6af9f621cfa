// libFuzzer target: arbitrary bytes through the cache entry decoder and the kernel manifest
// check. The first byte says what the rest is: a whole entry file (mostly refused by the header
// checks), or a manifest sealed into an entry with a valid checksum, which reaches the JSON parser,
// its nesting and size bounds, and the field checks. Nothing may crash, hang or throw; a manifest
// the check passes must load as an artifact.
#include "cache/entry_file.hpp"
#include "runtime/artifact.hpp"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string key(64, 'f');
  const std::string file = data[0] & 1 ? std::string(rest) : flashjit::cache::encode_entry_raw(key, "fuzz", rest, "cubin");
  const auto head = flashjit::cache::parse_header(file, file.size());
  const flashjit::cache::Decoded d = flashjit::cache::decode_entry(file, key);
  if (!d.entry) return 0;
  if (!head.header || !d.header || head.header->key != key) std::abort();  // decoded what the header check refused
  (void)d.entry->manifest.dump();  // bounded nesting: the recursive dump must not exhaust the stack
  (void)flashjit::artifact_manifest_problem(d.entry->manifest, key);
  if (flashjit::artifact_manifest_problem(d.entry->manifest, "").empty()) {
    (void)flashjit::artifact_from_entry(*d.entry);  // must not throw
  } else {
    try {
      (void)flashjit::artifact_from_entry(*d.entry);
      std::abort();  // loaded what the check refused
    } catch (const std::runtime_error&) {
    }
  }
  return 0;
}
