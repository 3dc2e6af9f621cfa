// The sm90 kernels are Hopper code in the machine code, not only in the PTX: both GEMMs as HGMMA
// (Q·Kᵀ at N = BN, P·V at N = dv), TMA loads, and the register hand-over between producer and
// consumers. The sm80 family, for contrast, issues HMMA and no HGMMA. Needs cuobjdump and nvdisasm
// (the CUDA toolkit's, or the ones scripts/setup fetches); skips without them.
#include "generator/config.hpp"
#include "generator/element_types.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/compiler.hpp"
#include "sm90/smem_regions.cuh"
#include "cli_test_support.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

namespace flashjit {
namespace {

using cli::test::Scratch;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// cuobjdump -sass of a cubin, or a failed expectation with its output.
std::string disassemble(const std::vector<char>& cubin) {
  Scratch scratch;
  const std::string file = scratch.write("kernel.cubin", std::string(cubin.begin(), cubin.end()));
  const cli::test::Outcome o = cli::test::run_program(FLASHJIT_CUOBJDUMP, {"-sass", file}, {}, scratch.path());
  EXPECT_EQ(o.code, 0) << o.err.substr(0, 2000);
  return o.out;
}

class Sass : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(FLASHJIT_CUOBJDUMP).empty())
      GTEST_SKIP() << "no cuobjdump at configure time (the toolkit lacks it; scripts/setup fetches it)";
  }
};

TEST_F(Sass, Sm90KernelsIssueHgmmaTmaAndRegisterHandOver) {
  struct Case { int d; Mask mask; bool pair; };
  for (const Case& k : {Case{64, Mask::none, false}, Case{64, Mask::causal, false},
                        Case{128, Mask::none, false}, Case{128, Mask::causal, false},
                        Case{128, Mask::none, true}, Case{256, Mask::none, false},
                        Case{256, Mask::causal, false}}) {
    Config c;
    c.arch = "sm_90a";
    c.head_dim = {k.d, k.d, 0};
    c.mask = k.mask;
    if (k.pair) c.tuning.pair_cta = true;
    const Config r = resolve(c);
    const std::string sass = disassemble(compile(generate(r)).cubin);
    const std::string what = canonical_json(r);
    EXPECT_GT(count(sass, "HGMMA.64x" + std::to_string(*r.tuning.BN) + "x16.F32"), 0u) << "Q·Kᵀ in " << what;
    EXPECT_GT(count(sass, "HGMMA.64x" + std::to_string(k.d) + "x16.F32"), 0u) << "P·V in " << what;
    EXPECT_GT(count(sass, "UTMALDG"), 0u) << what;
    EXPECT_GT(count(sass, "USETMAXREG"), 0u) << what;
    EXPECT_EQ(count(sass, "HMMA."), 0u) << what;
  }
}

// fp8 sm90 kernels run both GEMMs on the fp8 tensor-core path (QGMMA, k32): Q·Kᵀ at N = BN and
// P·V on the transposed V, which the producer's spare warps write with transposing ldmatrix and
// stmatrix (LDSM.16.MT88, STSM), not 8-byte shared loads; no HGMMA or HMMA. P·V is 8 columns wider
// than dv (the row sums, over Vt's rows of ones) where N stays within 256. Head dims in 128-byte
// panels (128, 256) and in 64-byte ones (64; qk 192).
TEST_F(Sass, Sm90Fp8KernelsIssueQgmma) {
  struct Dims {
    int qk, v, pv_n;
  };
  for (DType dtype : {DType::e4m3, DType::e5m2})
    for (auto [qk, d, pv_n] : {Dims{128, 128, 136}, Dims{256, 256, 256}, Dims{64, 64, 72}, Dims{192, 128, 136}}) {
      Config c;
      c.arch = "sm_90a";
      c.dtype.qkv = dtype;
      c.head_dim = {qk, d, 0};
      c.mask = Mask::causal;
      const Config r = resolve(c);
      ASSERT_EQ(*r.tuning.family, Family::sm90);
      const std::string sass = disassemble(compile(generate(r)).cubin);
      const std::string what = canonical_json(r);
      const std::string type = dtype == DType::e4m3 ? "E4M3.E4M3" : "E5M2.E5M2";
      EXPECT_GT(count(sass, "QGMMA.64x" + std::to_string(*r.tuning.BN) + "x32.F32." + type), 0u) << "Q·Kᵀ in " << what;
      EXPECT_GT(count(sass, "QGMMA.64x" + std::to_string(pv_n) + "x32.F32." + type), 0u) << "P·V in " << what;
      EXPECT_EQ(count(sass, "HGMMA"), 0u) << what;
      EXPECT_EQ(count(sass, "HMMA."), 0u) << what;
      EXPECT_GT(count(sass, "UTMALDG"), 0u) << what;
      EXPECT_GT(count(sass, "LDSM.16.MT88.4"), 0u) << "V's transpose in " << what;
      EXPECT_EQ(count(sass, "LDS.64"), 0u) << what;
    }
}

