// Ends the process when one step runs too long (a kernel that never finishes would otherwise
// hold the GPU until an outer timeout kills everything, reports included). The benchmarks
// rewrite their JSON after every step, so what was measured before the hang survives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace flashjit::bench {

class Watchdog {
 public:
  // exit_code: the status the process ends with on a timeout. 0 seconds disables the watchdog.
  Watchdog(const std::string& program, double seconds, int exit_code);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm(const std::string& step);  // starts the clock for `step`
  void disarm();

 private:
  void run();
  std::string program_;
  std::chrono::duration<double> limit_;
  int exit_code_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  std::string step_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

}  // namespace flashjit::bench
