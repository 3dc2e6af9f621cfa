#include "gpu_test_support.hpp"

#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/artifact.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace flashjit::testing {

namespace {

Config make(const std::string& family, DType dt, DType out, int qk, int v, int rope, Mask mask,
            int group, bool varlen, bool pair) {
  Config c;
  c.arch = "native";
  c.dtype.qkv = dt;
  c.dtype.out = out;
  c.head_dim = {qk, v, rope};
  c.mask = mask;
  c.group = group;
  c.varlen = varlen;
  c.lse = true;
  c.tuning.family = family == "sm90" ? Family::sm90 : Family::sm80;
  if (pair) c.tuning.pair_cta = true;
  return c;
}

}  // namespace

std::vector<MatrixCase> correctness_matrix() {
  struct Dims { int qk, v, rope; };
  const std::vector<Dims> sm80_dims = {{64, 64, 0},   {80, 80, 0},   {96, 96, 0},  {128, 128, 0},
                                       {192, 192, 0}, {256, 256, 0}, {192, 128, 0}, {128, 128, 64}};
  const std::vector<Dims> sm90_dims = {{64, 64, 0}, {128, 128, 0}, {192, 192, 0}, {256, 256, 0},
                                       {192, 128, 0}, {128, 256, 0}, {192, 128, 64}};
  std::vector<MatrixCase> out;
  int index = 0;
  auto label = [](const std::string& family, DType dt, DType out_dt, const Dims& d, Mask m, int group, bool varlen) {
    return family + "_" + to_string(dt) + "_qk" + std::to_string(d.qk) + "_v" + std::to_string(d.v) +
           (d.rope ? "_rope" + std::to_string(d.rope) : "") + "_" + to_string(m) + "_g" + std::to_string(group) +
           (varlen ? "_varlen" : "") + (out_dt != dt ? std::string("_o") + to_string(out_dt) : "");
  };
  // FLASHJIT_TEST_FAMILIES=sm90 (or sm80) limits the matrix to one family.
  const char* only = std::getenv("FLASHJIT_TEST_FAMILIES");
  for (const std::string family : {"sm80", "sm90"}) {
    if (only && std::string(only).find(family) == std::string::npos) continue;
    const auto& dims = family == "sm80" ? sm80_dims : sm90_dims;
    for (DType dt : {DType::bf16, DType::fp16})
      for (const Dims& d : dims)
        for (Mask m : {Mask::none, Mask::causal, Mask::sliding_window}) {
          const int group = index % 3 == 1 ? 4 : 1;
          const bool varlen = index % 2 == 1;
          // Every fourth case writes the other 16-bit type (its own output descriptor and packing).
          const DType out_dt = index % 4 == 2 ? (dt == DType::bf16 ? DType::fp16 : DType::bf16) : dt;
          // Two sm90 cases in five run as pair_cta clusters sharing K/V.
          const bool pair = family == "sm90" && (index % 5 == 1 || index % 5 == 3);
          ++index;
          MatrixCase c{family, make(family, dt, out_dt, d.qk, d.v, d.rope, m, group, varlen, pair), ""};
          c.label = label(family, dt, out_dt, d, m, group, varlen) + (pair ? "_pair" : "");
          out.push_back(c);
        }
  }
  // tuning.exp2_fma_every on the sm90 family: every exponential, or one in two, on the FMA pipe.
  struct Exp2Case { DType dt; int d; Mask mask; int group; bool varlen; int every; };
  if (!only || std::string(only).find("sm90") != std::string::npos)
    for (const Exp2Case& k : {Exp2Case{DType::bf16, 64, Mask::causal, 1, false, 1},
                              Exp2Case{DType::bf16, 64, Mask::none, 4, true, 2},
                              Exp2Case{DType::fp16, 128, Mask::causal, 4, false, 2},
                              Exp2Case{DType::bf16, 256, Mask::sliding_window, 1, true, 1}}) {
      MatrixCase c{"sm90", make("sm90", k.dt, k.dt, k.d, k.d, 0, k.mask, k.group, k.varlen, false), ""};
      c.config.tuning.exp2_fma_every = k.every;
      c.label = label("sm90", k.dt, k.dt, Dims{k.d, k.d, 0}, k.mask, k.group, k.varlen) + "_exp2fma" +
                std::to_string(k.every);
      out.push_back(c);
    }
  // tuning.lazy_rescale named against its default: on where O is narrow (d64), off where it is
  // wide (d128, d256).
  struct LazyCase { DType dt; int d; Mask mask; int group; bool varlen; bool lazy; };
  if (!only || std::string(only).find("sm90") != std::string::npos)
    for (const LazyCase& k : {LazyCase{DType::bf16, 64, Mask::causal, 1, false, true},
                              LazyCase{DType::fp16, 64, Mask::sliding_window, 4, true, true},
                              LazyCase{DType::bf16, 128, Mask::none, 4, false, false},
                              LazyCase{DType::fp16, 256, Mask::causal, 1, true, false}}) {
      MatrixCase c{"sm90", make("sm90", k.dt, k.dt, k.d, k.d, 0, k.mask, k.group, k.varlen, false), ""};
      c.config.tuning.lazy_rescale = k.lazy;
      c.label = label("sm90", k.dt, k.dt, Dims{k.d, k.d, 0}, k.mask, k.group, k.varlen) +
                (k.lazy ? "_lazy" : "_eager");
      out.push_back(c);
    }
  return out;
}