// Where ptxas puts the consumers' stage releases. After each wait for Q·Kᵀ (one per compiled copy
// of the loop's tile) and before the softmax's first exponential, K's stage is freed, and in
// fp8 kernels that take row sums from P·V (dv + 8 <= 256) P·V is waited for and V's stage freed
// too: the transposers fill the next Vt from it. ptxas chooses these places; fp8 kernels in which
// it sank the releases past the softmax ran 4-13 % slower at d128 (docs/sm90.md, *Row sums per
// tile*).
TEST_F(Sass, Sm90ConsumersReleaseStagesBeforeTheSoftmax) {
  struct Case {
    DType dtype;
    int d;
    Mask mask;
  };
  for (const Case& k : {Case{DType::e4m3, 64, Mask::none}, Case{DType::e4m3, 64, Mask::causal},
                        Case{DType::e4m3, 128, Mask::none}, Case{DType::e4m3, 128, Mask::causal},
                        Case{DType::e5m2, 128, Mask::sliding_window}, Case{DType::e4m3, 256, Mask::none},
                        Case{DType::bf16, 64, Mask::causal}, Case{DType::bf16, 128, Mask::none}}) {
    Config c;
    c.arch = "sm_90a";
    c.dtype.qkv = k.dtype;
    c.head_dim = {k.d, k.d, 0};
    c.mask = k.mask;
    const Config r = resolve(c);
    ASSERT_EQ(*r.tuning.family, Family::sm90);
    const std::string sass = disassemble(compile(generate(r)).cubin);
    const std::string what = canonical_json(r);
    const bool sums = is_float8(k.dtype) && sm90::vt_sums_rows(k.d);  // P V's row sums taken before the softmax
    size_t waits = 0;
    for (size_t at = sass.find("DEPBAR.LE gsb0, 0x1"); at != std::string::npos;
         at = sass.find("DEPBAR.LE gsb0, 0x1", at + 1)) {
      ++waits;
      const size_t exp = sass.find("MUFU.EX2", at);
      ASSERT_NE(exp, std::string::npos) << what;
      const std::string before = sass.substr(at, exp - at);
      EXPECT_GE(count(before, "SYNCS.ARRIVE"), sums ? 2u : 1u) << "Q·Kᵀ wait " << waits << " in " << what;
      if (sums) EXPECT_GT(count(before, "DEPBAR.LE gsb0, 0x0"), 0u) << "P·V's wait, copy " << waits << " in " << what;
    }
    EXPECT_GT(waits, 0u) << what;
  }
}

