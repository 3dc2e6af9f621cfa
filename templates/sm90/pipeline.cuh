// The K/V producer-consumer ring (the seeds' TMAProducerPipeline, on raw mbarriers): each stage
// has a "full" barrier the producer arms with the expected bytes and TMA completes, and an
// "empty" barrier the consumer warps arrive on once their wgmmas have read the stage.
#pragma once

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
template <class Layout, int kStages>
struct StageBarriers {
  const Layout& smem;
  int full0;
  int empty0;

  __device__ __forceinline__ u32 full(int i) const { return smem.barrier(full0 + i); }
  __device__ __forceinline__ u32 empty(int i) const { return smem.barrier(empty0 + i); }

  // Producer warp: wait until consumers released the slot; the leader lane then arms it for
  // `bytes` of TMA data.
  __device__ __forceinline__ void producer_acquire(PipelineState<kStages> s, u32 bytes, bool leader) const {
    mbar_wait(empty(s.index), s.phase ^ 1);
    if (leader) mbar_arrive_expect_tx(full(s.index), bytes);
  }
  // Consumer: wait for the slot's data.
  __device__ __forceinline__ void consumer_wait(PipelineState<kStages> s) const {
    mbar_wait(full(s.index), s.phase);
  }
  // Consumer: one arrival per warp once its wgmmas reading the slot have completed.
  __device__ __forceinline__ void consumer_release(PipelineState<kStages> s) const {
    if ((threadIdx.x & 31) == 0) mbar_arrive(empty(s.index));
  }
};

}  // namespace flashjit::sm90
