// The decode family on the GPU: every page-size class, split counts from one to many, groups 1-16,
// 1-16 query tokens (causal among themselves), eight-warp tiles (BN 64 and 128), the wgmma pass
// (sm_90a: one or two warpgroups, 64- and 128-row tiles, d64-d256) beside mma.sync at 64 packed
// rows, cache lengths
// 0, 1, 15, 16, 17, 4095 and 65537
// (at most 1025 with FLASHJIT_TEST_SHAPES=small),
// windows, ragged queries, K/V loads by TMA boxes (sm_90a) and by cp.async gathers, fp8 caches (e4m3, e5m2) with every scale granularity, shared K/V
// latent caches (MLA: 576 = 512 + 64 rope, V 512, up to 128 heads; bf16, fp16 and fp8 with a 16-bit
// rope part; decode steps and prefill chunks of up to 100 tokens), against the fp32 reference
// (itself checked against fp64 on the CPU with paged inputs); the combine pass alone against a CPU merge of the splits' partials; bad
// page-table entries; and a CUDA graph captured once and replayed on fresh data.
#include "gpu_test_support.hpp"

#include "runtime/device.hpp"
#include "runtime/driver.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace flashjit::testing {
namespace {

using G = ScaleGranularity;

struct DecodeCase {
  const char* label;
  DType dtype;
  int d, group, tokens, page;  // page 0: contiguous cache
  Mask mask;
  bool varlen;
  int splits;  // 0: chosen per launch
  int warps = 0, bn = 0;  // tuning.num_warps and BN; 0: the defaults
  ScaleGranularity q_scale = ScaleGranularity::none, k_scale = ScaleGranularity::none,
                   v_scale = ScaleGranularity::none;
  std::optional<DType> scale_dtype = {};  // per-token scales
  int warpgroups = -1, stages = 0;         // tuning.consumer_warpgroups (-1: auto), num_kv_stages (0: auto)
  std::optional<KvLoads> loads = {};       // tuning.kv_loads (unset: auto)
  std::optional<DType> q_dtype = {};       // dtype.q: a 16-bit Q beside an fp8 cache
  ScaleLayout token_layout = ScaleLayout::positions;  // per-token K scales' layout
};
void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.label; }


// `c` with its split pass pinned: 0 mma.sync warps, 1 or 2 wgmma warpgroups (sm_90a).
DecodeCase pinned(DecodeCase c, int warpgroups, int stages = 0) {
  c.warpgroups = warpgroups;
  c.stages = stages;
  return c;
}

// `c` (a decode or latent case) with a 16-bit Q of type `q` beside its fp8 cache (not quantised).
template <class Case>
Case with_q(Case c, DType q) {
  c.q_dtype = q;
  return c;
}

// `c` with its K/V loads pinned (auto takes TMA on sm_90a wherever the tile allows).
DecodeCase loading(DecodeCase c, KvLoads loads) {
  c.loads = loads;
  return c;
}

Config decode_config(const DecodeCase& k) {
  Config c;
  c.arch = current_device().arch();
  const bool fp8 = k.dtype == DType::e4m3 || k.dtype == DType::e5m2;
  c.dtype = {k.dtype, fp8 ? DType::bf16 : k.dtype, std::nullopt, k.scale_dtype};
  c.dtype.q = k.q_dtype;
  c.scales = {k.q_scale, k.k_scale, k.v_scale};
  c.scales.token_layout = k.token_layout;
  c.head_dim = {k.d, k.d, 0};
  c.group = k.group;
  c.mask = k.mask;
  c.varlen = k.varlen;
  c.lse = true;
  if (k.page) c.kv_layout = {true, k.page};
  c.tuning.family = Family::decode;
  c.tuning.max_seqlen_q = k.tokens;
  if (k.warps) c.tuning.num_warps = k.warps;
  if (k.bn) c.tuning.BN = k.bn;
  if (k.warpgroups >= 0) c.tuning.consumer_warpgroups = k.warpgroups;
  if (k.stages) c.tuning.num_kv_stages = k.stages;
  if (k.loads) c.tuning.kv_loads = *k.loads;
  return c;
}

// One decode step of `batch` sequences: seqlen_q query tokens against seqlen_k keys (or the
// per-entry cache_lens), heads_k KV heads of `group` query heads each.
ProblemShape step_shape(int batch, int seqlen_q, int seqlen_k, std::vector<int> cache_lens = {}, int heads_k = 2,
                        int group = 4) {
  ProblemShape s;
  s.heads_k = heads_k;
  s.heads_q = heads_k * group;
  s.batch = batch;
  s.seqlen_q = seqlen_q;
  s.seqlen_k = seqlen_k;
  s.cache_lens = std::move(cache_lens);
  return s;
}

// Batches whose cache lengths cover the edges: empty, one key, around a 16-key page, a long
// cache, and one longer than 64k keys.
std::vector<ProblemShape> decode_shapes(const DecodeCase& k, int heads_k = 2) {
  std::vector<ProblemShape> shapes;
  const std::vector<std::vector<int>> caches =
      small_shapes() ? std::vector<std::vector<int>>{{0, 1, 17}, {15, 16, 300, 33}, {1025}}
                     : std::vector<std::vector<int>>{{0, 1, 17}, {15, 16, 4095, 333}, {65537}};
  for (const auto& lens : caches) {
    ProblemShape s;
    s.heads_k = heads_k;
    s.heads_q = heads_k * k.group;
    s.batch = int(lens.size());
    s.num_splits = k.splits;
    if (k.mask == Mask::sliding_window) {
      s.window_left = 700;
      s.window_right = 0;
    }
    int longest = 0;
    for (int l : lens) longest = std::max(longest, l);
    if (k.varlen) {
      s.seqlens_k = lens;
      for (int b = 0; b < s.batch; ++b) s.seqlens_q.push_back(b % 3 == 1 ? 1 : b % 3 == 2 ? 0 : k.tokens);
    } else {
      s.seqlen_q = k.tokens;
      s.seqlen_k = longest;
      s.cache_lens = lens;
    }
    shapes.push_back(s);
  }
  return shapes;
}