bool small_shapes() {
  const char* size = std::getenv("FLASHJIT_TEST_SHAPES");
  return size && std::string(size) == "small";
}

std::vector<ProblemShape> shapes_for(const MatrixCase& mc, int group) {
  std::vector<ProblemShape> shapes;
  const Config& c = mc.config;
  auto base = [&] {
    ProblemShape s;
    s.heads_k = 2;
    s.heads_q = 2 * group;
    if (c.mask == Mask::sliding_window) {
      s.window_left = 100;
      s.window_right = 7;
    }
    return s;
  };
  if (c.varlen) {
    const bool small = small_shapes();
    ProblemShape s = base();
    s.batch = 4;
    s.seqlens_q = {1, 17, small ? 200 : 1000, small ? 300 : 4097};
    s.seqlens_k = {1, small ? 200 : 1000, 17, small ? 300 : 4097};
    shapes.push_back(s);
    ProblemShape t = base();
    t.batch = 3;
    t.seqlens_q = {300, 129, 64};
    t.seqlens_k = {300, 700, 1};
    shapes.push_back(t);
    return shapes;
  }
  const bool small = small_shapes();
  const int full[][2] = {{1, 1}, {17, 1000}, {1000, 17}, {4097, 4097}};
  const int reduced[][2] = {{1, 1}, {17, 200}, {200, 17}, {300, 300}};
  int i = 0;
  for (const auto& p : small ? reduced : full) {
    ProblemShape s = base();
    s.batch = p[0] > 2000 ? 1 : 2;
    s.seqlen_q = p[0];
    s.seqlen_k = p[1];
    s.layout = (i++ % 2) ? Layout::bhsd : Layout::bshd;
    shapes.push_back(s);
  }
  return shapes;
}

bool family_runs_here(const std::string& family) {
  if (!gpu_available()) return false;
  const DeviceInfo& d = current_device();
  if (family == "sm90") return d.cc_major == 9 && d.cc_minor == 0;
  return d.cc_major >= 8;
}

void prebuild(const std::vector<MatrixCase>& cases) {
  if (!gpu_available()) return;
  const std::string arch = current_device().arch();
  std::vector<KernelSource> sources;
  for (const auto& mc : cases) {
    if (!family_runs_here(mc.family)) continue;
    Config c = mc.config;
    c.arch = arch;
    sources.push_back(generate(c));
    sources.push_back(generate_reference(c));
  }
  std::atomic<size_t> next{0};
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < sources.size();) {
        try {
          build_artifact(sources[i]);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> g(errors_mutex);
          errors.push_back(sources[i].name + ": " + e.what());
        }
      }
    });
  for (auto& t : pool) t.join();
  for (const auto& e : errors) ADD_FAILURE() << "prebuild failed: " << e;
}

uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* e = std::getenv("FLASHJIT_TEST_SEED")) return uint64_t(std::strtoull(e, nullptr, 10));
    return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

void expect_reference_matches_cpu(const Config& c, DeviceProblem& problem, const std::string& what) {
  auto ref = get_reference_kernel(c);
  problem.poison_outputs();
  ref->launch(problem.reference_args());
  FLASHJIT_CU(driver().cuCtxSynchronize());
  std::vector<double> o, lse;
  cpu_reference(c, problem.shape(), problem.host_q(), problem.host_k(), problem.host_v(), o, lse);
  const auto gpu_o = problem.reference_output();
  const auto gpu_lse = problem.reference_lse();
  ASSERT_EQ(gpu_o.size(), o.size()) << what;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    ASSERT_TRUE(std::isfinite(gpu_o[i])) << what << ": element " << i;
    diff2 += (gpu_o[i] - o[i]) * (gpu_o[i] - o[i]);
    ref2 += o[i] * o[i];
  }
  EXPECT_LT(ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2), 1e-5) << what;
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(lse[i])) EXPECT_EQ(gpu_lse[i], -INFINITY) << what << ": row " << i;
    else EXPECT_NEAR(gpu_lse[i], lse[i], 1e-4) << what << ": row " << i;
  }
}

}  // namespace flashjit::testing
