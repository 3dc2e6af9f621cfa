// Device scratch for operations that need it (split-K partial outputs), kept per (context,
// stream) like the tile counters, so launches that may run concurrently never share one and a
// launch never allocates once its stream has a large enough buffer. A buffer that is outgrown
// is kept, not freed: kernels queued earlier on the stream may still use it.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace flashjit {

// At least `bytes` (16-byte aligned) for `stream` in `context`. Growing allocates, which a
// stream being captured into a CUDA graph cannot do: then ArgumentError says how much to pass
// as AttentionArgs::workspace, or to launch once before capturing.
void* workspace_for(CUcontext context, CUstream stream, size_t bytes);

}  // namespace flashjit