const std::vector<DecodeCase>& decode_cases() {
  static const std::vector<DecodeCase> cases = {
      {"bf16_d128_g4_q1_contiguous", DType::bf16, 128, 4, 1, 0, Mask::none, false, 0},
      {"bf16_d128_g8_q1_page16", DType::bf16, 128, 8, 1, 16, Mask::none, false, 0},
      {"bf16_d128_g8_q4_page64_causal", DType::bf16, 128, 8, 4, 64, Mask::causal, false, 0},
      {"fp16_d64_g1_q1_page1", DType::fp16, 64, 1, 1, 1, Mask::none, false, 0},
      {"bf16_d128_g16_q16_page256_causal", DType::bf16, 128, 16, 16, 256, Mask::causal, false, 0},
      {"bf16_d256_g4_q2_page16_causal", DType::bf16, 256, 4, 2, 16, Mask::causal, false, 0},
      {"bf16_d128_g4_q1_page32_window", DType::bf16, 128, 4, 1, 32, Mask::sliding_window, false, 0},
      {"fp16_d128_g2_q8_page16_causal_varlen", DType::fp16, 128, 2, 8, 16, Mask::causal, true, 0},
      {"bf16_d128_g4_q4_contiguous_causal_varlen", DType::bf16, 128, 4, 4, 0, Mask::causal, true, 0},
      {"bf16_d128_g4_q1_page16_one_split", DType::bf16, 128, 4, 1, 16, Mask::none, false, 1},
      {"bf16_d128_g4_q1_page16_seven_splits", DType::bf16, 128, 4, 1, 16, Mask::none, false, 7},
      {"bf16_d128_g4_q1_page16_many_splits", DType::bf16, 128, 4, 1, 16, Mask::none, false, 128},
      {"bf16_d96_g3_q3_page8_causal", DType::bf16, 96, 3, 3, 8, Mask::causal, false, 0},
      // Eight mma.sync warps: two key warps per 16-row block at 64 rows, eight at 16 (the tuning
      // variants the benchmark compares).
      pinned({"bf16_d128_g4_q16_page16_causal_w8_bn128", DType::bf16, 128, 4, 16, 16, Mask::causal, false, 0, 8, 128}, 0),
      pinned({"bf16_d128_g4_q16_page16_causal_w8", DType::bf16, 128, 4, 16, 16, Mask::causal, false, 0, 8, 0}, 0),
      pinned({"bf16_d128_g16_q4_page16_mma_sync", DType::bf16, 128, 16, 4, 16, Mask::none, false, 0}, 0),
      // wgmma warpgroups (sm_90a, 64 packed rows or more; mma.sync elsewhere): the default tile
      // (two warpgroups, 64 keys each), one warpgroup, 32 keys a warpgroup over three stages,
      // head dims 64-256, every page-size class, splits, windows, ragged queries, 256 rows (four
      // row blocks: bf16_d128_g16_q16_page256_causal above).
      {"bf16_d128_g4_q16_page16_causal_wgmma", DType::bf16, 128, 4, 16, 16, Mask::causal, false, 0},
      {"bf16_d128_g4_q16_page16_seven_splits_wgmma", DType::bf16, 128, 4, 16, 16, Mask::none, false, 7},
      pinned({"fp16_d128_g8_q8_page64_causal_one_warpgroup", DType::fp16, 128, 8, 8, 64, Mask::causal, false, 0, 4}, 1),
      pinned({"bf16_d128_g4_q16_contiguous_bn64_3stages", DType::bf16, 128, 4, 16, 0, Mask::causal, false, 0, 8, 64}, 2, 3),
      {"bf16_d256_g16_q4_page1_causal_varlen_wgmma", DType::bf16, 256, 16, 4, 1, Mask::causal, true, 0},
      {"bf16_d64_g16_q4_contiguous_window_wgmma", DType::bf16, 64, 16, 4, 0, Mask::sliding_window, false, 0},
      {"fp16_d192_g8_q8_page32_one_split_wgmma", DType::fp16, 192, 8, 8, 32, Mask::none, false, 1},
      {"bf16_d128_g8_q1_page16_w8_bn128", DType::bf16, 128, 8, 1, 16, Mask::none, false, 0, 8, 128},
      // 128-row wgmma tiles (two warpgroups of 64 rows on every key; the default from 128 packed
      // rows): paged and contiguous, splits, a window, ragged queries (CTAs with fewer rows),
      // d64 and d256, TMA boxes.
      {"bf16_d128_g8_q16_page16_causal_wgmma128", DType::bf16, 128, 8, 16, 16, Mask::causal, false, 0},
      {"fp16_d128_g8_q16_page64_seven_splits_wgmma128", DType::fp16, 128, 8, 16, 64, Mask::none, false, 7},
      {"bf16_d256_g8_q16_contiguous_causal_varlen_wgmma128", DType::bf16, 256, 8, 16, 0, Mask::causal, true, 0},
      {"bf16_d64_g16_q8_page1_window_wgmma128", DType::bf16, 64, 16, 8, 1, Mask::sliding_window, false, 0},
      loading({"bf16_d128_g8_q16_page16_causal_varlen_wgmma128_tma", DType::bf16, 128, 8, 16, 16, Mask::causal, true, 0},
              KvLoads::tma),
      // fp8 caches: K/V widened in registers, Q dequantised into fp16; every scale granularity.
      {"e4m3_d128_g4_q1_page16_per_tensor", DType::e4m3, 128, 4, 1, 16, Mask::none, false, 0, 0, 0, G::per_tensor,
       G::per_tensor, G::per_tensor},
      {"e4m3_d128_g8_q4_page64_causal_per_head", DType::e4m3, 128, 8, 4, 64, Mask::causal, false, 0, 0, 0,
       G::per_head, G::per_head, G::per_head},
      {"e5m2_d64_g1_q1_contiguous_unscaled", DType::e5m2, 64, 1, 1, 0, Mask::none, false, 0},
      {"e4m3_d128_g4_q16_page16_causal_per_token_bf16", DType::e4m3, 128, 4, 16, 16, Mask::causal, false, 0, 0, 0,
       G::per_token, G::per_token, G::per_head, DType::bf16},
      {"e4m3_d256_g16_q2_page1_causal_varlen_per_token", DType::e4m3, 256, 16, 2, 1, Mask::causal, true, 0, 0, 0,
       G::per_token, G::per_token, G::per_tensor, DType::fp32},
      {"e4m3_d96_g2_q1_page8_window_per_token_k", DType::e4m3, 96, 2, 1, 8, Mask::sliding_window, false, 0, 0, 0,
       G::none, G::per_token, G::none, DType::fp32},
      {"e5m2_d128_g4_q3_contiguous_causal_varlen_per_head", DType::e5m2, 128, 4, 3, 0, Mask::causal, true, 0, 0, 0,
       G::per_head, G::per_head, G::per_head},
      {"e4m3_d128_g8_q1_page16_seven_splits_w8_bn128", DType::e4m3, 128, 8, 1, 16, Mask::none, false, 7, 8, 128,
       G::per_tensor, G::per_head, G::per_tensor},
      // A 16-bit Q beside an fp8 cache (dtype.q), unquantised.
      with_q(DecodeCase{"e4m3_d128_g8_q4_page16_causal_bf16_q_per_tensor", DType::e4m3, 128, 8, 4, 16, Mask::causal,
                        false, 0, 0,
              0, G::none, G::per_tensor, G::per_tensor},
             DType::bf16),
      with_q(DecodeCase{"e4m3_d128_g4_q1_page64_fp16_q_per_token_k", DType::e4m3, 128, 4, 1, 64, Mask::none, false, 0,
                        0, 0,
              G::none, G::per_token, G::per_head, DType::fp32},
             DType::fp16),
      // Per-token K scales laid out like the cache's rows (scales.token_layout "cache").
      scales_in_cache(DecodeCase{"e4m3_d128_g4_q4_page16_causal_per_token_k_in_cache", DType::e4m3, 128, 4, 4, 16,
                                 Mask::causal, false, 0, 0, 0, G::per_token, G::per_token, G::per_head, DType::fp32}),
      // Per-token V scales too (vLLM's per-token-head fp8 cache), beside the pages and by position.
      scales_in_cache(with_q(DecodeCase{"e4m3_d128_g8_q1_page16_bf16_q_per_token_kv_in_cache", DType::e4m3, 128, 8,
                                        1, 16,
                              Mask::none, false, 0, 0, 0, G::none, G::per_token, G::per_token, DType::fp32},
                             DType::bf16)),
      {"e4m3_d128_g4_q4_page64_causal_per_token_kv_seven_splits", DType::e4m3, 128, 4, 4, 64, Mask::causal, false, 7, 0,
       0, G::per_token, G::per_token, G::per_token, DType::bf16},
      {"e5m2_d64_g2_q2_page1_per_token_v_by_position", DType::e5m2, 64, 2, 2, 1, Mask::causal, false, 0, 0, 0,
       G::per_tensor, G::per_head, G::per_token, DType::fp32},
      scales_in_cache(DecodeCase{"e4m3_d128_g8_q1_contiguous_varlen_per_token_k_in_cache_bf16", DType::e4m3, 128, 8, 1,
                                 0, Mask::none, true, 0, 0, 0, G::none, G::per_token, G::none, DType::bf16}),
      scales_in_cache(with_q(DecodeCase{"e4m3_d128_g8_q2_page64_bf16_q_per_token_k_in_cache", DType::e4m3, 128, 8,
                                        2, 64,
                              Mask::causal, false, 7, 0, 0, G::none, G::per_token, G::per_tensor, DType::fp32},
                             DType::bf16)),
      with_q(DecodeCase{"e5m2_d64_g1_q2_contiguous_causal_varlen_bf16_q_unscaled", DType::e5m2, 64, 1, 2, 0,
                        Mask::causal, true,
              0},
             DType::bf16),
      // K/V loads: auto takes TMA boxes on sm_90a for fp8 caches where a tile holds whole pages
      // of 8 rows or more, lies inside one, or reads a contiguous cache (the fp8 cases above),
      // cp.async gathers otherwise; these pin TMA for 16-bit caches (paged, contiguous ragged,
      // the wgmma pass), the box shapes TMA has (pages of 8, the smallest box; a 64-key tile
      // inside a 128-row page; 128 keys of 8 warps over pages of 32), and the gathers for fp8.
      loading({"bf16_d128_g8_q1_page16_tma", DType::bf16, 128, 8, 1, 16, Mask::none, false, 0}, KvLoads::tma),
      loading({"bf16_d128_g4_q4_contiguous_causal_varlen_tma", DType::bf16, 128, 4, 4, 0, Mask::causal, true, 0},
              KvLoads::tma),
      loading({"bf16_d128_g4_q16_page16_causal_wgmma_tma", DType::bf16, 128, 4, 16, 16, Mask::causal, false, 0},
              KvLoads::tma),
      loading({"fp16_d64_g8_q2_page8_causal_tma", DType::fp16, 64, 8, 2, 8, Mask::causal, false, 0}, KvLoads::tma),
      loading({"bf16_d128_g4_q1_page128_seven_splits_tma", DType::bf16, 128, 4, 1, 128, Mask::none, false, 7},
              KvLoads::tma),
      loading({"bf16_d128_g8_q1_page32_w8_bn128_window_tma", DType::bf16, 128, 8, 1, 32, Mask::sliding_window, false,
               0, 8, 128},
              KvLoads::tma),
      loading({"bf16_d256_g4_q1_contiguous_tma", DType::bf16, 256, 4, 1, 0, Mask::none, false, 0}, KvLoads::tma),
      loading({"e4m3_d128_g4_q1_page16_per_tensor_cp_async", DType::e4m3, 128, 4, 1, 16, Mask::none, false, 0, 0, 0,
               G::per_tensor, G::per_tensor, G::per_tensor},
              KvLoads::cp_async),
      {"e5m2_d256_g4_q4_page16_causal_varlen_per_head", DType::e5m2, 256, 4, 4, 16, Mask::causal, true, 0, 0, 0,
       G::per_head, G::per_head, G::per_head},
  };
  return cases;
}

