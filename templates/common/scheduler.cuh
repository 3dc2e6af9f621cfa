// Tile schedulers: which (m_block, head, batch) tile a CTA works on, and what it does next.
// The interface follows the seeds' MHATileScheduler: initial state, current work, advance.
//   TransientScheduler  one tile per CTA, grid (num_m_blocks, heads_q, batch).
//   PersistentScheduler grid of about one CTA per SM; each CTA strides over the linear tile
//                       order. With kLongestFirst each head's longest tiles come first
//                       (causal: the last query blocks have the most keys).
//   (sm90/dynamic_scheduler.cuh walks the same order, handing tiles out through an atomic.)
// In both, the m blocks of a head are adjacent, and so are the heads of one batch entry, so the
// CTAs in flight share K/V (and GQA heads their shared K/V) in L2.
// With clusters of kClusterM CTAs along M (sm90 pair_cta) a tile is kClusterM adjacent m blocks:
// the cluster takes it as a whole, CTA rank r its block kClusterM * m + r, so the CTAs of a
// cluster always visit the same (batch, head) and can share its K/V.
#pragma once

#include "common/cluster.cuh"
#include "common/params.cuh"
#include "common/types.cuh"

namespace flashjit {

struct WorkTile {
  int m_block;
  int head;
  int batch;
};

struct SchedulerState {
  int tile;  // linear tile index
};

// Linear tile order. Without longest-first, m blocks vary fastest, so the CTAs in flight share
// the K/V of a few heads in L2. With it (causal), (batch, head) pairs are taken in groups of
// p.lpt_group whose K/V fit in L2 together, and inside a group all heads' longest m blocks come
// first: longest-processing-time order without spreading over every head at once.
template <bool kLongestFirst>
__device__ __forceinline__ WorkTile decode_tile(const AttentionParams& p, int tile) {
  int bh, m;
  if constexpr (kLongestFirst) {
    const int pairs = p.heads_q * p.batch;
    const int group_tiles = p.lpt_group * p.num_m_blocks;
    const int group = tile / group_tiles;
    const int rest = tile - group * group_tiles;
    const int size = cmin(p.lpt_group, pairs - group * p.lpt_group);  // the last group may be short
    m = p.num_m_blocks - 1 - rest / size;
    bh = group * p.lpt_group + rest % size;
  } else {
    bh = tile / p.num_m_blocks;
    m = tile - bh * p.num_m_blocks;
  }
  WorkTile w;
  w.m_block = m;
  w.batch = bh / p.heads_q;
  w.head = bh - w.batch * p.heads_q;
  return w;
}

template <bool kLongestFirst, int kClusterM = 1>
struct TransientScheduler {
  static constexpr bool kPersistent = false;
  static constexpr bool kDynamic = false;
  __device__ __forceinline__ SchedulerState initial(const AttentionParams&) const {
    return {0};
  }
  __device__ __forceinline__ bool valid(const AttentionParams&, SchedulerState s) const {
    return s.tile == 0;
  }
  __device__ __forceinline__ WorkTile work(const AttentionParams& p, SchedulerState) const {
    WorkTile w;
    const int m = int(blockIdx.x) / kClusterM;
    w.m_block = (kLongestFirst ? p.num_m_blocks - 1 - m : m) * kClusterM + cluster_m_rank<kClusterM>();
    w.head = blockIdx.y;
    w.batch = blockIdx.z;
    return w;
  }
  __device__ __forceinline__ SchedulerState advance(const AttentionParams&, SchedulerState s) const {
    return {s.tile + 1};
  }
};

template <bool kLongestFirst, int kClusterM = 1>
struct PersistentScheduler {
  static constexpr bool kPersistent = true;
  static constexpr bool kDynamic = false;
  __device__ __forceinline__ SchedulerState initial(const AttentionParams&) const {
    return {int(blockIdx.x) / kClusterM};
  }
  __device__ __forceinline__ bool valid(const AttentionParams& p, SchedulerState s) const {
    return s.tile < p.total_tiles;
  }
  __device__ __forceinline__ WorkTile work(const AttentionParams& p, SchedulerState s) const {
    WorkTile w = decode_tile<kLongestFirst>(p, s.tile);
    w.m_block = w.m_block * kClusterM + cluster_m_rank<kClusterM>();
    return w;
  }
  __device__ __forceinline__ SchedulerState advance(const AttentionParams&, SchedulerState s) const {
    return {s.tile + int(gridDim.x) / kClusterM};
  }
};

}  // namespace flashjit
