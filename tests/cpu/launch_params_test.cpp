// Grid sizing and tile counts from the launch facts, without a GPU: a pair_cta kernel's tiles
// are two m blocks, and its grids are whole clusters.
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/family_host.hpp"

#include <gtest/gtest.h>

namespace flashjit {
namespace {

struct Launch {
  AttentionParams params;
  PassLaunch geometry;
};

Launch plan(bool pair, Scheduler scheduler, int seqlen_q, int heads, int batch, int resident_ctas,
           int head_dim = 128) {
  Config c;
  c.arch = "sm_90a";
  c.head_dim = {head_dim, head_dim, 0};
  c.mask = Mask::causal;
  c.tuning.pair_cta = pair;
  c.tuning.scheduler = scheduler;
  const Config r = resolve(c);
  const KernelSource src = generate(r);
  // Never dereferenced: planning only checks alignment and strides.
  const void* data = reinterpret_cast<const void*>(uintptr_t(1) << 20);
  AttentionArgs a;
  a.q = a.k = a.v = a.o = Tensor::bshd(data, seqlen_q, heads, head_dim);
  a.batch = batch;
  a.seqlen_q = a.seqlen_k = seqlen_q;
  a.heads_q = a.heads_k = heads;
  DeviceLimits device;
  device.resident_ctas = resident_ctas;
  const LaunchPlan plan = family_host(src.launch.family).plan(r, src.launch, a, device);
  EXPECT_EQ(plan.num_passes, 1);
  return Launch{plan.params, plan.passes[0]};
}

TEST(LaunchParams, PairCtaTilesAreTwoMBlocks) {
  // 1400 rows: 11 blocks of 128, so 6 pair tiles, the last one half empty.
  const Launch single = plan(false, Scheduler::transient, 1400, 3, 2, 132);
  EXPECT_EQ(single.params.num_m_blocks, 11);
  EXPECT_EQ(single.geometry.grid[0], 11u);
  const Launch pair = plan(true, Scheduler::transient, 1400, 3, 2, 132);
  EXPECT_EQ(pair.params.num_m_blocks, 6);
  EXPECT_EQ(pair.params.total_tiles, 6 * 3 * 2);
  EXPECT_EQ(pair.geometry.grid[0], 12u);  // one CTA per m block, rounded up to whole clusters
  EXPECT_EQ(pair.geometry.grid[1], 3u);
  EXPECT_EQ(pair.geometry.grid[2], 2u);
}

TEST(LaunchParams, PersistentPairGridIsWholeResidentClusters) {
  // 36 tiles fit in 66 resident clusters: one cluster per tile.
  EXPECT_EQ(plan(true, Scheduler::persistent, 1400, 3, 2, 132).geometry.grid[0], 72u);
  // 384 tiles: as many clusters as run at once (here the device fits 62 of them).
  EXPECT_EQ(plan(true, Scheduler::persistent, 1400, 16, 4, 124).geometry.grid[0], 124u);
  // Without clusters, one CTA per SM.
  EXPECT_EQ(plan(false, Scheduler::persistent, 1400, 16, 4, 132).geometry.grid[0], 132u);
}

// Causal tiles go longest first within groups of (batch, head) pairs whose K/V share L2 (head
// dims up to 128), else in one order over all pairs.
TEST(LaunchParams, LongestFirstGroupsHeadsWhoseKVFitTheL2Budget) {
  // d128, 8k keys: K and V are 8192 x 256 x 2 B = 4 MB per pair, 32 MB hold 8 of the 32 pairs.
  EXPECT_EQ(plan(false, Scheduler::dynamic, 8192, 16, 2, 132).params.lpt_group, 8);
  // 512 keys: 256 KB per pair, so every pair fits in one group.
  EXPECT_EQ(plan(false, Scheduler::dynamic, 512, 16, 2, 132).params.lpt_group, 32);
  // 64k keys: 32 MB per pair, one pair per group at least.
  EXPECT_EQ(plan(false, Scheduler::dynamic, 65536, 2, 1, 132).params.lpt_group, 1);
  // d256, 8k keys: 8 MB per pair, 4 of the 16 pairs per group with the dynamic scheduler; the
  // static persistent order keeps one order over all pairs.
  EXPECT_EQ(plan(false, Scheduler::dynamic, 8192, 8, 2, 132, 256).params.lpt_group, 4);
  EXPECT_EQ(plan(false, Scheduler::persistent, 8192, 8, 2, 132, 256).params.lpt_group, 16);
}

}  // namespace
}  // namespace flashjit