// `config`'s kernel against the reference on each shape, one [check] line each.
void expect_matches_reference(const char* label, const Config& config, const std::vector<ProblemShape>& shapes) {
  auto kernel = get_kernel(config);
  uint64_t seed = run_seed();
  for (const ProblemShape& shape : shapes) {
    DeviceProblem problem(config, shape, ++seed);
    const CheckResult r = check_against_reference(*kernel, config, problem);
    std::printf("[check] %-44s %-56s rel=%.3e lse=%.2e nonfinite=%zu %s\n", label, shape.describe().c_str(),
                r.rel_error, r.lse_max_error, r.nonfinite, r.passed ? "ok" : "FAIL");
    EXPECT_TRUE(r.passed) << kernel->name() << " on " << shape.describe() << ": " << r.summary();
  }
}

class DecodeMatrix : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeMatrix, MatchesReference) {
  FLASHJIT_REQUIRE_GPU();
  const DecodeCase& k = GetParam();
  if (k.loads == KvLoads::tma && current_device().arch() != "sm_90a") GTEST_SKIP() << "TMA loads need sm_90a";
  expect_matches_reference(k.label, decode_config(k), decode_shapes(k));
}

INSTANTIATE_TEST_SUITE_P(Decode, DecodeMatrix, ::testing::ValuesIn(decode_cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) { return std::string(info.param.label); });

