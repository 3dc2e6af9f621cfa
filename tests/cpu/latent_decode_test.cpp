// Shared K/V decode (kv_layout.shared_kv: MLA's latent cache) on the CPU: "auto" picks the decode
// family for it, the tiles it resolves to and their shared memory, the rules that name the
// field they break, the V argument it refuses, and that its kernels compile without spills.
#include "config_issues.hpp"
#include "decode/latent_regions.cuh"
#include "generator/config.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/compiler.hpp"
#include "runtime/family_host.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace flashjit {
namespace {

// DeepSeek's MLA: one latent head of 512 nope + 64 rope columns, V its first 512.
Config mla(int heads, int tokens, const char* arch = "sm_90a") {
  Config c;
  c.arch = arch;
  c.head_dim = {576, 512, 64};
  c.group = heads;
  c.kv_layout = {true, 64, true};
  c.lse = true;
  c.tuning.max_seqlen_q = tokens;
  return c;
}

TEST(LatentDecode, AutoPicksDecodeEvenWithoutATokenBound) {
  Config c = mla(16, 1);
  c.tuning.max_seqlen_q.reset();
  const Config r = resolve(c);
  EXPECT_EQ(*r.tuning.family, Family::decode);
  EXPECT_EQ(*r.tuning.max_seqlen_q, 1);
  EXPECT_EQ(readable_name(r), "fwd_sm90a_bf16_d576v512r64_none_g16_paged64_lse_decode_q1_latent_bm16_bn32");
}

// The tile a resolved latent config names, as one comparable value.
struct LatentTile {
  int warpgroups;  // tuning.consumer_warpgroups (0: mma.sync warps)
  KvLoads loads;
  int bm, warps, bn, stages;
  bool operator==(const LatentTile&) const = default;
};
void PrintTo(const LatentTile& t, std::ostream* os) {
  *os << "warpgroups " << t.warpgroups << ", " << to_string(t.loads) << ", BM " << t.bm << ", " << t.warps
      << " warps, BN " << t.bn << ", " << t.stages << " stages";
}
LatentTile tile_of(const Config& r) {
  const Tuning& t = r.tuning;
  return {*t.consumer_warpgroups, *t.kv_loads, *t.BM, *t.num_warps, *t.BN, *t.num_kv_stages};
}

TEST(LatentDecode, TilesAndSharedMemory) {
  // mma.sync warps below 32 packed rows: four per 16-row block.
  const Config r16 = resolve(mla(16, 1));
  EXPECT_EQ(tile_of(r16), (LatentTile{0, KvLoads::cp_async, 16, 4, 32, 2}));
  // Q 16 x 576, two stages of 32 x 576 (K, V within it), two row-offset slots of 32 x 16
  // bytes, one exchange slot of 4 warps x 16 x 32 floats, the flag: two CTAs fit an H200 SM.
  const int want = 16 * 576 * 2 + 2 * 32 * 576 * 2 + 2 * 32 * 16 + 4 * 16 * 32 * 4 + 16;
  EXPECT_EQ(generate(r16).launch.smem_bytes, want);
  EXPECT_EQ(decode::latent_regions({16, 32, 576, 4, 2}).total, want);
  EXPECT_LE(2 * want, 228 * 1024);
  // 128 heads on sm_90a, page 64: two wgmma warpgroups on alternate tiles and a loader
  // warpgroup (TMA loads); Q, four stages of 32 x 576, each warpgroup's P of a tile (64 x 32
  // 16-bit), the statistics (3 x 2 x 64 floats), 45 mbarriers (a full barrier per stage and
  // 64-column panel, an empty one per stage, five more; padded to 16 bytes), the flag.
  const Config r128 = resolve(mla(128, 1));
  EXPECT_EQ(tile_of(r128), (LatentTile{2, KvLoads::tma, 64, 12, 32, 4}));
  const int seesaw_bytes = 64 * 576 * 2 + 4 * 32 * 576 * 2 + 2 * 64 * 32 * 2 + 3 * 2 * 64 * 4 + (4 * 10 + 5) * 8 + 8 + 16;
  EXPECT_EQ(generate(r128).launch.smem_bytes, seesaw_bytes);
  EXPECT_LE(seesaw_bytes, 227 * 1024);
  EXPECT_TRUE(generate(r128).launch.uses_tma);
  EXPECT_EQ(readable_name(r128), "fwd_sm90a_bf16_d576v512r64_none_g128_paged64_lse_decode_q1_latent_wgmma_tma_bm64_bn32");
  // Pages below a TMA box's 8 rows keep the ring's cp.async gathers: both warpgroups on every
  // tile; Q 64 x 576, two stages of 48 x 576, two row-offset slots, one exchange slot of
  // 64 x 48 floats per warpgroup.
  Config paged4 = mla(128, 1);
  paged4.kv_layout.page_size = 4;
  const Config r4 = resolve(paged4);
  EXPECT_EQ(tile_of(r4), (LatentTile{2, KvLoads::cp_async, 64, 8, 48, 2}));
  const int wgmma_bytes = 64 * 576 * 2 + 2 * 48 * 576 * 2 + 2 * 48 * 16 + 2 * 64 * 48 * 4 + 16;
  EXPECT_EQ(generate(r4).launch.smem_bytes, wgmma_bytes);
  EXPECT_EQ(readable_name(r4), "fwd_sm90a_bf16_d576v512r64_none_g128_paged4_lse_decode_q1_latent_wgmma_bm64_bn48");
  // A tile the seesaw pass does not take (eight warps, 48 keys) keeps the gathers too.
  Config eight = mla(128, 1);
  eight.tuning.num_warps = 8;
  EXPECT_EQ(*resolve(eight).tuning.kv_loads, KvLoads::cp_async);
  Config bn48 = mla(128, 1);
  bn48.tuning.BN = 48;
  EXPECT_EQ(*resolve(bn48).tuning.kv_loads, KvLoads::cp_async);
  EXPECT_EQ(*resolve(mla(64, 1)).tuning.consumer_warpgroups, 2);
  EXPECT_EQ(*resolve(mla(32, 2)).tuning.consumer_warpgroups, 2);  // 64 packed rows
  EXPECT_EQ(*resolve(mla(32, 1)).tuning.consumer_warpgroups, 0);
  // Other targets, and V widths the two warpgroups cannot halve into panels, keep mma.sync.
  const Config a100 = resolve(mla(128, 1, "sm_80"));
  EXPECT_EQ(*a100.tuning.consumer_warpgroups, 0);
  EXPECT_EQ(*a100.tuning.BM, 32);
  EXPECT_EQ(*resolve(mla(128, 1, "sm_100a")).tuning.consumer_warpgroups, 0);
  // V 128 (two panels): two mma.sync warps per 16-row block.
  Config v128 = mla(16, 1);
  v128.head_dim.v = 128;
  EXPECT_EQ(*resolve(v128).tuning.num_warps, 2);
  // Five stages of 128 heads' tiles do not fit an SM; an A100's shared memory takes the defaults.
  Config deep = mla(128, 1);
  deep.tuning.num_kv_stages = 5;
  EXPECT_EQ(issue_paths(deep), std::set<std::string>{"tuning.num_kv_stages"});
  EXPECT_TRUE(check_config(mla(128, 1, "sm_80")).empty());
}

// A step of 4 sequences of 1000 keys (pages of 64), 16 heads, one token, against MLA's latent
// cache: nope and rope parts apart. The pointers are never dereferenced.
AttentionArgs mla_step_args() {
  const void* data = reinterpret_cast<const void*>(uintptr_t(1) << 20);
  AttentionArgs a;
  a.q = a.o = Tensor::bshd(data, 1, 16, 512);
  a.q_rope = Tensor::bshd(data, 1, 16, 64);
  a.k = Tensor::paged(data, 64, 1, 512);
  a.k_rope = Tensor::paged(data, 64, 1, 64);
  a.page_table = reinterpret_cast<const int*>(data);
  a.max_pages = 16;
  a.num_pages = 64;
  a.lse = reinterpret_cast<float*>(uintptr_t(1) << 20);
  a.batch = 4;
  a.seqlen_q = 1;
  a.seqlen_k = 1000;
  a.heads_q = 16;
  a.heads_k = 1;
  return a;
}

// An fp8 latent cache: e4m3 nope columns, a bf16 rope part, per-token K scales in fp32.
Config mla_fp8(int heads, int tokens, const char* arch = "sm_90a") {
  Config c = mla(heads, tokens, arch);
  c.dtype = {DType::e4m3, DType::bf16, DType::bf16, DType::fp32};
  c.scales = {ScaleGranularity::per_tensor, ScaleGranularity::per_token, ScaleGranularity::none};
  return c;
}

TEST(LatentDecode, Fp8CacheTilesAndSharedMemory) {
  // mma.sync warps below 64 packed rows (Q K^T not swapped); a 32-key tile row is 512 fp8 bytes
  // and 64 bf16.
  Config c16 = mla_fp8(16, 1);
  c16.tuning.swap_qk = false;
  const Config r16 = resolve(c16);
  EXPECT_EQ(tile_of(r16), (LatentTile{0, KvLoads::cp_async, 16, 4, 32, 3}));
  // Q 16 x 576 (16-bit), three stages of 32 x (512 + 64 x 2) bytes, three row-offset slots,
  // one exchange slot, four slots of 32 per-token K scales, the flag: two CTAs an SM.
  const int want = 16 * 576 * 2 + 3 * 32 * 640 + 3 * 32 * 16 + 4 * 16 * 32 * 4 + 4 * 32 * 4 + 16;
  EXPECT_EQ(generate(r16).launch.smem_bytes, want);
  EXPECT_EQ(decode::latent_regions({16, 32, 576, 4, 3, false, 64, 1, true}).total, want);
  EXPECT_LE(2 * want, 227 * 1024);
  // From 64 packed rows on sm_90a: the seesaw pass on fp16 stages, as many as a 16-bit cache's
  // (the fp8 nope columns land inside them). Q 64 x 576 (16-bit), four stages of 32 x 576 16-bit,
  // the P slots and statistics, 49 mbarriers (a full barrier per stage and 64-column panel, an
  // empty and a staged one per stage, five more; padded to 16 bytes), the flag.
  const Config r128 = resolve(mla_fp8(128, 2));
  EXPECT_EQ(tile_of(r128), (LatentTile{2, KvLoads::tma, 64, 12, 32, 4}));
  const int seesaw = 64 * 576 * 2 + 4 * 32 * 576 * 2 + 2 * 64 * 32 * 2 + 3 * 2 * 64 * 4 + 49 * 8 + 8 + 16;
  EXPECT_EQ(generate(r128).launch.smem_bytes, seesaw);
  EXPECT_LE(seesaw, 227 * 1024);
  EXPECT_EQ(tile_of(resolve(mla_fp8(64, 1))), (LatentTile{2, KvLoads::tma, 64, 12, 32, 4}));
  EXPECT_EQ(*resolve(mla_fp8(32, 1)).tuning.consumer_warpgroups, 0);
  // Gathers named, pages below a TMA box's 8 rows, or other targets: the mma.sync pass.
  Config gathers = mla_fp8(128, 2);
  gathers.tuning.kv_loads = KvLoads::cp_async;
  EXPECT_EQ(tile_of(resolve(gathers)), (LatentTile{0, KvLoads::cp_async, 32, 8, 32, 3}));
  Config page4 = mla_fp8(128, 1);
  page4.kv_layout.page_size = 4;
  EXPECT_EQ(*resolve(page4).tuning.consumer_warpgroups, 0);
  EXPECT_EQ(*resolve(mla_fp8(128, 1, "sm_80")).tuning.consumer_warpgroups, 0);
  EXPECT_EQ(*resolve(mla_fp8(128, 1, "sm_100a")).tuning.consumer_warpgroups, 0);
  // V 256: two warps per row block, each with one 128-column panel of fp8 V.
  Config v256 = mla_fp8(16, 1);
  v256.head_dim.v = 256;
  EXPECT_EQ(*resolve(v256).tuning.num_warps, 2);
  for (const char* arch : {"sm_80", "sm_90a", "sm_100a"}) EXPECT_TRUE(check_config(mla_fp8(64, 1, arch)).empty()) << arch;
  // An sm_89's 99 KB: three stages of 16 rows' tiles, two of 32 rows' (95,648 bytes), three
  // of those not.
  EXPECT_EQ(*resolve(mla_fp8(16, 1, "sm_89")).tuning.num_kv_stages, 3);
  EXPECT_EQ(*resolve(mla_fp8(64, 1, "sm_89")).tuning.num_kv_stages, 2);
  EXPECT_EQ(generate(resolve(mla_fp8(64, 1, "sm_89"))).launch.smem_bytes,
            32 * 576 * 2 + 2 * 32 * 640 + 2 * 32 * 16 + 8 * 16 * 32 * 4 + 3 * 32 * 4 + 16);
  Config three89 = mla_fp8(64, 1, "sm_89");
  three89.tuning.num_kv_stages = 3;
  EXPECT_EQ(issue_paths(three89), std::set<std::string>{"tuning.num_kv_stages"});
  // The reference dequantises V with K's scales (a shared K/V trait of its own).
  const KernelSource ref = generate_reference(mla_fp8(16, 1));
  EXPECT_NE(ref.unit.find("kSharedKv = true"), std::string::npos);
  EXPECT_NO_THROW(compile(ref));
}

// The mma.sync pass's launch bounds ask for the CTAs an SM's shared memory holds while each thread
// keeps 168 registers; three CTAs an SM drop the second accumulator set of the fp8 nope scores.
TEST(LatentDecode, LaunchBoundsFollowTheCtasAnSmHolds) {
  auto bounds = [](const Config& c) {
    const std::string unit = generate(resolve(c)).unit;
    const auto split = unit.find("_split(");
    const auto at = unit.rfind("__launch_bounds__(", split);
    return unit.substr(at, unit.find(')', at) - at + 1);
  };
  // fp8, 16 rows, three stages (90,128 bytes): two CTAs an SM on sm_90a.
  EXPECT_EQ(bounds(mla_fp8(16, 1)), "__launch_bounds__(128, 2)");
  // Two stages (69,008 bytes): three on sm_90a (233,472 bytes an SM), two on sm_80 (167,936).
  Config two = mla_fp8(16, 1);
  two.tuning.num_kv_stages = 2;
  const std::string unit = generate(resolve(two)).unit;
  EXPECT_NE(unit.find("kMinBlocksPerSm = 3"), std::string::npos);
  EXPECT_EQ(bounds(two), "__launch_bounds__(128, 3)");
  Config two80 = mla_fp8(16, 1, "sm_80");
  two80.tuning.num_kv_stages = 2;
  EXPECT_EQ(bounds(two80), "__launch_bounds__(128, 2)");
  // A 16-bit cache's 16 rows (101,392 bytes): two. Eight warps at 32 rows: one, since three
  // hundred-odd registers a thread would not be left for two.
  EXPECT_EQ(bounds(mla(16, 1)), "__launch_bounds__(128, 2)");
  EXPECT_EQ(bounds(mla(32, 1)), "__launch_bounds__(256, 1)");
  // The wgmma passes keep one.
  EXPECT_EQ(bounds(mla(128, 1)), "__launch_bounds__(384, 1)");
}

// tuning.swap_qk: each 16 rows' four warps compute S^T = K Q^T as one wgmma warpgroup
// over 64-key tiles, Q and K from the ring's panels in the cache's type (QGMMA for fp8).
TEST(LatentDecode, SwappedQkOnWgmmaWarpgroups) {
  Config c = mla_fp8(16, 1);
  c.tuning.swap_qk = true;
  EXPECT_TRUE(check_config(c).empty());
  const Config r = resolve(c);
  EXPECT_EQ(tile_of(r), (LatentTile{0, KvLoads::cp_async, 16, 4, 64, 2}));
  EXPECT_EQ(readable_name(r), "fwd_sm90a_e4m3_d576v512r64_obf16_none_g16_paged64_scaled_lse_decode_q1_latent_swapqk_bm16_bn64");
  EXPECT_EQ(nlohmann::json::parse(canonical_json(r))["tuning"]["swap_qk"], true);
  // "auto" swaps Q K^T on sm_90a where the tile is its own: an fp8 cache's up to 32 rows, a
  // 16-bit cache's from 17 to 32; not beyond, not for Q in bf16, per-block K scales, V in fewer
  // than four panels, other targets, a tile named in part, or where false is named.
  for (const Config& k : {mla_fp8(16, 1), mla_fp8(8, 2), mla_fp8(32, 1), mla(32, 1), mla(16, 2)})
    EXPECT_EQ(resolve(k).tuning.swap_qk, std::optional<bool>(true)) << canonical_json(k);
  EXPECT_EQ(tile_of(resolve(mla_fp8(16, 1))), tile_of(r));
  EXPECT_EQ(tile_of(resolve(mla(16, 2))), (LatentTile{0, KvLoads::cp_async, 32, 8, 64, 2}));
  Config pinned = mla_fp8(16, 1);
  pinned.tuning.swap_qk = false;
  const Config unswapped = resolve(pinned);
  EXPECT_EQ(unswapped.tuning.swap_qk, std::optional<bool>(false));
  EXPECT_EQ(tile_of(unswapped), (LatentTile{0, KvLoads::cp_async, 16, 4, 32, 3}));
  // The canonical form keeps the false, so the config resolves the same when read back.
  EXPECT_EQ(nlohmann::json::parse(canonical_json(unswapped))["tuning"]["swap_qk"], false);
  EXPECT_EQ(canonical_json(resolve(parse_config_text(canonical_json(pinned)))), canonical_json(unswapped));
  Config named = mla_fp8(16, 1);
  named.tuning.num_kv_stages = 3;
  Config bf16_q = mla_fp8(16, 1);
  bf16_q.dtype.q = DType::bf16;
  bf16_q.scales.q = ScaleGranularity::none;
  Config v256 = mla_fp8(16, 1);
  v256.head_dim.v = 256;
  for (const Config& k : {mla_fp8(64, 1), mla(16, 1), mla(64, 1), mla_fp8(16, 1, "sm_80"), mla_fp8(16, 1, "sm_100a"),
                          named, bf16_q, v256})
    EXPECT_FALSE(resolve(k).tuning.swap_qk.value_or(false)) << canonical_json(k);
  // Q 16 x 576 (its fp8 nope bytes and bf16 rope in the first five panels), two stages of 64 x
  // 640 bytes, two row-offset slots, the scores once (16 rows of 64 + 8 floats), three slots of
  // 64 per-token K scales, the flag: two CTAs an SM.
  const KernelSource src = generate(r);
  const int want = 16 * 576 * 2 + 2 * 64 * 640 + 2 * 64 * 16 + 16 * 72 * 4 + 3 * 64 * 4 + 16;
  EXPECT_EQ(src.launch.smem_bytes, want);
  EXPECT_EQ(decode::latent_regions({16, 64, 576, 4, 2, false, 64, 1, true, 1, true}).total, want);
  EXPECT_NE(src.unit.find("kSwapQk = true"), std::string::npos);
  EXPECT_NE(src.unit.find("m64n16k32.f32.e4m3.e4m3"), std::string::npos);
  EXPECT_NE(src.unit.find("m64n16k16.f32.bf16.bf16"), std::string::npos);
  // It compiles without spills: fp8 with per-token or per-tensor K scales, e5m2, bf16, two
  // tokens of eight heads under a causal mask, and 32 rows.
  Config per_tensor = c;
  per_tensor.scales.k = ScaleGranularity::per_tensor;
  per_tensor.dtype.scale.reset();
  Config e5m2 = c;
  e5m2.dtype.qkv = DType::e5m2;
  Config bf16 = mla(16, 1);
  bf16.tuning.swap_qk = true;
  // 32 rows: a warpgroup for each 16, eight warps.
  Config rows32 = mla_fp8(32, 1);
  rows32.tuning.swap_qk = true;
  EXPECT_EQ(tile_of(resolve(rows32)), (LatentTile{0, KvLoads::cp_async, 32, 8, 64, 2}));
  Config steps = mla_fp8(8, 2);
  steps.mask = Mask::causal;
  steps.tuning.swap_qk = true;
  for (const Config& k : {c, per_tensor, e5m2, bf16, steps, rows32}) {
    ASSERT_TRUE(check_config(k).empty()) << canonical_json(k);
    const CompiledKernel kernel = compile(generate(resolve(k)));
    EXPECT_EQ(kernel.report.spill_stores, 0) << canonical_json(k) << "\n" << kernel.log;
  }
  // The rules name what breaks.
  Config sm80 = mla_fp8(16, 1, "sm_80");
  sm80.tuning.swap_qk = true;
  EXPECT_EQ(issue_paths(sm80), std::set<std::string>{"tuning.swap_qk"});
  Config keys32 = c;
  keys32.tuning.BN = 32;
  EXPECT_EQ(issue_paths(keys32), std::set<std::string>{"tuning.BN"});
  Config rows64 = rows32;
  rows64.tuning.BM = 64;
  EXPECT_EQ(issue_paths(rows64), std::set<std::string>{"tuning.BM"});
  Config one_warpgroup = rows32;
  one_warpgroup.tuning.num_warps = 4;
  EXPECT_EQ(issue_paths(one_warpgroup), std::set<std::string>{"tuning.num_warps"});
  Config q16 = c;
  q16.dtype.q = DType::bf16;
  q16.scales.q = ScaleGranularity::none;
  EXPECT_EQ(issue_paths(q16), std::set<std::string>{"dtype.q"});
  Config blocks = c;
  blocks.scales.token_layout = ScaleLayout::cache;
  blocks.scales.k_block = 128;
  EXPECT_EQ(issue_paths(blocks), std::set<std::string>{"scales.k_block"});
  Config gqa = mla(16, 1);
  gqa.head_dim = {128, 128, 0};
  gqa.kv_layout.shared_kv = false;
  gqa.tuning.family = Family::decode;
  gqa.tuning.swap_qk = true;
  EXPECT_EQ(issue_paths(gqa), std::set<std::string>{"tuning.swap_qk"});
  Config prefill = mla(16, 1);
  prefill.head_dim = {128, 128, 0};
  prefill.kv_layout = {false, 0, false};
  prefill.tuning.family = Family::sm90;
  prefill.tuning.swap_qk = true;
  EXPECT_EQ(issue_paths(prefill), std::set<std::string>{"tuning.swap_qk"});
}

// FlashMLA's fp8 latent rows (512 e4m3 + four fp32 scales + 64 bf16 rope, 656 bytes): per-token K
// scales of each 128-column block (scales.k_block) beside the cache's rows. The rules name the
// field they break, the kernel gets a trait and a scale slot per block, the launch reads the
// scales as a view into the rows, and the kernels compile.
TEST(LatentDecode, PerBlockKeyScales) {
  Config c = mla_fp8(16, 1);
  c.scales.token_layout = ScaleLayout::cache;
  c.scales.k_block = 128;
  EXPECT_TRUE(check_config(c).empty());
  const Config r = resolve(c);
  const KernelSource src = generate(r);
  EXPECT_NE(src.unit.find("kKScaleBlocks = 4"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(canonical_json(r))["scales"]["k_block"], 128);
  // Four scales per key row in each of the four scale slots (three stages and one ahead).
  const int want = 16 * 576 * 2 + 3 * 32 * 640 + 3 * 32 * 16 + 4 * 16 * 32 * 4 + 4 * 4 * 32 * 4 + 16;
  EXPECT_EQ(src.launch.smem_bytes, want);
  // One scale a row: neither the trait nor the key in the canonical config.
  Config one = c;
  one.scales.k_block = 0;
  EXPECT_EQ(generate(resolve(one)).unit.find("kKScaleBlocks"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(canonical_json(resolve(one)))["scales"].contains("k_block"));
  // The rules.
  for (int block : {64, 96, 384, -128}) {
    Config bad = c;
    bad.scales.k_block = block;
    EXPECT_EQ(issue_paths(bad), std::set<std::string>{"scales.k_block"}) << block;
  }
  Config positions = c;
  positions.scales.token_layout = ScaleLayout::positions;
  EXPECT_EQ(issue_paths(positions), std::set<std::string>{"scales.k_block"});
  Config per_tensor = c;
  per_tensor.scales.k = ScaleGranularity::per_tensor;
  per_tensor.scales.token_layout = ScaleLayout::positions;
  per_tensor.dtype.scale.reset();  // no per-token scales left
  EXPECT_EQ(issue_paths(per_tensor), std::set<std::string>{"scales.k_block"});
  Config bf16 = mla(16, 1);
  bf16.scales.k_block = 128;
  EXPECT_EQ(issue_paths(bf16), std::set<std::string>{"scales.k_block"});
  Config gqa = c;  // a GQA fp8 cache: one scale per key row
  gqa.head_dim = {128, 128, 0};
  gqa.kv_layout = {true, 64, false};
  gqa.dtype.rope.reset();
  gqa.group = 4;
  EXPECT_EQ(issue_paths(gqa), std::set<std::string>{"scales.k_block"});
  // A warp's V columns lie in one block: two warps of 256 columns each do not.
  Config wide = c;
  wide.tuning.num_warps = 2;
  EXPECT_EQ(issue_paths(wide), std::set<std::string>{"tuning.num_warps"});
  Config blocks256 = wide;
  blocks256.scales.k_block = 256;
  EXPECT_TRUE(check_config(blocks256).empty());
  // The launch: [num_pages, page_size, heads_k, blocks] by default, or a view into the rows.
  AttentionArgs a = mla_step_args();
  a.q_scale.data = a.k_scale.data = a.page_table;
  DeviceLimits device;
  const FamilyHost& host = family_host(src.launch.family);
  LaunchPlan plan = host.plan(r, src.launch, a, device);
  EXPECT_EQ(plan.params.k_scale_block_stride, 1);
  EXPECT_EQ(plan.params.k_scale_strides[1], 4);
  EXPECT_EQ(plan.params.k_scale_row_stride, 4);
  EXPECT_EQ(plan.params.k_scale_strides[0], 64 * 4);
  a.k_scale.batch_stride = 656 / 4 * 64;  // floats 128..131 of each 656-byte row
  a.k_scale.row_stride = 656 / 4;
  a.k_scale.head_stride = 0;
  plan = host.plan(r, src.launch, a, device);
  EXPECT_EQ(plan.params.k_scale_row_stride, 656 / 4);
  EXPECT_EQ(plan.params.k_scale_block_stride, 1);
  // A block stride without blocks is refused by name.
  AttentionArgs stray = a;
  stray.k_scale.block_stride = 1;
  const Config r1 = resolve(one);
  EXPECT_THROW(
      try { host.plan(r1, generate(r1).launch, stray, device); } catch (const ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("args.k_scale.block_stride"), std::string::npos) << e.what();
        throw;
      },
      ArgumentError);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Config t = c;
    t.arch = arch;
    const CompiledKernel kernel = compile(generate(resolve(t)));
    EXPECT_EQ(kernel.report.spill_stores, 0) << arch << "\n" << kernel.log;
  }
  Config chunk = mla_fp8(128, 2);  // 32 rows, eight warps
  chunk.scales.token_layout = ScaleLayout::cache;
  chunk.scales.k_block = 128;
  const CompiledKernel wide_rows = compile(generate(resolve(chunk)));
  EXPECT_EQ(wide_rows.report.spill_stores, 0) << wide_rows.log;
  EXPECT_NO_THROW(compile(generate_reference(c)));
}

// The chunks the warps of an fp8 row block read (decode::fp8_latent_chunk, which Q's fragments
// and K's ldmatrix addresses both follow): every nope chunk and every rope k-step exactly once,
// and each where the lane address's XOR puts it in its 128-byte panel.
TEST(LatentDecode, Fp8WarpsReadEveryChunkOnce) {
  for (int warps_n : {1, 2, 4})
    for (int nope : {256, 384, 512}) {  // fp8 nope columns: chunks of 16
      const int chunks = nope / 16;
      if (chunks % (2 * warps_n)) continue;
      std::vector<int> seen(chunks, 0);
      for (int wn = 0; wn < warps_n; ++wn)
        for (int j = 0; j < chunks / warps_n / 2; ++j)
          for (int h = 0; h < 2; ++h) {
            const int c = decode::fp8_latent_chunk(j, h, wn, warps_n);
            ASSERT_GE(c, 0);
            ASSERT_LT(c, chunks);
            ++seen[c];
            const int c0 = 2 * warps_n * j, first = c0 / 8 * 8;  // the pair's panel
            EXPECT_EQ(c, first + (((c0 - first) ^ (2 * wn)) + h)) << warps_n << " " << nope;
          }
      for (int c = 0; c < chunks; ++c) EXPECT_EQ(seen[c], 1) << "chunk " << c << ", " << warps_n << " warps, " << nope;
      // The rope part's 16-bit k-steps (64 columns: 8 chunks, two a step), chunk h of step r.
      std::vector<int> rope(8, 0);
      for (int wn = 0; wn < warps_n; ++wn)
        for (int r = 0; r < 4 / warps_n; ++r)
          for (int h = 0; h < 2; ++h) ++rope[decode::fp8_latent_chunk(r, h, wn, warps_n)];
      for (int c = 0; c < 8; ++c) EXPECT_EQ(rope[c], 1) << "rope chunk " << c << ", " << warps_n << " warps";
    }
}

TEST(LatentDecode, RulesNameTheField) {
  Config c = mla(16, 1);
  c.dtype.qkv = DType::e4m3;  // the rope part would be fp8 too
  c.dtype.out = DType::bf16;
  c.tuning.family = Family::decode;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"dtype.rope"});
  c.dtype.rope = DType::e4m3;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"dtype.rope"});
  c.dtype.rope = DType::fp16;  // fp8 nope, 16-bit rope: MLA's fp8 cache
  EXPECT_TRUE(check_config(c).empty());
  c.head_dim = {512, 512, 0};  // an fp8 cache without a rope part
  c.dtype.rope.reset();
  EXPECT_TRUE(check_config(c).empty());
  c = mla(16, 1);
  c.dtype.rope = DType::fp16;  // a 16-bit cache's rope part is in its own type
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"dtype.rope"});
  c = mla_fp8(16, 1);
  c.head_dim = {576, 256, 128};  // 448 nope columns: not whole 128-byte panels of fp8
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim.qk"});
  // Query tokens: up to 64 per sequence in a decode step, up to 16384 (prefill chunks) against
  // a latent cache.
  c = mla(128, 16384);
  EXPECT_TRUE(check_config(c).empty());
  c.tuning.max_seqlen_q = 16385;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.max_seqlen_q"});
  c = mla(16, 1);
  c.head_dim = {128, 128, 0};
  c.kv_layout.shared_kv = false;
  c.tuning.family = Family::decode;
  c.tuning.max_seqlen_q = 65;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.max_seqlen_q"});
  c = mla_fp8(16, 1);
  c.head_dim.v = 128;  // one warp would hold all of Q's k-steps
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim.v"});
  c = mla_fp8(16, 1);
  c.scales.v = ScaleGranularity::per_tensor;  // V takes K's scale
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"scales.v"});
  c = mla_fp8(128, 1);
  c.tuning.consumer_warpgroups = 2;  // wgmma reads an fp8 cache only from the seesaw pass's fp16 stages
  c.tuning.kv_loads = KvLoads::cp_async;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.consumer_warpgroups"});
  c = mla_fp8(128, 1);
  c.tuning.consumer_warpgroups = 0;
  c.tuning.kv_loads = KvLoads::tma;  // the mma.sync pass gathers
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = mla_fp8(128, 1);
  c.tuning.kv_loads = KvLoads::tma;
  c.tuning.BN = 64;  // a loader lane dequantises one key row
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BN"});
  c = mla_fp8(128, 1);
  c.tuning.kv_loads = KvLoads::tma;
  EXPECT_TRUE(check_config(c).empty());
  c = mla_fp8(16, 1);
  c.head_dim.v = 256;
  c.tuning.num_warps = 4;  // four warps of 64 fp8 V columns: half panels
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_warps"});
  c = mla(16, 1);
  c.head_dim = {576, 544, 64};  // V past the nope columns
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim.v"});
  c = mla(16, 1);
  c.head_dim = {560, 512, 48};  // the head dim in 64-column panels
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim.qk"});
  c = mla(16, 1);
  c.tuning.num_warps = 12;  // three warps per row block
  c.tuning.BM = 64;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_warps"});
  c = mla(16, 1);
  c.tuning.BN = 24;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BN"});
  c = mla(16, 1);
  c.tuning.kv_loads = KvLoads::tma;  // the mma.sync pass gathers its tiles with cp.async
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  // TMA loads (the seesaw pass): boxes of whole pages of at least 8 rows, whole rope panels,
  // twelve warps, tiles of at most 64 keys, three stages or more.
  c = mla(128, 1);
  c.tuning.kv_loads = KvLoads::tma;
  EXPECT_TRUE(check_config(c).empty());
  c.kv_layout.page_size = 4;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = mla(128, 1);
  c.tuning.kv_loads = KvLoads::tma;
  c.head_dim = {576, 512, 32};
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = mla(128, 1);
  c.tuning.kv_loads = KvLoads::tma;
  c.tuning.num_warps = 8;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_warps"});
  c = mla(128, 1);
  c.tuning.kv_loads = KvLoads::tma;
  c.tuning.num_kv_stages = 2;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_kv_stages"});
  c = mla(128, 1);
  c.tuning.kv_loads = KvLoads::tma;
  c.tuning.BN = 64;  // three stages of 64 x 576 beside Q do not fit
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_kv_stages"});
  c = mla(128, 1, "sm_80");
  c.tuning.kv_loads = KvLoads::tma;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.kv_loads"});
  c = mla(16, 1);
  c.tuning.num_kv_stages = 6;  // 6 x 36 KB of latent rows
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_kv_stages"});
  // The wgmma pass: sm_90a only, one 64-row tile of 8 warps.
  c = mla(128, 1, "sm_80");
  c.tuning.consumer_warpgroups = 2;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.consumer_warpgroups"});
  c = mla(128, 1);
  c.tuning.consumer_warpgroups = 1;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.consumer_warpgroups"});
  c = mla(128, 1);
  c.tuning.consumer_warpgroups = 2;
  c.tuning.BM = 32;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BM"});
  c = mla(128, 1);
  c.tuning.num_warps = 4;
  c.tuning.consumer_warpgroups = 2;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_warps"});
  c = mla(16, 1);
  c.head_dim.v = 192;  // three panels: no even split between warps
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim.v"});
  c.head_dim.v = 384;  // two warps of 192 columns: more registers than a warp has
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"head_dim.v"});
  c = mla(128, 1);
  c.tuning.BN = 40;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.BN"});
  c = mla(128, 1);
  c.tuning.kv_loads = KvLoads::cp_async;  // the ring's wgmma pass: 48-key tiles
  c.tuning.num_kv_stages = 3;             // 64 x 576 of Q and 3 x 54 KB of latent rows
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.num_kv_stages"});
  // The latent pass has exactly two warpgroups; a cache without shared K/V takes one or two.
  c = mla(16, 1);
  c.head_dim = {128, 128, 0};
  c.kv_layout.shared_kv = false;
  c.tuning.consumer_warpgroups = 3;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"tuning.consumer_warpgroups"});
  c = mla(16, 1);
  c.scales.k = ScaleGranularity::per_tensor;
  EXPECT_EQ(issue_paths(c), std::set<std::string>{"scales.k"});
  // The prefill families have no shared K/V (at a head dim they take).
  for (Family f : {Family::sm90, Family::sm80}) {
    c = mla(16, 1);
    c.head_dim = {128, 128, 0};
    c.kv_layout = {false, 0, true};
    c.tuning.family = f;
    EXPECT_EQ(issue_paths(c), std::set<std::string>{"kv_layout.shared_kv"}) << to_string(f);
  }
}