// MLA prefill with fp8 nope columns beside a bf16 rope part (qk 192 = 128 + 64, v 128): the nope
// k-steps and P·V on QGMMA, the rope k-steps on HGMMA (bf16, k16) into the same accumulator.
TEST_F(Sass, Sm90Fp8NopeBesideBf16RopeIssuesBoth) {
  Config c;
  c.arch = "sm_90a";
  c.dtype = {DType::e4m3, DType::bf16, DType::bf16, std::nullopt};
  c.head_dim = {192, 128, 64};
  c.scales = {ScaleGranularity::per_tensor, ScaleGranularity::per_tensor, ScaleGranularity::none};
  c.mask = Mask::causal;
  const Config r = resolve(c);
  ASSERT_EQ(*r.tuning.family, Family::sm90);
  const std::string sass = disassemble(compile(generate(r)).cubin);
  const std::string bn = std::to_string(*r.tuning.BN);
  EXPECT_GT(count(sass, "QGMMA.64x" + bn + "x32.F32.E4M3.E4M3"), 0u) << "Q·Kᵀ nope";
  EXPECT_GT(count(sass, "HGMMA.64x" + bn + "x16.F32.BF16"), 0u) << "Q·Kᵀ rope";
  EXPECT_GT(count(sass, "QGMMA.64x136x32.F32.E4M3.E4M3"), 0u) << "P·V (v 128 and 8 row-sum columns)";
  EXPECT_EQ(count(sass, "HMMA."), 0u);
}

// tuning.exp2_fma_every moves exponentials from the SFU (MUFU.EX2) to the FMA pipe, whose
// rounding step adds 1.5 * 2^23 (0x4b400000): fewer MUFU.EX2 with one in two, fewer still with
// all (the running maxima's corrections stay on the SFU), and no such constant without it.
TEST_F(Sass, Sm90Exp2FmaEveryMovesExponentialsOffTheSfu) {
  for (DType dtype : {DType::bf16, DType::e4m3}) {
    Config c;
    c.arch = "sm_90a";
    c.dtype.qkv = dtype;
    c.head_dim = dtype == DType::bf16 ? HeadDims{64, 64, 0} : HeadDims{128, 128, 0};
    c.mask = Mask::causal;
    size_t ex2[3] = {0, 0, 0}, rounding[3] = {0, 0, 0};
    for (int every : {0, 1, 2}) {
      Config k = c;
      if (every) k.tuning.exp2_fma_every = every;
      const Config r = resolve(k);
      ASSERT_EQ(*r.tuning.family, Family::sm90);
      const std::string sass = disassemble(compile(generate(r)).cubin);
      ex2[every] = count(sass, "MUFU.EX2");
      rounding[every] = count(sass, "0x4b400000");
    }
    const std::string what = to_string(dtype);
    EXPECT_GT(ex2[0], 0u) << what;
    EXPECT_LT(ex2[2], ex2[0]) << what;
    EXPECT_LT(ex2[1], ex2[2]) << what;
    EXPECT_EQ(rounding[0], 0u) << what;
    EXPECT_GT(rounding[2], 0u) << what;
    EXPECT_GT(rounding[1], rounding[2]) << what;
  }
}

TEST_F(Sass, Sm80KernelsIssueHmmaNotHgmma) {
  Config c;
  c.arch = "sm_80";
  const std::string sass = disassemble(compile(generate(resolve(c))).cubin);
  EXPECT_GT(count(sass, "HMMA.16816.F32"), 0u);
  EXPECT_EQ(count(sass, "HGMMA"), 0u);
  EXPECT_EQ(count(sass, "UTMALDG"), 0u);
}