// Shared K/V (MLA's latent cache): V is the first dv columns of each K row; the rope columns
// live in their own tensors (or, rope 0, in K's rows: FlashMLA's one-buffer layout).
struct LatentCase {
  const char* label;
  DType dtype;
  int qk, v, rope, group, tokens, page;
  Mask mask;
  bool varlen;
  int splits;
  int heads_k = 1;
  int bm = 0, warps = 0, bn = 0;  // 0: the defaults
  int warpgroups = -1;             // tuning.consumer_warpgroups; -1: the default
  int stages = 0;
  std::optional<KvLoads> loads;  // tuning.kv_loads (tma: the seesaw pass, sm_90a)
  // fp8 caches: Q's and K's scales (V takes K's), per-token scales' type, the rope part's type.
  ScaleGranularity q_scale = ScaleGranularity::none, k_scale = ScaleGranularity::none;
  std::optional<DType> scale_dtype = {};
  DType rope_dtype = DType::bf16;
  std::optional<DType> q_dtype = {};  // dtype.q: a 16-bit Q beside an fp8 cache
  ScaleLayout token_layout = ScaleLayout::positions;  // per-token K scales' layout
  int k_block = 0;  // scales.k_block: per-token K scales of each block of columns
  std::optional<bool> swap_qk;  // tuning.swap_qk: S^T = K Q^T on wgmma warpgroups (sm_90a); unset: the default
};
void PrintTo(const LatentCase& c, std::ostream* os) { *os << c.label; }

// `c` with one per-token K scale per `block` nope columns of each key row, beside the cache's
// rows (FlashMLA's fp8 latent rows: 128).
LatentCase in_blocks(LatentCase c, int block = 128) {
  c.token_layout = ScaleLayout::cache;
  c.k_block = block;
  return c;
}

// `c` on an fp8 cache with these scales and a 16-bit rope part.
LatentCase fp8_latent(LatentCase c, ScaleGranularity q, ScaleGranularity k, std::optional<DType> scale_dtype = {},
                      DType rope = DType::bf16) {
  c.q_scale = q;
  c.k_scale = k;
  c.scale_dtype = scale_dtype;
  c.rope_dtype = rope;
  return c;
}

// `c` with S^T = K Q^T on wgmma warpgroups (tuning.swap_qk, sm_90a).
LatentCase swapped(LatentCase c) {
  c.swap_qk = true;
  return c;
}

// `c` with Q K^T on mma.sync where sm_90a's default would swap it.
LatentCase unswapped(LatentCase c) {
  c.swap_qk = false;
  return c;
}

// `c` pinned to TMA loads: the seesaw pass (sm_90a).
LatentCase seesaw(LatentCase c) {
  c.loads = KvLoads::tma;
  return c;
}

// The decode step a latent case runs: its dtype, group, tokens, cache and splits.
DecodeCase step_of(const LatentCase& k) {
  return {k.label, k.dtype, k.qk, k.group, k.tokens, k.page, k.mask, k.varlen, k.splits};
}

Config latent_config(const LatentCase& k) {
  Config c = decode_config(step_of(k));
  c.head_dim = {k.qk, k.v, k.rope};
  c.kv_layout.shared_kv = true;
  if (k.dtype == DType::e4m3 || k.dtype == DType::e5m2) {
    c.dtype = {k.dtype, DType::bf16, k.rope ? std::optional<DType>(k.rope_dtype) : std::nullopt, k.scale_dtype};
    c.scales = {k.q_scale, k.k_scale, ScaleGranularity::none};
    c.dtype.q = k.q_dtype;
    c.scales.token_layout = k.token_layout;
    c.scales.k_block = k.k_block;
  }
  if (k.bm) c.tuning.BM = k.bm;
  if (k.warps) c.tuning.num_warps = k.warps;
  if (k.bn) c.tuning.BN = k.bn;
  if (k.warpgroups >= 0) c.tuning.consumer_warpgroups = k.warpgroups;
  if (k.stages) c.tuning.num_kv_stages = k.stages;
  if (k.loads) c.tuning.kv_loads = *k.loads;
  if (k.swap_qk) c.tuning.swap_qk = *k.swap_qk;
  return c;
}

