// Shared pieces of the GPU suites: skipping without a GPU, the config matrix, parallel
// pre-building of every kernel a suite needs (NVRTC runs on all cores before the first test).
#pragma once

#include "generator/config.hpp"
#include "runtime/harness.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace flashjit::testing {

// GTEST_SKIP()s the calling test when no GPU (or no driver) is present.
#define FLASHJIT_REQUIRE_GPU()                                                        \
  do {                                                                                \
    if (!::flashjit::gpu_available())                                                 \
      GTEST_SKIP() << "no GPU: " << ::flashjit::gpu_unavailable_reason();             \
  } while (0)

// Also skips when the GPU cannot run the sm90 family (it needs sm_90).
#define FLASHJIT_REQUIRE_SM90()                                               \
  do {                                                                        \
    FLASHJIT_REQUIRE_GPU();                                                   \
    if (!::flashjit::testing::family_runs_here("sm90"))                       \
      GTEST_SKIP() << "sm90 kernels do not run here";                         \
  } while (0)

struct MatrixCase {
  std::string family;  // sm80 | sm90
  Config config;       // arch "native"
  std::string label;   // readable, used as the test name
};

// gtest prints parameters with this (instead of their bytes), e.g. in ctest's list of tests.
inline void PrintTo(const MatrixCase& c, std::ostream* os) { *os << c.label; }

// A suite's case `c` (any with a token_layout field) with its per-token K and V scales laid out
// like the cache's rows (scales.token_layout "cache").
template <class Case>
Case scales_in_cache(Case c) {
  c.token_layout = ScaleLayout::cache;
  return c;
}

// The correctness matrix: family x dtype x head dims x mask, with group, ragged batches and
// layouts varied across the cases.
std::vector<MatrixCase> correctness_matrix();

// FLASHJIT_TEST_SHAPES=small: the suites keep their lengths short (for compute-sanitizer runs).
bool small_shapes();

// The shapes each case is checked on: lengths 1, 17, 1000, 4097 in (Sq, Sk) pairs.
std::vector<ProblemShape> shapes_for(const MatrixCase& c, int group);

// Builds (compiles or loads) every kernel and reference of `cases` in parallel.
void prebuild(const std::vector<MatrixCase>& cases);

// Whether the current GPU can run `family`.
bool family_runs_here(const std::string& family);

// The seed of this run's random inputs: FLASHJIT_TEST_SEED, else from the clock (once per process).
uint64_t run_seed();

// Runs the fp32 reference kernel on `problem` and compares its O (and finite LSEs) with fp64 on
// the CPU on the problem's host copies (dequantised where the config quantises): relative O
// error below 1e-5, LSE within 1e-4, -inf where the CPU has -inf. `what` names the case.
void expect_reference_matches_cpu(const Config& config, DeviceProblem& problem, const std::string& what);

}  // namespace flashjit::testing
