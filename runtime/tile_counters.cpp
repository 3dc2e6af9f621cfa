#include "runtime/tile_counters.hpp"

#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"

#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace flashjit {

namespace {

constexpr int kSlotsPerChunk = 256;

struct Pool {
  std::mutex mutex;
  std::map<std::tuple<CUcontext, CUstream, std::thread::id>, int*> counters;
  std::map<CUcontext, std::pair<CUdeviceptr, int>> chunk;  // current chunk and its next free slot
};

Pool& pool() {
  static auto* p = new Pool();  // never destroyed: device memory lives as long as the process
  return *p;
}

}  // namespace

int* tile_counter_for(CUcontext context, CUstream stream) {
  const bool per_thread = stream == CU_STREAM_PER_THREAD;
  const auto key = std::make_tuple(context, stream, per_thread ? std::this_thread::get_id() : std::thread::id());
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (auto it = p.counters.find(key); it != p.counters.end()) return it->second;

  const DriverApi& d = driver();
  auto& [base, used] = p.chunk[context];
  if (!base || used == kSlotsPerChunk) {
    if (stream_capturing(stream))
      throw ArgumentError("flashjit launch: this kernel draws tiles from a device counter, this stream has "
                          "none yet, and a stream being captured cannot allocate one: launch once on this "
                          "stream before capturing, or pass args.tile_counter (a zeroed device int)");
    FLASHJIT_CU(d.cuMemAlloc(&base, kSlotsPerChunk * sizeof(int)));
    used = 0;
  }
  auto* counter = reinterpret_cast<int*>(base) + used++;
  FLASHJIT_CU(d.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(counter), 0, 1, stream));
  p.counters.emplace(key, counter);
  return counter;
}

}  // namespace flashjit