const std::vector<LatentCase>& latent_cases() {
  static const std::vector<LatentCase> cases = {
      {"mla_bf16_g16_q1_page64", DType::bf16, 576, 512, 64, 16, 1, 64, Mask::none, false, 0},
      {"mla_bf16_g128_q1_page64", DType::bf16, 576, 512, 64, 128, 1, 64, Mask::none, false, 0},
      unswapped({"mla_bf16_g16_q2_page64_causal", DType::bf16, 576, 512, 64, 16, 2, 64, Mask::causal, false, 0}),
      {"mla_fp16_g32_q1_page16_seven_splits", DType::fp16, 576, 512, 64, 32, 1, 16, Mask::none, false, 7},
      {"mla_bf16_g16_q1_page1_one_split", DType::bf16, 576, 512, 64, 16, 1, 1, Mask::none, false, 1},
      {"mla_bf16_g64_q1_page64_window", DType::bf16, 576, 512, 64, 64, 1, 64, Mask::sliding_window, false, 0},
      {"mla_bf16_g16_q4_contiguous_causal_varlen", DType::bf16, 576, 512, 64, 16, 4, 0, Mask::causal, true, 0},
      // FlashMLA's layout: the rope columns are the last 64 of each K row, no rope tensors.
      {"mla_one_buffer_bf16_g16_q1_page64", DType::bf16, 576, 512, 0, 16, 1, 64, Mask::none, false, 0},
      // V 256 of a 576-column latent row; two latent heads.
      {"latent_v256_bf16_g8_q2_page16_causal", DType::bf16, 576, 256, 64, 8, 2, 16, Mask::causal, false, 0, 2},
      // Tilings other than the defaults: 16-row blocks for 128 heads (eight row blocks); two
      // warps per row block (BM 32, four warps); 64-key tiles.
      {"mla_bf16_g128_q1_page64_bm16", DType::bf16, 576, 512, 64, 128, 1, 64, Mask::none, false, 0, 1, 16},
      {"mla_bf16_g16_q2_page64_causal_bm32_w4", DType::bf16, 576, 512, 64, 16, 2, 64, Mask::causal, false, 0, 1, 32, 4},
      {"mla_bf16_g16_q1_page64_bn64", DType::bf16, 576, 512, 64, 16, 1, 64, Mask::none, false, 0, 1, 0, 0, 64},
      // From 64 packed rows on, sm_90a takes a wgmma pass by default (the cases above with 64 or
      // more rows run the seesaw pass there, TMA loads: pages of 64); these cover the ring's
      // wgmma pass (cp.async gathers) and the mma.sync pass where wgmma would be the default.
      {"mla_wgmma_bf16_g128_q2_page64_causal", DType::bf16, 576, 512, 64, 128, 2, 64, Mask::causal, false, 0, 1, 0, 0,
       0, -1, 0, KvLoads::cp_async},
      {"mla_wgmma_fp16_g128_q1_page1_one_split", DType::fp16, 576, 512, 64, 128, 1, 1, Mask::none, false, 1},
      {"mla_wgmma_one_buffer_bf16_g64_q1_page16", DType::bf16, 576, 512, 0, 64, 1, 16, Mask::none, false, 0, 1, 0, 0,
       0, -1, 0, KvLoads::cp_async},
      {"latent_wgmma_v256_bf16_g64_q1_page64", DType::bf16, 576, 256, 64, 64, 1, 64, Mask::none, false, 0, 2, 0, 0, 0,
       -1, 0, KvLoads::cp_async},
      {"mla_wgmma_fp16_g32_q1_page16_seven_splits", DType::fp16, 576, 512, 64, 32, 1, 16, Mask::none, false, 7, 1, 0, 0,
       0, 2, 0, KvLoads::cp_async},
      {"mla_wgmma_bf16_g32_q2_page64_causal_bn16_four_stages", DType::bf16, 576, 512, 64, 32, 2, 64, Mask::causal,
       false, 0, 1, 0, 0, 16, -1, 4, KvLoads::cp_async},
      {"mla_wgmma_bf16_g128_q1_page64_bn32_three_stages", DType::bf16, 576, 512, 64, 128, 1, 64, Mask::none, false, 3, 1,
       0, 0, 32, -1, 3, KvLoads::cp_async},
      {"mla_mma_sync_bf16_g128_q1_page64", DType::bf16, 576, 512, 64, 128, 1, 64, Mask::none, false, 0, 1, 0, 0, 0, 0},
      // TMA loads: the seesaw pass (two warpgroups on alternate tiles and a loader warpgroup),
      // pinned (it is the default where TMA boxes apply on sm_90a).
      {"mla_seesaw_bf16_g128_q1_page64", DType::bf16, 576, 512, 64, 128, 1, 64, Mask::none, false, 0, 1, 0, 0, 0, -1,
       0, KvLoads::tma},
      {"mla_seesaw_bf16_g128_q2_page64_causal_one_split", DType::bf16, 576, 512, 64, 128, 2, 64, Mask::causal, false,
       1, 1, 0, 0, 0, -1, 0, KvLoads::tma},
      {"mla_seesaw_fp16_g64_q1_page16_seven_splits", DType::fp16, 576, 512, 64, 64, 1, 16, Mask::none, false, 7, 1, 0,
       0, 0, -1, 0, KvLoads::tma},
      {"mla_seesaw_one_buffer_bf16_g64_q1_page64", DType::bf16, 576, 512, 0, 64, 1, 64, Mask::none, false, 0, 1, 0, 0,
       0, -1, 0, KvLoads::tma},
      {"mla_seesaw_bf16_g16_q4_contiguous_causal_varlen", DType::bf16, 576, 512, 64, 16, 4, 0, Mask::causal, true, 0,
       1, 0, 0, 0, -1, 0, KvLoads::tma},
      {"latent_seesaw_v256_bf16_g64_q1_page64", DType::bf16, 576, 256, 64, 64, 1, 64, Mask::none, false, 0, 2, 0, 0, 0,
       -1, 0, KvLoads::tma},
      {"mla_seesaw_bf16_g64_q1_page8_window_bn16", DType::bf16, 576, 512, 64, 64, 1, 8, Mask::sliding_window, false, 0,
       1, 0, 0, 16, -1, 0, KvLoads::tma},
      // tuning.swap_qk (sm_90a): each 16 rows' four warps compute S^T = K Q^T as one wgmma
      // warpgroup over 64-key tiles (QGMMA on an fp8 cache, Q's and K's scales applied to S).
      swapped({"mla_swapqk_bf16_g16_q1_page64", DType::bf16, 576, 512, 64, 16, 1, 64, Mask::none, false, 0}),
      swapped({"latent_swapqk_v256_fp16_g8_q2_page16_causal", DType::fp16, 576, 256, 64, 8, 2, 16, Mask::causal, false,
               0}),
      swapped(fp8_latent({"mla_swapqk_e4m3_g16_q1_page64_per_token", DType::e4m3, 576, 512, 64, 16, 1, 64, Mask::none,
                          false, 0},
                         G::per_tensor, G::per_token, DType::fp32)),
      swapped(fp8_latent({"mla_swapqk_e4m3_g8_q2_page16_causal_seven_splits_per_token_bf16", DType::e4m3, 576, 512, 64,
                          8, 2, 16, Mask::causal, false, 7},
                         G::per_token, G::per_token, DType::bf16)),
      swapped(fp8_latent({"mla_swapqk_e5m2_g16_q1_page1_per_head", DType::e5m2, 576, 512, 64, 16, 1, 1, Mask::none,
                          false, 0},
                         G::per_head, G::per_tensor)),
      swapped(fp8_latent({"mla_swapqk_e4m3_g4_q4_contiguous_causal_varlen_unscaled", DType::e4m3, 576, 512, 64, 4, 4,
                          0, Mask::causal, true, 0},
                         G::none, G::none)),
      // 32 rows: two warpgroups, each over its 16 rows of every key (24 rows: the second's last
      // eight are past the step's rows).
      swapped({"mla_swapqk_bf16_g16_q2_page64_causal", DType::bf16, 576, 512, 64, 16, 2, 64, Mask::causal, false, 0}),
      swapped(fp8_latent({"mla_swapqk_e4m3_g32_q1_page64_per_token", DType::e4m3, 576, 512, 64, 32, 1, 64, Mask::none,
                          false, 0},
                         G::per_tensor, G::per_token, DType::fp32)),
      swapped(fp8_latent({"mla_swapqk_e4m3_g12_q2_page16_causal_three_splits_per_head", DType::e4m3, 576, 512, 64, 12,
                          2, 16, Mask::causal, false, 3},
                         G::per_token, G::per_head, DType::bf16)),
      // fp8 caches (mma.sync, every target): fp8 nope columns beside a 16-bit rope part, V
      // dequantised with K's scales; every K scale granularity, per-token scales in fp32 and bf16.
      // sm_90a swaps Q K^T by default where it applies; the unswapped cases keep mma.sync's.
      unswapped(fp8_latent({"mla_e4m3_g16_q1_page64_per_token", DType::e4m3, 576, 512, 64, 16, 1, 64, Mask::none,
                            false, 0},
                           G::per_tensor, G::per_token, DType::fp32)),
      fp8_latent({"mla_e4m3_g128_q2_page64_causal_per_token_bf16_mma_sync", DType::e4m3, 576, 512, 64, 128, 2, 64,
                  Mask::causal, false, 0, 1, 0, 0, 0, 0},
                 G::per_token, G::per_token, DType::bf16),
      fp8_latent({"mla_e4m3_g32_q1_page16_seven_splits_per_tensor", DType::e4m3, 576, 512, 64, 32, 1, 16, Mask::none,
                  false, 7},
                 G::per_head, G::per_tensor),
      unswapped(fp8_latent({"mla_e5m2_g16_q1_page16_per_token_bf16", DType::e5m2, 576, 512, 64, 16, 1, 16, Mask::none,
                            false, 0},
                           G::per_token, G::per_token, DType::bf16)),
      fp8_latent({"mla_e5m2_g16_q4_contiguous_causal_varlen_unscaled", DType::e5m2, 576, 512, 64, 16, 4, 0, Mask::causal,
                  true, 0},
                 G::none, G::none),
      fp8_latent({"mla_e4m3_g16_q1_page1_one_split_per_token_fp16_rope", DType::e4m3, 576, 512, 64, 16, 1, 1, Mask::none,
                  false, 1},
                 G::none, G::per_token, DType::fp32, DType::fp16),
      fp8_latent({"latent_e4m3_v256_g8_q2_page16_causal_per_head", DType::e4m3, 576, 256, 64, 8, 2, 16, Mask::causal,
                  false, 0, 2},
                 G::per_head, G::per_head),
      fp8_latent({"mla_e4m3_g64_q1_page64_window_per_token", DType::e4m3, 576, 512, 64, 64, 1, 64,
                  Mask::sliding_window, false, 0},
                 G::per_tensor, G::per_token, DType::fp32),
      fp8_latent({"mla_e4m3_g16_q2_contiguous_varlen_per_token_bm32_w8", DType::e4m3, 576, 512, 64, 16, 2, 0,
                  Mask::causal, true, 0, 1, 32, 8},
                 G::per_token, G::per_token, DType::fp32),
      with_q(fp8_latent({"mla_e4m3_bf16_q_g16_q1_page64_per_token", DType::e4m3, 576, 512, 64, 16, 1, 64, Mask::none,
                         false, 0},
                        G::none, G::per_token, DType::fp32),
             DType::bf16),
      with_q(fp8_latent({"mla_e4m3_bf16_q_g128_q2_page16_causal_per_tensor", DType::e4m3, 576, 512, 64, 128, 2, 16,
                         Mask::causal, false, 0},
                        G::none, G::per_tensor),
             DType::bf16),
      scales_in_cache(fp8_latent({"mla_e4m3_g16_q1_page64_per_token_k_in_cache", DType::e4m3, 576, 512, 64, 16, 1,
                                  64, Mask::none, false, 0},
                                 G::per_tensor, G::per_token, DType::fp32)),
      scales_in_cache(with_q(fp8_latent({"mla_e4m3_bf16_q_g64_q2_page16_causal_per_token_k_in_cache_bf16", DType::e4m3,
                                         576, 512, 64, 64, 2, 16, Mask::causal, false, 0},
                                        G::none, G::per_token, DType::bf16),
                             DType::bf16)),
      // Per-block K scales (FlashMLA's fp8 rows: one per 128 columns), fp8 or bf16 Q, 16 and
      // 128 heads (16- and 32-row tiles), V 512 and 256 (four and two warps a row block).
      in_blocks(fp8_latent({"mla_e4m3_g16_q1_page64_per_block_k", DType::e4m3, 576, 512, 64, 16, 1, 64, Mask::none,
                            false, 0},
                           G::per_tensor, G::per_token, DType::fp32)),
      in_blocks(with_q(fp8_latent({"mla_e4m3_bf16_q_g128_q2_page16_causal_per_block_k", DType::e4m3, 576, 512, 64,
                                   128, 2, 16, Mask::causal, false, 0},
                                  G::none, G::per_token, DType::fp32),
                       DType::bf16)),
      in_blocks(fp8_latent({"latent_e4m3_v256_g8_q2_page16_causal_seven_splits_per_block_k", DType::e4m3, 576, 256, 64,
                            8, 2, 16, Mask::causal, false, 7, 2},
                           G::per_token, G::per_token, DType::bf16)),
      in_blocks(fp8_latent({"mla_e4m3_g16_q3_contiguous_causal_varlen_per_block_k", DType::e4m3, 576, 512, 64, 16, 3,
                            0, Mask::causal, true, 0},
                           G::per_tensor, G::per_token, DType::fp32)),
      // fp8 caches on the seesaw pass (TMA loads, sm_90a's default from 64 packed rows): the nope
      // columns dequantised into fp16 stages by the loader warpgroup, every K scale granularity
      // and layout, e4m3 and e5m2, fp8 and bf16 Q, a bf16 and an fp16 rope part, paged (8, 16,
      // 64) and contiguous, splits, windows, V 256.
      seesaw(fp8_latent({"mla_seesaw_e4m3_g128_q1_page64_per_token", DType::e4m3, 576, 512, 64, 128, 1, 64,
                         Mask::none, false, 0},
                        G::per_token, G::per_token, DType::fp32)),
      seesaw(fp8_latent({"mla_seesaw_e5m2_g64_q2_page16_causal_per_head", DType::e5m2, 576, 512, 64, 64, 2, 16,
                         Mask::causal, false, 0},
                        G::per_head, G::per_head)),
      seesaw(in_blocks(with_q(fp8_latent({"mla_seesaw_e4m3_bf16_q_g128_q1_page64_per_block_k", DType::e4m3, 576, 512,
                                          64, 128, 1, 64, Mask::none, false, 0},
                                         G::none, G::per_token, DType::fp32),
                              DType::bf16))),
      seesaw(fp8_latent({"mla_seesaw_e4m3_g64_q1_contiguous_varlen_seven_splits_unscaled", DType::e4m3, 576, 512, 64,
                         64, 1, 0, Mask::none, true, 7},
                        G::none, G::none)),
      seesaw(fp8_latent({"mla_seesaw_e4m3_g64_q1_page64_per_tensor_fp16_rope", DType::e4m3, 576, 512, 64, 64, 1, 64,
                         Mask::none, false, 0},
                        G::per_tensor, G::per_tensor, std::nullopt, DType::fp16)),
      seesaw(scales_in_cache(fp8_latent({"mla_seesaw_e4m3_g128_q2_page8_window_per_token_k_in_cache_bf16", DType::e4m3,
                                         576, 512, 64, 128, 2, 8, Mask::sliding_window, false, 0},
                                        G::per_tensor, G::per_token, DType::bf16))),
      seesaw(fp8_latent({"latent_seesaw_e4m3_v256_g64_q1_page64_per_token", DType::e4m3, 576, 256, 64, 64, 1, 64,
                         Mask::none, false, 0, 2},
                        G::per_token, G::per_token, DType::fp32)),
      // Prefill chunks against the cache (absorbed MLA): tens to a hundred causal tokens per
      // sequence, on each pass (the seesaw pass by default on sm_90a at pages of 16 and 64).
      {"mla_prefill_bf16_g16_q100_page64_causal", DType::bf16, 576, 512, 64, 16, 100, 64, Mask::causal, false, 0},
      {"mla_prefill_bf16_g128_q24_page16_causal_varlen", DType::bf16, 576, 512, 64, 128, 24, 16, Mask::causal, true, 0},
      {"mla_prefill_wgmma_bf16_g32_q70_page4_causal", DType::bf16, 576, 512, 64, 32, 70, 4, Mask::causal, false, 0},
      {"mla_prefill_mma_sync_fp16_g16_q72_page1_causal", DType::fp16, 576, 512, 64, 16, 72, 1, Mask::causal, false, 0,
       1, 0, 0, 0, 0},
      fp8_latent({"mla_prefill_e4m3_g16_q80_page64_causal_per_token", DType::e4m3, 576, 512, 64, 16, 80, 64,
                  Mask::causal, false, 0},
                 G::per_token, G::per_token, DType::fp32),
  };
  return cases;
}

