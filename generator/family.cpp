#include "generator/family.hpp"

#include "generator/emit.hpp"
#include "generator/resolve.hpp"

namespace flashjit {

KernelSource source_skeleton(const Config& resolved, const ArchInfo& arch, const char* family, int threads,
                             int smem_bytes) {
  KernelSource s;
  s.name = readable_name(resolved);
  s.arch = arch.name;
  s.config = to_json(resolved);
  s.launch.family = family;
  s.launch.entry = emit::entry_symbol(s.name, canonical_json(resolved));
  s.launch.threads = threads;
  s.launch.smem_bytes = smem_bytes;
  s.launch.block_m = *resolved.tuning.BM;
  s.launch.block_n = *resolved.tuning.BN;
  return s;
}

const KernelFamily& family(Family f) {
  switch (f) {
    case Family::sm90: return family_sm90();
    case Family::decode: return family_decode();
    default: return family_sm80();
  }
}

}  // namespace flashjit
