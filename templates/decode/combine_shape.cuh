// The combine pass's geometry, shared by the generator (block size), the host (grid) and the
// kernel (combine.cuh). Plain C++.
//   One CTA per (query row, query head). Its threads split the row's dv / 8 eight-column chunks
//   and, in slices, the splits: thread i takes chunk i % chunks of every slices-th split from
//   slice i / chunks, so a row with many splits has many loads in flight instead of one chain.
#pragma once

#include "common/host_device.cuh"

namespace flashjit::decode {

inline constexpr int kCombineThreads = 128;

FLASHJIT_HOST_DEVICE constexpr int combine_chunks(int head_dim_v) { return head_dim_v / 8; }
FLASHJIT_HOST_DEVICE constexpr int combine_slices(int head_dim_v) { return kCombineThreads / combine_chunks(head_dim_v); }

}  // namespace flashjit::decode
