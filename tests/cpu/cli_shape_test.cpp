// The problem shape `run` and `bench` build from their flags (checked without a GPU).
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cli/errors.hpp"
#include "cli/shape.hpp"
#include "cli_test_support.hpp"

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

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
