// Tile counters for kernels with the dynamic scheduler: one zeroed device int per (context,
// stream), so launches that may run concurrently never share one. A launch leaves its counter
// at zero, and launches on one stream run in order, so a stream's counter is reused as is.
#pragma once

#include <cuda.h>

namespace flashjit {

// The counter for `stream` in `context`; the first call for a stream allocates it and zeroes it
// with an asynchronous memset on that stream. The per-thread default stream gets one counter
// per calling thread. Counters are keyed by handle: a stream destroyed with kernels still
// pending and a new stream that gets the same handle share one until those kernels finish
// (pass AttentionArgs::tile_counter where that can happen). A stream being captured into a CUDA
// graph cannot allocate: when its new counter would need device memory, the launch is refused by
// name (a counter's zeroing memset is captured, so replays start from zero).
int* tile_counter_for(CUcontext context, CUstream stream);

}  // namespace flashjit