TEST(LatentDecode, VIsReadFromK) {
  const Config r = resolve(mla(16, 1));
  const KernelSource src = generate(r);
  AttentionArgs a = mla_step_args();
  DeviceLimits device;
  const FamilyHost& host = family_host(src.launch.family);
  const LaunchPlan plan = host.plan(r, src.launch, a, device);
  EXPECT_EQ(plan.params.v.ptr, plan.params.k.ptr);
  EXPECT_EQ(plan.params.v.row_stride, plan.params.k.row_stride);
  AttentionArgs with_v = a;
  with_v.v = Tensor::paged(reinterpret_cast<const void*>(uintptr_t(1) << 21), 64, 1, 512);
  try {
    host.plan(r, src.launch, with_v, device);
    ADD_FAILURE() << "a separate V tensor was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("args.v is set but the config has kv_layout.shared_kv = true"), std::string::npos)
        << e.what();
  }
  with_v.v = a.k;  // the same tensor is not a second one
  EXPECT_NO_THROW(host.plan(r, src.launch, with_v, device));
}

// The tiles "auto" picks compile without spills on the targets the CI builds for.
TEST(LatentDecode, DefaultTilesCompileWithoutSpills) {
  struct Case {
    int heads, tokens, page, rope;
    Mask mask;
    bool varlen;
    const char* arch;
    int v = 512;
    bool tma = false;  // tuning.kv_loads "tma": the seesaw pass
    bool fp8 = false;  // e4m3 nope, bf16 rope, per-token K scales
  };
  for (const Case& k : {Case{16, 1, 64, 64, Mask::none, false, "sm_90a"}, Case{128, 2, 64, 64, Mask::causal, false, "sm_90a"},
                        Case{32, 1, 16, 64, Mask::none, true, "sm_90a"}, Case{64, 2, 0, 0, Mask::causal, false, "sm_90a"},
                        Case{16, 2, 64, 64, Mask::causal, false, "sm_90a", 128},
                        Case{64, 1, 1, 0, Mask::sliding_window, false, "sm_90a"},
                        Case{32, 4, 0, 64, Mask::causal, true, "sm_80"}, Case{128, 1, 16, 64, Mask::none, false, "sm_100a"},
                        Case{128, 2, 64, 64, Mask::causal, false, "sm_90a", 512, true},
                        Case{64, 1, 16, 0, Mask::none, false, "sm_90a", 256, true},
                        Case{16, 4, 0, 64, Mask::causal, true, "sm_90a", 512, true},
                        Case{16, 1, 64, 64, Mask::none, false, "sm_90a", 512, false, true},
                        Case{128, 2, 64, 64, Mask::causal, false, "sm_90a", 512, false, true},
                        Case{32, 4, 0, 64, Mask::causal, true, "sm_80", 512, false, true},
                        Case{16, 1, 16, 64, Mask::sliding_window, false, "sm_100a", 256, false, true},
                        Case{16, 1, 1, 64, Mask::none, false, "sm_89", 512, false, true},
                        Case{64, 1, 0, 64, Mask::none, true, "sm_90a", 512, false, true},
                        Case{128, 1, 8, 64, Mask::sliding_window, false, "sm_90a", 256, false, true}}) {
    Config c = k.fp8 ? mla_fp8(k.heads, k.tokens, k.arch) : mla(k.heads, k.tokens, k.arch);
    if (!k.page) c.kv_layout = {false, 0, true};
    else c.kv_layout.page_size = k.page;
    c.head_dim.rope = k.rope;
    c.head_dim.v = k.v;
    if (!k.rope) c.dtype.rope.reset();
    c.mask = k.mask;
    c.varlen = k.varlen;
    if (k.tma) c.tuning.kv_loads = KvLoads::tma;
    const Config r = resolve(c);
    const KernelSource src = generate(r);
    ASSERT_EQ(src.launch.passes.size(), 1u);  // the combine pass
    CompiledKernel kernel = compile(src);
    EXPECT_EQ(kernel.report.spill_stores, 0) << canonical_json(r) << "\n" << kernel.log;
    // wgmma stays pipelined (no C7514 / C7515 / C7519 serialisation) in the wgmma passes.
    EXPECT_EQ(kernel.log.find("C75"), std::string::npos) << canonical_json(r) << "\n" << kernel.log;
  }
}

}  // namespace
}  // namespace flashjit
