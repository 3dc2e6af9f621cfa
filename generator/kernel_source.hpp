// What the generator hands to the compiler: a translation unit plus the launch facts the runtime
// needs to run the compiled kernel.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace flashjit {

// A further kernel of the same module, launched after the main one on the same stream (e.g. the
// decode family's combine pass).
struct KernelPass {
  std::string role;    // what it does: "combine"
  std::string entry;   // extern "C" kernel symbol
  int threads = 0;
  int smem_bytes = 0;
};

// How to launch a kernel. Stored in the cache manifest, so it must be plain data.
struct LaunchInfo {
  std::string family;    // sm80 | sm90 | reference
  std::string entry;     // extern "C" kernel symbol
  int threads = 0;       // threads per CTA
  int smem_bytes = 0;    // dynamic shared memory per CTA
  int block_m = 0;       // query rows per tile
  int block_n = 0;       // key rows per tile
  int cluster_m = 1;     // CTAs per cluster along M (sm90 pair_cta)
  bool persistent = false;  // grid is sized by the SM count; tiles come from the scheduler
  bool tile_counter = false;  // the dynamic scheduler: params.tile_counter must point at an
                              // int that is zero and not used by a concurrent launch
  bool uses_tma = false;    // host encodes the TMA descriptors in AttentionParams
  bool tma_store_o = false;  // ... including O's, with a box of 64 rows (one consumer's slab)
  // Longest-first tile orders: (batch, head) pairs are taken in groups whose K/V fit in this many
  // bytes of L2 (params.lpt_group); 0 means one order over all pairs.
  long long lpt_l2_bytes = 0;
  // Kernels of the same operation after the main one (its module holds every entry).
  std::vector<KernelPass> passes;
};
nlohmann::json to_json(const LaunchInfo& l);
LaunchInfo launch_info_from_json(const nlohmann::json& j);

struct KernelSource {
  std::string name;        // readable: fwd_sm90a_bf16_d128_causal_bm128_bn176
  std::string unit;        // the instantiation translation unit (includes templates)
  std::string arch;        // target, e.g. sm_90a
  std::vector<std::string> options;  // compile options the family needs besides the arch
  LaunchInfo launch;
  nlohmann::json config;   // the resolved config it was generated from
};

}  // namespace flashjit
