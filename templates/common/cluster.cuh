// Thread-block clusters along M (sm90 pair_cta): which CTA of its cluster this one is.
#pragma once

namespace flashjit {

// This CTA's rank in its cluster of kClusterM CTAs (0 without clusters, where no cluster
// register is read, so the sm80 family compiles it too).
template <int kClusterM>
__device__ __forceinline__ int cluster_m_rank() {
  if constexpr (kClusterM == 1) {
    return 0;
  } else {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return int(r);
  }
}

}  // namespace flashjit