// Decode kernels compute on mma.sync (HMMA) on every target and gather K/V with cp.async
// (LDGSTS), or on sm_90a load them as TMA boxes (UTMALDG) when tuning.kv_loads names TMA (Q is
// gathered with cp.async either way); the module holds the combine pass too. On sm_90a the
// combine is the split pass's programmatic dependent: the split pass lets it launch (PREEXIT)
// and it waits for the split pass's completion (ACQBULK); sm_80 has neither.
TEST_F(Sass, DecodeKernelsLoadKvByTargetAndIssueHmma) {
  for (const char* arch : {"sm_80", "sm_90a", "sm_90a tma"}) {
    const bool sm90 = std::string(arch) != "sm_80", tma = std::string(arch) == "sm_90a tma";
    Config c;
    c.arch = sm90 ? "sm_90a" : "sm_80";
    c.group = 8;
    c.kv_layout = {true, 16};
    c.tuning.max_seqlen_q = 2;
    if (tma) c.tuning.kv_loads = KvLoads::tma;
    const Config r = resolve(c);
    const KernelSource src = generate(r);
    const std::string sass = disassemble(compile(src).cubin);
    EXPECT_GT(count(sass, "HMMA.16816.F32"), 0u) << arch;
    EXPECT_GT(count(sass, "LDGSTS"), 0u) << arch;
    EXPECT_EQ(count(sass, "UTMALDG") > 0, tma) << arch;
    EXPECT_GT(count(sass, src.launch.passes.at(0).entry), 0u) << "the combine entry in " << arch;
    const size_t dependent = sm90 ? 1 : 0;
    EXPECT_EQ(count(sass, "PREEXIT"), dependent) << arch;
    EXPECT_EQ(count(sass, "ACQBULK"), dependent) << arch;
  }
}

// fp8 caches: the tiles stay fp8 (cp.async gathers on sm_80, TMA boxes on sm_90a), and the
// widened K/V meet fp16 Q and P on the fp16 tensor cores (no bf16 MMA, no fp8 MMA).
TEST_F(Sass, Fp8DecodeKernelsGatherFp8AndIssueFp16Hmma) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Config c;
    c.arch = arch;
    c.group = 8;
    c.dtype.qkv = DType::e4m3;
    c.scales = {ScaleGranularity::per_tensor, ScaleGranularity::per_tensor, ScaleGranularity::per_tensor};
    c.kv_layout = {true, 16};
    c.tuning.max_seqlen_q = 2;
    const Config r = resolve(c);
    ASSERT_EQ(*r.tuning.family, Family::decode);
    const std::string sass = disassemble(compile(generate(r)).cubin);
    EXPECT_GT(count(sass, "HMMA.16816.F32 "), 0u) << arch;
    EXPECT_EQ(count(sass, "HMMA.16816.F32.BF16"), 0u) << arch;
    EXPECT_EQ(count(sass, "QGMMA"), 0u) << arch;
    const bool tma = std::string(arch) == "sm_90a";
    EXPECT_EQ(count(sass, "LDGSTS") > 0, !tma) << arch;  // Q is dequantised by plain loads
    EXPECT_EQ(count(sass, "UTMALDG") > 0, tma) << arch;
  }
}

// A latent cache with 32 packed rows or more runs on sm_90a's wgmma: Q·Kᵀ at N = BN, P·V at N = dv / 2
// (each warpgroup's half of O), K/V still gathered with cp.async; no HMMA.
TEST_F(Sass, LatentWgmmaPassIssuesHgmma) {
  Config c;
  c.arch = "sm_90a";
  c.head_dim = {576, 512, 64};
  c.group = 128;
  c.kv_layout = {true, 64, true};
  c.tuning.kv_loads = KvLoads::cp_async;  // the ring's gathers (TMA loads take the seesaw pass)
  const Config r = resolve(c);
  ASSERT_EQ(*r.tuning.consumer_warpgroups, 2);
  const std::string sass = disassemble(compile(generate(r)).cubin);
  EXPECT_GT(count(sass, "HGMMA.64x" + std::to_string(*r.tuning.BN) + "x16.F32.BF16"), 0u) << "Q·Kᵀ";
  EXPECT_GT(count(sass, "HGMMA.64x256x16.F32.BF16"), 0u) << "P·V";
  EXPECT_GT(count(sass, "LDGSTS"), 0u);
  EXPECT_EQ(count(sass, "HMMA."), 0u);
}

