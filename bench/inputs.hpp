// Inputs for timing: several sets of random (never zero) inputs per point, rotated so that their
// total size exceeds 3x the L2 cache and no launch finds its inputs in L2.
//
// Plain configs (dense 16-bit Q/K/V, no rope, ragged batch, paged KV, scales or LSE output) take
// their sets out of one large pool of random values per dtype, reused from point to point: the
// values are i.i.d. normal, so any shape laid over them is a valid random problem, and the grid
// pays for one upload per dtype instead of one per point. Other configs get exact
// DeviceProblems (fewer sets: their host-side generation is slow).
#pragma once

#include "runtime/harness.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flashjit::bench {

struct InputSets {
  std::vector<AttentionArgs> args;
  double bytes_per_set = 0;  // Q + K + V + O
  bool pooled = false;       // views into the shared pool (else exact DeviceProblems)
};

class InputPool {
 public:
  // l2_bytes: the device's L2; max_bytes caps the memory of the rotated sets.
  InputPool(size_t l2_bytes, uint64_t seed, size_t max_bytes = size_t(8) << 30);
  ~InputPool();

  // The sets for one point (valid until the next call).
  InputSets prepare(const Config& config, const ProblemShape& shape);

  static bool poolable(const Config& config);
  // Number of sets whose total exceeds 3x L2, within [1, max_sets] and the memory cap.
  size_t sets_for(double bytes_per_set, size_t max_sets) const;

 private:
  struct Flat {
    std::unique_ptr<DeviceProblem> problem;
    size_t elements = 0;  // of each of Q, K, V, O
  };
  DeviceProblem& flat(const Config& config, size_t elements);

  size_t l2_bytes_;
  uint64_t seed_;
  size_t max_bytes_;
  std::map<std::string, Flat> flat_;  // by "qkv/out" dtype
  std::vector<std::unique_ptr<DeviceProblem>> exact_;
};

}  // namespace flashjit::bench