class LatentMatrix : public ::testing::TestWithParam<LatentCase> {};

TEST_P(LatentMatrix, MatchesReference) {
  FLASHJIT_REQUIRE_GPU();
  const LatentCase& k = GetParam();
  if ((k.loads == KvLoads::tma || k.swap_qk.value_or(false)) && current_device().arch() != "sm_90a") GTEST_SKIP() << "TMA loads and swap_qk need sm_90a";
  expect_matches_reference(k.label, latent_config(k), decode_shapes(step_of(k), k.heads_k));
}

INSTANTIATE_TEST_SUITE_P(Latent, LatentMatrix, ::testing::ValuesIn(latent_cases()),
                         [](const ::testing::TestParamInfo<LatentCase>& info) { return std::string(info.param.label); });

// The reference reads V from K's columns under shared K/V as the CPU computation does.
TEST(LatentReference, SharedValuesAgreeWithFp64) {
  FLASHJIT_REQUIRE_GPU();
  const Config c = latent_config({"", DType::bf16, 576, 512, 64, 16, 2, 16, Mask::causal, false, 0});
  const ProblemShape s = step_shape(2, 2, 90, {90, 33}, 1, 16);
  DeviceProblem problem(c, s, run_seed());
  expect_reference_matches_cpu(c, problem, "latent, paged, cache lengths 90, 33");
}

