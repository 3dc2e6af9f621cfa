#include "runtime/workspaces.hpp"

#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"

#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace flashjit {

namespace {

struct Buffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
};

struct Pool {
  std::mutex mutex;
  std::map<std::tuple<CUcontext, CUstream, std::thread::id>, Buffer> current;
  std::vector<CUdeviceptr> outgrown;  // may still be read by queued kernels; kept for the process
};

Pool& pool() {
  static auto* p = new Pool();  // never destroyed: device memory lives as long as the process
  return *p;
}

}  // namespace

void* workspace_for(CUcontext context, CUstream stream, size_t bytes) {
  const bool per_thread = stream == CU_STREAM_PER_THREAD;
  const auto key = std::make_tuple(context, stream, per_thread ? std::this_thread::get_id() : std::thread::id());
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  Buffer& b = p.current[key];
  if (b.bytes >= bytes) return reinterpret_cast<void*>(b.ptr);
  if (stream_capturing(stream))
    throw ArgumentError("flashjit launch: this launch needs " + std::to_string(bytes) +
                        " bytes of workspace, more than this stream has, and a stream being captured "
                        "cannot allocate: launch once before capturing, or pass args.workspace "
                        "(Kernel::workspace_bytes(args) bytes)");
  size_t grown = 1 << 20;
  while (grown < bytes) grown *= 2;  // doubling bounds the outgrown buffers to the final size
  CUdeviceptr ptr = 0;
  FLASHJIT_CU(driver().cuMemAlloc(&ptr, grown));
  if (b.ptr) p.outgrown.push_back(b.ptr);
  b = {ptr, grown};
  return reinterpret_cast<void*>(ptr);
}

}  // namespace flashjit
