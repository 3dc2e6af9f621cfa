// The problem shape `run` and `bench` build from their flags (checked without a GPU).
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cli/errors.hpp"
#include "cli/npy.hpp"
#include "cli/shape.hpp"
#include "cli_test_support.hpp"

#include <limits>

namespace flashjit::cli::test {
namespace {

std::string usage_error(const ShapeOptions& o, const Config& c) {
  try {
    make_shape(o, c);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CliShape, DefaultsFollowTheConfig) {
  Config c;
  c.group = 4;
  ShapeOptions o;
  o.heads = 16;
  o.seqlen_q = 100;
  ProblemShape s = make_shape(o, c);
  EXPECT_EQ(s.heads_k, 4);
  EXPECT_EQ(s.seqlen_k, 100);
  EXPECT_EQ(s.layout, Layout::bshd);
  EXPECT_TRUE(s.seqlens_q.empty());

  c.varlen = true;
  s = make_shape(o, c);  // uniform ragged batch
  EXPECT_EQ(s.seqlens_q, (std::vector<int>{100, 100}));
  o.seqlens_q = "3,100,7";
  s = make_shape(o, c);
  EXPECT_EQ(s.batch, 3);
  EXPECT_EQ(s.seqlens_k, (std::vector<int>{3, 100, 7}));
  o.seqlens_k = "5,5,5";
  EXPECT_EQ(make_shape(o, c).seqlens_k, (std::vector<int>{5, 5, 5}));
}

TEST(CliShape, RejectsFlagsTheConfigCannotTake) {
  Config c;
  c.group = 4;
  ShapeOptions o;
  o.heads = 6;
  EXPECT_TRUE(contains(usage_error(o, c), "not a multiple of the config's group")) << usage_error(o, c);
  o.heads = 16;
  o.kv_heads = 2;
  EXPECT_TRUE(contains(usage_error(o, c), "must equal --kv-heads 2 x the config's group 4"));
  o.kv_heads = 4;
  EXPECT_EQ(usage_error(o, c), "");
  o.seqlens_q = "1,2";
  EXPECT_TRUE(contains(usage_error(o, c), "\"varlen\": true"));
  c.varlen = true;
  o.seqlens_k = "1";
  EXPECT_TRUE(contains(usage_error(o, c), "one per sequence"));
  o.seqlens_k = "1,x";
  EXPECT_TRUE(contains(usage_error(o, c), "--seqlens-k"));
  o.seqlens_k.clear();
  o.window = "8,0";
  EXPECT_TRUE(contains(usage_error(o, c), "sliding_window"));
  c.mask = Mask::sliding_window;
  EXPECT_EQ(make_shape(o, c).window_left, 8);
  o.window = "8";
  EXPECT_TRUE(contains(usage_error(o, c), "L,R"));
  o.window.clear();
  o.layout = "sbhd";
  EXPECT_TRUE(contains(usage_error(o, c), "--layout"));
}

TEST(CliShape, CacheLengthsSplitsAndPages) {
  Config c;
  c.group = 4;
  c.tuning.family = Family::decode;
  c.tuning.max_seqlen_q = 1;
  ShapeOptions o;
  o.heads = 8;
  o.seqlen_q = 1;
  o.cache_lens = "0,100,4096";
  ProblemShape s = make_shape(o, c);
  EXPECT_EQ(s.batch, 3);
  EXPECT_EQ(s.seqlen_k, 4096);  // the longest cache
  EXPECT_EQ(s.keys_of(c, 1), 100);
  o.seqlen_k = 1000;
  EXPECT_TRUE(contains(usage_error(o, c), "more than --seqlen-k 1000")) << usage_error(o, c);
  o.seqlen_k = -1;
  o.batch = 5;
  EXPECT_TRUE(contains(usage_error(o, c), "--batch is 5"));
  o.batch = 2;
  o.splits = 7;
  EXPECT_EQ(make_shape(o, c).num_splits, 7);
  o.ordered_pages = true;
  EXPECT_TRUE(contains(usage_error(o, c), "kv_layout is contiguous"));
  c.kv_layout = {true, 16};
  EXPECT_FALSE(make_shape(o, c).shuffle_pages);
  Config prefill;
  ShapeOptions p;
  p.splits = 2;
  EXPECT_TRUE(contains(usage_error(p, prefill), "only decode kernels split"));
  Config ragged = c;
  ragged.varlen = true;
  EXPECT_TRUE(contains(usage_error(o, ragged), "--seqlens-k"));
  EXPECT_EQ(with_page_size(c, 0).kv_layout, KvLayout{});
  EXPECT_EQ(with_page_size(Config{}, 64).kv_layout, (KvLayout{true, 64}));
  EXPECT_EQ(with_page_size(c, -1).kv_layout, c.kv_layout);
  // A latent cache stays one when its paging changes.
  Config latent;
  latent.kv_layout = {true, 64, true};
  EXPECT_EQ(with_page_size(latent, 16).kv_layout, (KvLayout{true, 16, true}));
  EXPECT_EQ(with_page_size(latent, 0).kv_layout, (KvLayout{false, 0, true}));
}

TEST(CliShape, PageTablesAreInt32BatchRows) {
  Scratch dir;
  const int32_t t[6] = {3, 1, 0, 2, -1, -1};
  const std::string good = (dir / "table.npy").string();
  write_npy(good, "<i4", {2, 3}, t, sizeof t);
  EXPECT_EQ(read_page_table(good, 2), (std::vector<int>{3, 1, 0, 2, -1, -1}));
  try {
    read_page_table(good, 3);
    ADD_FAILURE() << "a table of 2 rows taken for a batch of 3";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "[3, N]")) << e.what();
  }
  const std::string wide = (dir / "wide.npy").string();
  const int64_t w[2] = {1, 2};
  write_npy(wide, "<i8", {1, 2}, w, sizeof w);
  try {
    read_page_table(wide, 1);
    ADD_FAILURE() << "int64 page table accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "int32")) << e.what();
  }
}

// Rows over the batch are 32-bit in the kernels' parameters: larger totals are rejected by name
// instead of wrapping around.
TEST(CliShape, RowTotalsBeyond32BitsAreRejected) {
  Config c;
  ShapeOptions o;
  o.batch = 65536;
  o.seqlen_q = 65536;
  EXPECT_TRUE(contains(usage_error(o, c), "--batch x --seqlen-q = 4294967296 rows; at most 2147483647"))
      << usage_error(o, c);
  o.seqlen_q = 16;
  o.seqlen_k = 1 << 30;
  EXPECT_TRUE(contains(usage_error(o, c), "--batch x --seqlen-k")) << usage_error(o, c);
  o.seqlen_k = -1;
  o.batch = 1 << 20;
  o.seqlen_q = 1 << 10;
  o.heads = 1 << 12;
  EXPECT_TRUE(contains(usage_error(o, c), "x --heads")) << usage_error(o, c);
  c.varlen = true;
  o.heads = 16;
  o.seqlens_q = "2147483647,2147483647";
  EXPECT_TRUE(contains(usage_error(o, c), "the sum of --seqlens-q = 4294967294 rows")) << usage_error(o, c);
  o.seqlens_q = "99999999999";
  EXPECT_TRUE(contains(usage_error(o, c), "comma-separated integers")) << usage_error(o, c);
  o.seqlens_q = "1";
  o.softmax_scale = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(contains(usage_error(o, c), "--softmax-scale")) << usage_error(o, c);
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
