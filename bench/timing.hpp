// GPU timing of a kernel with CUDA events, one event pair around each launch.
//
// Before each launch a memset of a scratch buffer (default 256 MB) flushes L2 and keeps the GPU
// busy while the host enqueues the launch, so the interval between the events is the kernel's
// own run time: neither the host-side launch cost nor L2-resident inputs leak into it. The
// inputs also rotate over several sets (bench/inputs.hpp). torch is timed the same way in
// bench/peer_compare.py, so the comparison is like for like.
//
// Two modes, for every library alike (bench/peer_compare.py times torch the same way):
//  - idle: each measurement starts from an idle GPU: a pause before the warm-up lets the board's
//    power average fall back, so a point is not timed at the clocks its predecessors' power draw
//    left (on the H200 a second of back-to-back points reaches the 700 W cap and the SM clock
//    drops from 1980 to ~1300 MHz), and the L2 flush runs before each launch;
//  - sustained: `sustain_s` seconds of the kernel's own back-to-back launches first, then the
//    timed launches back to back, no flush and no pause: the board sits at its power cap, as in
//    serving. Inputs still rotate over the sets.
// The window's end is sampled through NVML: SM clock, power, clock-limit reasons, and the energy
// the timed launches took.
#pragma once

#include "bench/gpu_telemetry.hpp"
#include "runtime/flashjit.hpp"

#include <cuda.h>

#include <cstddef>
#include <vector>

namespace flashjit::bench {

struct TimingOptions {
  int warmup = 10;
  int iters = 30;
  size_t flush_bytes = size_t(256) << 20;  // 0: no flush, launches run back to back
  int cooldown_ms = 500;                     // idle pause before each measurement
  bool sustained = false;                    // the sustained mode (no flush, no pause)
  double sustain_s = 1.5;                    // sustained: seconds of launches before timing
};

struct TimingResult {
  double median_ms = 0;
  double min_ms = 0;
  double mean_ms = 0;
  std::vector<double> samples_ms;
  TelemetrySample telemetry;  // at the end of the timed launches (energy over them)
};

class Timer {
 public:
  explicit Timer(const TimingOptions& options);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Launches rotate through `sets`, on the legacy default stream: the harness's uploads and
  // memsets (synchronous calls, on that stream too) are then ordered before every launch.
  TimingResult time(const Kernel& kernel, const std::vector<AttentionArgs>& sets);
  CUstream stream() const { return stream_; }
  const TimingOptions& options() const { return options_; }

 private:
  void flush(int i);
  TimingOptions options_;
  GpuTelemetry telemetry_;
  CUstream stream_ = nullptr;  // the legacy default stream
  CUdeviceptr scratch_ = 0;
};

}  // namespace flashjit::bench