// The reference dequantises each block of a key row with its own scale, V's columns too.
TEST(LatentReference, PerBlockScalesAgreeWithFp64) {
  FLASHJIT_REQUIRE_GPU();
  const Config c = latent_config(in_blocks(fp8_latent(
      {"", DType::e4m3, 576, 512, 64, 16, 2, 16, Mask::causal, false, 0}, G::per_tensor, G::per_token, DType::fp32)));
  const ProblemShape s = step_shape(2, 2, 90, {90, 33}, 1, 16);
  DeviceProblem problem(c, s, run_seed());
  expect_reference_matches_cpu(c, problem, "latent e4m3, per-block K scales, paged, cache lengths 90, 33");
}

// The seesaw pass multiplies an fp8 cache's values by their scales in fp16 where every scale of
// a loader warp's rows is an fp16 normal, in fp32 otherwise: a cache of small values (per-token
// K scales near 2^-19, below fp16's normals), with Q as much larger, takes the fp32 products on
// every tile and still matches the reference.
TEST(LatentSeesaw, KeyScalesBelowFp16NormalsStillMatchTheReference) {
  FLASHJIT_REQUIRE_GPU();
  if (current_device().arch() != "sm_90a") GTEST_SKIP() << "TMA loads need sm_90a";
  const Config c = latent_config(seesaw(fp8_latent(
      {"", DType::e4m3, 576, 512, 64, 64, 1, 64, Mask::none, false, 0}, G::per_token, G::per_token, DType::fp32)));
  auto kernel = get_kernel(c);
  DeviceProblem problem(c, step_shape(2, 1, 700, {700, 333}, 1, 64), run_seed());
  std::vector<float> k = problem.host_k(), q = problem.host_q();
  for (float& x : k) x *= 0x1p-12f;
  for (float& x : q) x *= 0x1p12f;
  const std::vector<float> k_scales = problem.set_input('k', k);
  problem.set_input('q', q);
  ASSERT_FALSE(k_scales.empty());
  for (float sc : k_scales) ASSERT_LT(sc, 0x1p-14f);  // every tile takes the fp32 products
  const CheckResult r = check_against_reference(*kernel, c, problem);
  std::printf("[check] %-44s %-56s rel=%.3e lse=%.2e nonfinite=%zu %s\n", "mla_seesaw_e4m3_small_key_scales",
              problem.shape().describe().c_str(), r.rel_error, r.lse_max_error, r.nonfinite, r.passed ? "ok" : "FAIL");
  EXPECT_TRUE(r.passed) << r.summary();
}

// The reference reads paged caches and cache lengths the way the CPU computation does.
TEST(DecodeReference, PagedReferenceAgreesWithFp64) {
  FLASHJIT_REQUIRE_GPU();
  const DecodeCase k{"", DType::bf16, 64, 4, 3, 16, Mask::causal, false, 0};
  const Config c = decode_config(k);
  const ProblemShape s = step_shape(3, 3, 100, {100, 0, 37});
  DeviceProblem problem(c, s, run_seed());
  expect_reference_matches_cpu(c, problem, "paged, cache lengths 100, 0, 37");
}

