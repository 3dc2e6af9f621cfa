// Dynamic persistent scheduler: about one CTA per SM, each taking its next tile from a global
// atomic counter when it starts loading the current one, so CTAs that drew short tiles draw
// more (FlashAttention-3 does this for causal masks, where tile lengths differ). The tile order
// is decode_tile's. The producer warp draws (lane 0 does the atomic and shares the result, so
// the index stays warp-uniform) and passes each tile index to the consumer warpgroups through a
// two-slot ring in shared memory, guarded by full/empty mbarriers.
//
// The counter resets itself: a launch draws exactly total_tiles tickets (every CTA draws until
// its tile is past the end, and the last `gridDim.x` tickets are those final draws), so the
// thread that draws ticket total_tiles - 1 is the last to touch it and writes 0 back for the
// next launch on the stream.
#pragma once

#include "common/scheduler.cuh"
#include "sm90/pipeline.cuh"
#include "sm90/ptx.cuh"

namespace flashjit::sm90 {

// initial(), valid() and work() are the persistent scheduler's; only advancing differs.
template <bool kLongestFirst, class Layout>
struct DynamicScheduler : PersistentScheduler<kLongestFirst> {
  static constexpr bool kDynamic = true;
  using Feed = PipelineState<2>;

  Layout smem;
  Feed feed;  // position in the tile ring (the producer's and each consumer's own copy)

  // Producer warp: draw the tile after the current one. Issued before the current tile's loads
  // so the atomic's latency hides behind them.
  __device__ __forceinline__ int draw(const AttentionParams& p) const {
    int ticket = 0;
    if ((threadIdx.x & 31) == 0) {
      ticket = atomicAdd(p.tile_counter, 1);
      if (ticket == p.total_tiles - 1) atomicExch(p.tile_counter, 0);
    }
    return __shfl_sync(0xffffffffu, ticket, 0);
  }

  // Producer: hand the drawn tile (possibly past the end, which stops the consumers) over.
  __device__ __forceinline__ SchedulerState publish(int ticket) {
    const SchedulerState next{ticket + int(gridDim.x)};
    mbar_wait(smem.barrier(Layout::kTileEmpty + feed.index), feed.phase ^ 1);
    if ((threadIdx.x & 31) == 0) {
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(smem.tile_slot(feed.index)), "r"(next.tile) : "memory");
      mbar_arrive(smem.barrier(Layout::kTileFull + feed.index));
    }
    feed.advance();
    return next;
  }

  // Consumers: the next tile, as the producer published it.
  __device__ __forceinline__ SchedulerState advance(const AttentionParams&, SchedulerState) {
    mbar_wait(smem.barrier(Layout::kTileFull + feed.index), feed.phase);
    const int tile = int(warp_read_shared(smem.tile_slot(feed.index)));  // lane 0, which frees the slot
    if ((threadIdx.x & 31) == 0) mbar_arrive(smem.barrier(Layout::kTileEmpty + feed.index));
    feed.advance();
    return {tile};
  }
};

}  // namespace flashjit::sm90
