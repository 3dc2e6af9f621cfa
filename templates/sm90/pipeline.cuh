// The K/V producer-consumer ring (the seeds' TMAProducerPipeline, on raw mbarriers): each stage
// has a "full" barrier the producer arms with the expected bytes and TMA completes, and an
// "empty" barrier the consumer warps arrive on once their wgmmas have read the stage.
// With pair_cta (kPair) the two CTAs of a cluster share every stage: one CTA's producer
// multicasts K into both, the other's V, so a consumer warp frees a stage in both CTAs and each
// empty barrier counts the consumers of both.
#pragma once

#include "common/cluster.cuh"
#include "sm90/ptx.cuh"

namespace flashjit::sm90 {

// Position in a ring of kStages slots: which slot, and the parity of its current fill.
template <int kStages>
struct PipelineState {
  int index = 0;
  u32 phase = 0;
  __device__ __forceinline__ void advance() {
    if (++index == kStages) {
      index = 0;
      phase ^= 1;
    }
  }
};

// One mbarrier pair per slot, starting at barrier indices full0 and empty0 of a SmemLayout.
// kLaneArrivals: a ring whose stages also carry values written and read by ordinary loads and
// stores (per-token K scales): every lane of the producer warp and of each consumer warp arrives,
// each releasing its own accesses, so no ordering rests on a __syncwarp. kFullArrivals and
// kEmptyArrivalsPerWarp are the counts the barriers are initialised with.
template <class Layout, int kStages, bool kPair = false, bool kLaneArrivals = false>
struct StageBarriers {
  static constexpr unsigned kFullArrivals = kLaneArrivals ? 32 : 1;
  static constexpr unsigned kEmptyArrivalsPerWarp = kLaneArrivals ? 32 : 1;
  const Layout& smem;
  int full0;
  int empty0;

  __device__ __forceinline__ u32 full(int i) const { return smem.barrier(full0 + i); }
  __device__ __forceinline__ u32 empty(int i) const { return smem.barrier(empty0 + i); }

  // Producer warp: wait until consumers released the slot, then arm it (producer_arm).
  __device__ __forceinline__ void producer_acquire(PipelineState<kStages> s, u32 bytes, bool leader) const {
    mbar_wait(empty(s.index), s.phase ^ 1);
    producer_arm(s, bytes, leader);
  }
  // The leader lane arms the slot for `bytes` of TMA data; with kLaneArrivals the other lanes
  // arrive beside it, each releasing its own stores to the slot.
  __device__ __forceinline__ void producer_arm(PipelineState<kStages> s, u32 bytes, bool leader) const {
    if (leader)
      mbar_arrive_expect_tx(full(s.index), bytes);
    else if constexpr (kLaneArrivals)
      mbar_arrive(full(s.index));
  }
  // Consumer: wait for the slot's data.
  __device__ __forceinline__ void consumer_wait(PipelineState<kStages> s) const {
    mbar_wait(full(s.index), s.phase);
  }
  // Consumer: one arrival per warp (per lane with kLaneArrivals) once its wgmmas reading the
  // slot have completed.
  __device__ __forceinline__ void consumer_release(PipelineState<kStages> s) const {
    if (kLaneArrivals || (threadIdx.x & 31) == 0) {
      mbar_arrive(empty(s.index));
      if constexpr (kPair) mbar_arrive_cluster(empty(s.index), cluster_m_rank<2>() ^ 1);
    }
  }
  // Producer, after its last tile (kPair): until the consumers of both CTAs have freed every
  // stage, so no arrival from the other CTA can reach this one after it exits.
  __device__ __forceinline__ void producer_tail(PipelineState<kStages> s) const {
#pragma unroll 1
    for (int i = 0; i < kStages; ++i) {
      mbar_wait(empty(s.index), s.phase ^ 1);
      s.advance();
    }
  }
};

}  // namespace flashjit::sm90
