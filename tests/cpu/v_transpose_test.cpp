// The fp8 V transposers' addressing (templates/sm90/v_transpose_map.cuh), run on the host against
// a model of the three instructions the kernel issues per unit: a transposing ldmatrix.x4 (b16),
// prmt and stmatrix.x4 (b16), as the PTX ISA defines their fragments. Every Vt byte of a stage
// must hold the V byte that the P·V fragment reads there (V key permuted_key(h) of column col),
// each exactly once, and no 8-row block of either instruction may put two rows in one bank group.
#include "sm90/v_transpose_map.cuh"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace flashjit::sm90 {
namespace {

using Word = std::uint32_t;

// prmt.b32 d, a, b, selector: byte n of d is byte (selector nibble n) of {b, a}.
Word prmt(Word a, Word b, unsigned selector) {
  const std::uint64_t pool = (std::uint64_t(b) << 32) | a;
  Word d = 0;
  for (int n = 0; n < 4; ++n) d |= Word((pool >> (8 * ((selector >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return d;
}

// Where a stage might start in shared memory (1024-byte aligned, as the swizzle requires).
constexpr int kStageBase = 0x2c400;

// The 16-byte chunk (bank group) of a row address inside a 128-byte line.
int chunk_of(int offset) { return (offset >> 4) & 7; }

struct Geometry {
  int block_n, head_dim_v;
  int panel;  // V's panel bytes: 128, or 64 for a dv of 64 or 192
};

class VTransposeMap : public ::testing::TestWithParam<Geometry> {};

TEST_P(VTransposeMap, EveryVtByteHoldsItsPermutedKeyOnce) {
  const Geometry g = GetParam();
  const int v_bytes = g.head_dim_v * g.block_n;
  const int vt_bytes = vt_stage_bytes(g.block_n, g.head_dim_v);
  // A V stage whose byte at (key, col) names both, so a misplaced byte cannot pass.
  std::vector<std::uint8_t> v(v_bytes);
  for (int key = 0; key < g.block_n; ++key)
    for (int col = 0; col < g.head_dim_v; ++col)
      v[v_stage_offset(g.block_n, key, col, g.panel)] = std::uint8_t(key * 31 + col * 7 + (key * col) / 5);
  std::vector<int> writes(vt_bytes, 0);
  std::vector<std::uint8_t> vt(vt_bytes, 0);

  for (int kb = 0; kb < g.block_n / 16; ++kb)
    for (int db = 0; db < g.head_dim_v / 32; ++db) {
      std::array<VTransposeLane, 32> lane;
      std::array<int, 32> load, store;
      for (int l = 0; l < 32; ++l) {
        lane[l] = v_transpose_lane(l, g.panel);
        // As the kernel adds them up: a stage's base (1024-byte aligned, as shared memory has
        // it), the unit's key block, then its column block's immediates.
        load[l] = v_transpose_load_columns(kStageBase + v_transpose_load_keys(lane[l], kb, g.panel), g.block_n, db,
                                           g.panel) - kStageBase;
        store[l] = kStageBase + v_transpose_store_keys(lane[l], g.block_n, g.head_dim_v, kb) +
                   v_transpose_store_columns(db, vt_half_panel_block(g.block_n, kb)) - kStageBase;
        EXPECT_EQ(store[l], v_transpose_store(lane[l], g.block_n, g.head_dim_v, kb, db));
        EXPECT_EQ(load[l], v_transpose_load(lane[l], g.block_n, kb, db, g.panel));
      }
      for (int m = 0; m < 4; ++m) {  // each matrix's eight rows in eight bank groups
        std::set<int> in, out;
        for (int r = 0; r < 8; ++r) {
          in.insert(chunk_of(load[8 * m + r]));
          out.insert(chunk_of(store[8 * m + r]));
        }
        EXPECT_EQ(in.size(), 8u) << "ldmatrix matrix " << m << " kb " << kb << " db " << db;
        EXPECT_EQ(out.size(), 8u) << "stmatrix matrix " << m << " kb " << kb << " db " << db;
      }
      // ldmatrix.x4.trans: register m of lane l holds b16 elements (row 2q, column c) and
      // (row 2q + 1, column c) of matrix m, q = l % 4, c = l / 4; a row is the 16 bytes at the
      // address lane 8m + row gave, column c its bytes 2c and 2c + 1.
      std::array<std::array<Word, 4>, 32> x{};
      for (int l = 0; l < 32; ++l)
        for (int m = 0; m < 4; ++m) {
          const int q = l % 4, c = l / 4;
          const int lo = load[8 * m + 2 * q] + 2 * c, hi = load[8 * m + 2 * q + 1] + 2 * c;
          x[l][m] = Word(v[lo]) | Word(v[lo + 1]) << 8 | Word(v[hi]) << 16 | Word(v[hi + 1]) << 24;
        }
      // stmatrix.x4: register m of lane l is b16 columns 2q, 2q + 1 (bytes 4q .. 4q + 3) of row
      // l / 4 of matrix m, stored at the address lane 8m + row gave.
      for (int l = 0; l < 32; ++l) {
        const Word regs[4] = {prmt(x[l][0], x[l][1], lane[l].select[0]), prmt(x[l][0], x[l][1], lane[l].select[1]),
                              prmt(x[l][2], x[l][3], lane[l].select[0]), prmt(x[l][2], x[l][3], lane[l].select[1])};
        for (int m = 0; m < 4; ++m)
          for (int b = 0; b < 4; ++b) {
            const int at = store[8 * m + l / 4] + 4 * (l % 4) + b;
            ASSERT_GE(at, 0);
            ASSERT_LT(at, vt_bytes);
            vt[at] = std::uint8_t(regs[m] >> (8 * b));
            ++writes[at];
          }
      }
    }

  for (int col = 0; col < g.head_dim_v; ++col)
    for (int h = 0; h < g.block_n; ++h) {
      const int at = vt_stage_offset(g.block_n, g.head_dim_v, col, h);
      ASSERT_EQ(writes[at], 1) << "Vt column " << col << ", fragment key " << h;
      ASSERT_EQ(vt[at], v[v_stage_offset(g.block_n, permuted_key(h), col, g.panel)])
          << "Vt column " << col << ", fragment key " << h << " (V key " << permuted_key(h) << ")";
    }
  // Nothing else is written: not the rows of ones after V's columns (the row sums' columns of P V).
  int total = 0;
  for (int w : writes) total += w;
  EXPECT_EQ(total, g.block_n * g.head_dim_v);
}

// Vt keeps 8 rows of ones after V's columns where P V's wgmma may be 8 columns wider (N <= 256).
TEST(VTransposeSumRows, WhereTheWgmmaHasRoom) {
  EXPECT_EQ(vt_rows(64), 72);
  EXPECT_EQ(vt_rows(128), 136);
  EXPECT_EQ(vt_rows(192), 200);
  EXPECT_EQ(vt_rows(256), 256);
  EXPECT_EQ(vt_stage_offset(256, 128, 0, 128), 136 * 128);  // the second key panel starts after the ones
}

// The fill of the ones rows (vt_sum_fill_offset over every stage, stages as smem_regions lays them
// out) writes rows dv .. dv + 7 of every key panel of every stage once, as P V's wgmma reads them
// (row n of panel p at p x vt_panel_bytes + n x its row bytes), no V byte and nothing past the
// region.
TEST(VTransposeSumRows, FillWritesEveryStagesOnesRowsOnce) {
  for (const int block_n : {32, 64, 96, 128, 160, 192, 224, 256})
    for (const int dv : {64, 128, 192})
      for (const int stages : {1, 2, 3}) {
        SCOPED_TRACE("BN " + std::to_string(block_n) + " dv " + std::to_string(dv) + " stages " +
                     std::to_string(stages));
        const int stage_bytes = smem_align(vt_stage_bytes(block_n, dv));
        std::vector<int> writes(stages * stage_bytes, 0);
        for (int i = 0; i < stages * vt_sum_chunks(block_n); ++i) {
          const int at = vt_sum_fill_offset(block_n, dv, stage_bytes, i);
          ASSERT_GE(at, 0);
          ASSERT_LE(at + 16, int(writes.size()));
          for (int b = 0; b < 16; ++b) ++writes[at + b];
        }
        int ones = 0;
        for (int st = 0; st < stages; ++st) {
          const int base = st * stage_bytes;
          for (int col = 0; col < dv; ++col)
            for (int h = 0; h < block_n; ++h)
              ASSERT_EQ(writes[base + vt_stage_offset(block_n, dv, col, h)], 0) << "V column " << col << " key " << h;
          for (int p = 0; p * 128 < block_n; ++p) {
            const int row_bytes = block_n % 128 == 64 && p == block_n / 128 ? 64 : 128;
            for (int n = dv; n < dv + kVtSumRows; ++n)
              for (int b = 0; b < row_bytes; ++b)
                ASSERT_EQ(writes[base + p * vt_panel_bytes(dv) + n * row_bytes + b], 1)
                    << "stage " << st << " panel " << p << " row " << n;
            ones += kVtSumRows * row_bytes;
          }
        }
        EXPECT_EQ(stages * vt_sum_chunks(block_n) * 16, ones);  // and nothing else
      }
}

// Where BN leaves 64 keys over (BN 64, 192), the last key panel has rows of 64 bytes, 64-byte
// swizzled (chunk c of column col's row at c ^ (col / 2 % 4)), so a stage holds no half-empty rows.
TEST(VTransposeHalfPanel, LastPanelOfSixtyFourKeysHasSixtyFourByteRows) {
  EXPECT_EQ(vt_stage_bytes(192, 128), 136 * 128 + 136 * 64);
  EXPECT_EQ(vt_stage_bytes(64, 256), 256 * 64);
  EXPECT_EQ(vt_stage_bytes(160, 128), 2 * 136 * 128);  // 32 keys over: a partly used 128-byte panel
  EXPECT_EQ(vt_row_bytes(192, 1), 64);
  EXPECT_EQ(vt_row_bytes(192, 0), 128);
  EXPECT_EQ(vt_row_bytes(160, 1), 128);
  EXPECT_EQ(vt_stage_offset(192, 128, 0, 128), 136 * 128);
  EXPECT_EQ(vt_stage_offset(192, 128, 1, 128), 136 * 128 + 64);
  EXPECT_EQ(vt_stage_offset(192, 128, 2, 128), 136 * 128 + 2 * 64 + 16);  // chunk 0 of column 2 at 0 ^ 1
  EXPECT_EQ(vt_stage_offset(192, 128, 0, 191), 136 * 128 + 48 + 15);
}

// Block sizes the fp8 kernels take (BN a multiple of 32, up to 256; a last key panel of 64-byte
// rows where BN leaves 64 keys, partly used where it leaves 32 or 96) and V widths in 128-byte panels (dv 128, 256) and in
// 64-byte ones (dv 64, 192).
INSTANTIATE_TEST_SUITE_P(Tiles, VTransposeMap,
                         ::testing::Values(Geometry{64, 128, 128}, Geometry{96, 256, 128}, Geometry{128, 128, 128},
                                           Geometry{160, 128, 128}, Geometry{192, 128, 128}, Geometry{256, 256, 128},
                                           Geometry{64, 64, 64}, Geometry{96, 64, 64}, Geometry{128, 64, 64},
                                           Geometry{192, 64, 64}, Geometry{224, 64, 64}, Geometry{256, 64, 64},
                                           Geometry{128, 192, 64}),
                         [](const ::testing::TestParamInfo<Geometry>& i) {
                           return "bn" + std::to_string(i.param.block_n) + "_dv" + std::to_string(i.param.head_dim_v) +
                                  "_panel" + std::to_string(i.param.panel);
                         });

// The map's V offsets are the TMA swizzle's: in a 64-byte panel the 16-byte chunk c of key k
// lands at chunk c ^ ((k / 2) % 4) of the row, as CU_TENSOR_MAP_SWIZZLE_64B writes it (address
// bits 4-5 XOR bits 7-8); in a 128-byte panel at c ^ (k % 8).
TEST(VTransposeSwizzle, StageOffsetsFollowTheTmaSwizzle) {
  EXPECT_EQ(v_stage_offset(128, 0, 0, 64), 0);
  EXPECT_EQ(v_stage_offset(128, 1, 16, 64), 64 + 16);
  EXPECT_EQ(v_stage_offset(128, 2, 0, 64), 128 + 16);
  EXPECT_EQ(v_stage_offset(128, 7, 48 + 5, 64), 7 * 64 + ((3 ^ 3) << 4) + 5);
  EXPECT_EQ(v_stage_offset(128, 9, 32, 64), 9 * 64 + ((2 ^ 0) << 4));
  EXPECT_EQ(v_stage_offset(128, 3, 64 + 16, 64), 128 * 64 + 3 * 64 + ((1 ^ 1) << 4));  // second panel
  EXPECT_EQ(v_stage_offset(64, 3, 16, 128), 3 * 128 + ((1 ^ 3) << 4));
  EXPECT_EQ(v_stage_offset(64, 5, 128 + 2, 128), 64 * 128 + 5 * 128 + ((0 ^ 5) << 4) + 2);
}

}  // namespace
}  // namespace flashjit::sm90