// The combine pass alone: the O and LSE it writes are the CPU merge of the partials the splits
// left in a workspace the test owns.
TEST(DecodeCombine, MergesSplitsLikeTheCpu) {
  FLASHJIT_REQUIRE_GPU();
  const DecodeCase k{"", DType::bf16, 128, 4, 2, 16, Mask::causal, false, 9};
  const Config c = decode_config(k);
  auto kernel = get_kernel(c);
  ProblemShape s = step_shape(2, 2, 3000, {3000, 40});  // the second entry leaves most splits without keys
  s.num_splits = k.splits;
  DeviceProblem problem(c, s, run_seed());
  AttentionArgs a = problem.args();
  const size_t bytes = kernel->workspace_bytes(a);
  ASSERT_GT(bytes, 0u);
  CUdeviceptr ws = 0;
  FLASHJIT_CU(driver().cuMemAlloc(&ws, bytes));
  a.workspace = reinterpret_cast<void*>(ws);
  a.workspace_bytes = bytes;
  problem.poison_outputs();
  kernel->launch(a);
  FLASHJIT_CU(driver().cuCtxSynchronize());
  const int rows = s.batch * s.seqlen_q, heads = s.heads_q, dv = 128, splits = k.splits;
  std::vector<float> part(bytes / 4);
  FLASHJIT_CU(driver().cuMemcpyDtoH(part.data(), ws, bytes));
  driver().cuMemFree(ws);
  const float* po = part.data();
  const float* pl = po + size_t(splits) * rows * heads * dv;
  const auto out = problem.output();
  const auto lse = problem.lse();
  double diff2 = 0, ref2 = 0, lse_err = 0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int sp = 0; sp < splits; ++sp) mx = std::max(mx, double(pl[(size_t(sp) * rows + r) * heads + h]));
      double sum = 0;
      std::vector<double> o(dv, 0.0);
      for (int sp = 0; sp < splits; ++sp) {
        const size_t slot = (size_t(sp) * rows + r) * heads + h;
        const double w = std::isinf(pl[slot]) ? 0 : std::exp(double(pl[slot]) - mx);
        sum += w;
        for (int d = 0; d < dv; ++d) o[d] += w * po[slot * dv + d];
      }
      // O is [b][s][h][d] (bshd) and rows are b * seqlen_q + s; the LSE is [b][h][s].
      const int b = r / s.seqlen_q, t = r % s.seqlen_q;
      for (int d = 0; d < dv; ++d) {
        const double want = sum > 0 ? o[d] / sum : 0;
        const double got = out[(size_t(r) * heads + h) * dv + d];
        diff2 += (got - want) * (got - want);
        ref2 += want * want;
      }
      const double want_lse = mx + std::log(sum);
      lse_err = std::max(lse_err, std::fabs(lse[(size_t(b) * heads + h) * s.seqlen_q + t] - want_lse));
    }
  EXPECT_LT(std::sqrt(diff2 / ref2), 8e-3);  // O is bf16
  EXPECT_LT(lse_err, 1e-4);
}

// A page-table entry outside the cache is never read: the rows it feeds come out NaN, the other
// sequences are untouched.
TEST(DecodePaging, BadPageEntriesPoisonOnlyTheirRows) {
  FLASHJIT_REQUIRE_GPU();
  const DecodeCase k{"", DType::bf16, 128, 4, 1, 16, Mask::none, false, 0};
  const Config c = decode_config(k);
  auto kernel = get_kernel(c);
  const ProblemShape s = step_shape(2, 1, 64);
  DeviceProblem problem(c, s, run_seed());
  std::vector<int> table = problem.page_table();
  table[1] = problem.num_pages() + 5;  // entry 0's second page
  AttentionArgs a = problem.args();
  FLASHJIT_CU(driver().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(a.page_table), table.data(), table.size() * 4));
  problem.poison_outputs();
  kernel->launch(a);
  FLASHJIT_CU(driver().cuCtxSynchronize());
  const auto out = problem.output();
  const size_t per_entry = out.size() / 2;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < per_entry) EXPECT_TRUE(std::isnan(out[i])) << "entry 0, element " << i;
    else ASSERT_TRUE(std::isfinite(out[i])) << "entry 1, element " << i;
  }
}

// A CUDA graph of one decode launch (split and combine, flashjit's own per-stream workspace)
// replays with new inputs in the same buffers: no host sync or allocation was captured.
TEST(DecodeGraph, CapturedLaunchReplaysOnFreshData) {
  FLASHJIT_REQUIRE_GPU();
  const DecodeCase k{"", DType::bf16, 128, 8, 1, 16, Mask::none, false, 0};
  const Config c = decode_config(k);
  auto kernel = get_kernel(c);
  const ProblemShape s = step_shape(1, 1, 20000, {}, 8, 8);  // one sequence: the launch splits and combines
  DeviceProblem problem(c, s, run_seed());
  const DriverApi& d = driver();
  CUstream stream;
  FLASHJIT_CU(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  const AttentionArgs a = problem.args();
  ASSERT_GT(kernel->workspace_bytes(a), 0u);
  kernel->launch(a, stream);  // sizes the stream's workspace outside the capture
  FLASHJIT_CU(d.cuStreamSynchronize(stream));
  FLASHJIT_CU(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  kernel->launch(a, stream);
  CUgraph graph;
  FLASHJIT_CU(d.cuStreamEndCapture(stream, &graph));
  CUgraphExec exec;
  FLASHJIT_CU(d.cuGraphInstantiate(&exec, graph, 0));
  auto reference = get_reference_kernel(c);
  uint64_t seed = run_seed();
  for (int replay = 0; replay < 3; ++replay) {
    problem.refill(++seed);
    problem.poison_outputs(stream);
    reference->launch(problem.reference_args(), stream);
    FLASHJIT_CU(d.cuGraphLaunch(exec, stream));
    FLASHJIT_CU(d.cuStreamSynchronize(stream));
    const CheckResult r = compare_with_reference(c, problem);
    EXPECT_TRUE(r.passed) << "replay " << replay << ": " << r.summary();
  }
  d.cuGraphExecDestroy(exec);
  d.cuGraphDestroy(graph);
  d.cuStreamDestroy(stream);
}

}  // namespace
}  // namespace flashjit::testing