// The seesaw pass (TMA loads, the default at 128 heads and page 64): HGMMA for both GEMMs, the
// tiles by UTMALDG, setmaxnreg.
TEST_F(Sass, LatentSeesawPassLoadsByTma) {
  Config c;
  c.arch = "sm_90a";
  c.head_dim = {576, 512, 64};
  c.group = 128;
  c.kv_layout = {true, 64, true};
  const Config r = resolve(c);
  ASSERT_EQ(*r.tuning.kv_loads, KvLoads::tma);  // the default where TMA boxes apply
  const std::string sass = disassemble(compile(generate(r)).cubin);
  EXPECT_GT(count(sass, "HGMMA.64x32x16.F32.BF16"), 0u) << "Q·Kᵀ";
  EXPECT_GT(count(sass, "HGMMA.64x256x16.F32.BF16"), 0u) << "P·V";
  EXPECT_GT(count(sass, "UTMALDG"), 0u);
  EXPECT_GT(count(sass, "USETMAXREG"), 0u);
  EXPECT_EQ(count(sass, "HMMA."), 0u);
}

// DeepSeek's fp8 latent cache on sm_90a: e4m3 nope, bf16 rope, per-token K scales, `heads`
// query heads on one latent head, pages of 64.
Config fp8_latent_config(int heads) {
  Config c;
  c.arch = "sm_90a";
  c.dtype = {DType::e4m3, DType::bf16, DType::bf16, DType::fp32};
  c.scales = {ScaleGranularity::per_tensor, ScaleGranularity::per_token, ScaleGranularity::none};
  c.head_dim = {576, 512, 64};
  c.group = heads;
  c.kv_layout = {true, 64, true};
  return c;
}

// An fp8 latent cache (e4m3 nope, bf16 rope) on the mma.sync pass (16 heads, or gathers named):
// fp16 HMMA for the widened nope columns and P V, bf16 HMMA for the rope part, cp.async gathers;
// no HGMMA, no fp8 MMA.
TEST_F(Sass, LatentFp8CacheWidensToFp16Hmma) {
  for (int heads : {16, 128}) {
    Config c = fp8_latent_config(heads);
    c.tuning.kv_loads = KvLoads::cp_async;
    c.tuning.swap_qk = false;
    const std::string sass = disassemble(compile(generate(resolve(c))).cubin);
    EXPECT_GT(count(sass, "HMMA.16816.F32 "), 0u) << heads << " heads: fp16 (nope, P V)";
    EXPECT_GT(count(sass, "HMMA.16816.F32.BF16"), 0u) << heads << " heads: bf16 (rope)";
    EXPECT_GT(count(sass, "LDGSTS"), 0u) << heads;
    EXPECT_EQ(count(sass, "HGMMA"), 0u) << heads;
    EXPECT_EQ(count(sass, "MMA.16832"), 0u) << heads << ": no fp8 MMA";
    // sm_90a widens e4m3 pairs by conversion (one instruction a pair), not by bit placement.
    EXPECT_GT(count(sass, "F2FP.F16.E4M3.UNPACK_B"), 0u) << heads;
  }
}

// tuning.swap_qk on an fp8 latent cache at 16 heads: Q K^T's nope steps are e4m3 QGMMA (64 keys
// by 16 rows, k32) and its rope steps bf16 HGMMA, from the ring's cp.async tiles; P V stays fp16
// HMMA on the widened V columns, and Q K^T widens nothing: half the conversions of the unswapped
// pass, whose Q K^T widens K's nope columns as P V widens V's.
TEST_F(Sass, LatentSwappedQkTakesQgmma) {
  Config c = fp8_latent_config(16);
  const std::string plain = disassemble(compile(generate(resolve(c))).cubin);
  c.tuning.swap_qk = true;
  const std::string sass = disassemble(compile(generate(resolve(c))).cubin);
  EXPECT_GT(count(sass, "QGMMA.64x16x32.F32.E4M3.E4M3"), 0u);
  EXPECT_GT(count(sass, "HGMMA.64x16x16.F32.BF16"), 0u);
  EXPECT_GT(count(sass, "HMMA.16816.F32 "), 0u) << "P V";
  EXPECT_EQ(count(sass, "HMMA.16816.F32.BF16"), 0u) << "the rope steps are HGMMA";
  EXPECT_GT(count(sass, "LDGSTS"), 0u);
  // The unswapped kernel's 32-key tile widens 64 K and 64 V words a warp; the swapped 64-key
  // tile only its 128 V words.
  EXPECT_EQ(count(plain, "F2FP.F16.E4M3.UNPACK_B"), count(sass, "F2FP.F16.E4M3.UNPACK_B"));
}

// An fp8 latent cache at 128 heads on sm_90a: the seesaw pass, its stages fp16 (the loader
// warpgroup dequantises the fp8 tiles into them), so Q K^T's nope steps and P V are fp16 HGMMA
// and its rope steps bf16 HGMMA; the tiles arrive by TMA; no HMMA, no fp8 MMA.
TEST_F(Sass, LatentFp8SeesawDequantisesIntoFp16Stages) {
  const Config r = resolve(fp8_latent_config(128));
  ASSERT_EQ(*r.tuning.kv_loads, KvLoads::tma);
  const std::string sass = disassemble(compile(generate(r)).cubin);
  EXPECT_GT(count(sass, "HGMMA.64x32x16.F32 "), 0u) << "Q·Kᵀ, nope columns";
  EXPECT_GT(count(sass, "HGMMA.64x32x16.F32.BF16"), 0u) << "Q·Kᵀ, rope part";
  EXPECT_GT(count(sass, "HGMMA.64x256x16.F32 "), 0u) << "P·V";
  EXPECT_EQ(count(sass, "HGMMA.64x256x16.F32.BF16"), 0u);
  EXPECT_GT(count(sass, "UTMALDG"), 0u);
  EXPECT_EQ(count(sass, "HMMA."), 0u);
  EXPECT_EQ(count(sass, "QGMMA"), 0u);
}

// A 16-token causal bf16 d128 step on sm_90a with `group` query heads per KV head, paged.
Config decode_step(int group) {
  Config c;
  c.arch = "sm_90a";
  c.head_dim = {128, 128, 0};
  c.group = group;
  c.mask = Mask::causal;
  c.kv_layout = {true, 16};
  c.tuning.max_seqlen_q = 16;
  return resolve(c);
}

// The GQA decode pass at 64 packed rows on sm_90a: Q·Kᵀ 64 rows × a warpgroup's 64 keys, P·V
// 64 × d128, cp.async gathers, no mma.sync.
TEST_F(Sass, DecodeWgmmaPassIssuesHgmma) {
  const Config r = decode_step(4);
  ASSERT_EQ(*r.tuning.consumer_warpgroups, 2);
  const std::string sass = disassemble(compile(generate(r)).cubin);
  EXPECT_GT(count(sass, "HGMMA.64x64x16.F32.BF16"), 0u) << "Q·Kᵀ";
  EXPECT_GT(count(sass, "HGMMA.64x128x16.F32.BF16"), 0u) << "P·V";
  EXPECT_GT(count(sass, "LDGSTS"), 0u);
  EXPECT_EQ(count(sass, "HMMA."), 0u);
}

// The 128-row tile (8 query heads x 16 tokens): each warpgroup's Q·Kᵀ is 64 rows × all 128 keys
// of the tile, its P·V 64 × d128; no 64-key Q·Kᵀ, no mma.sync.
TEST_F(Sass, DecodeWgmmaPassOfOneHundredTwentyEightRows) {
  const Config r = decode_step(8);
  ASSERT_EQ(*r.tuning.BM, 128);
  ASSERT_EQ(*r.tuning.BN, 128);
  const std::string sass = disassemble(compile(generate(r)).cubin);
  EXPECT_GT(count(sass, "HGMMA.64x128x16.F32.BF16"), 0u) << "Q·Kᵀ and P·V";
  EXPECT_EQ(count(sass, "HGMMA.64x64x16.F32.BF16"), 0u);
  EXPECT_GT(count(sass, "LDGSTS"), 0u);
  EXPECT_EQ(count(sass, "HMMA."), 0u);
}

}  // namespace
}  // namespace flashjit
