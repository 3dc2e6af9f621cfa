#include "bench/watchdog.hpp"

#include <cstdio>
#include <cstdlib>

namespace flashjit::bench {

Watchdog::Watchdog(const std::string& program, double seconds, int exit_code)
    : program_(program), limit_(seconds), exit_code_(exit_code) {
  if (seconds > 0) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::arm(const std::string& step) {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = true;
  step_ = step;
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(limit_);
  cv_.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline_) {
      std::fprintf(stderr,
                   "\n%s: \"%s\" has run for more than %.0f s (a kernel that never finishes?); "
                   "ending the process. The JSON report holds everything measured before it.\n",
                   program_.c_str(), step_.c_str(), limit_.count());
      std::fflush(stderr);
      std::_Exit(exit_code_);
    }
    cv_.wait_until(lock, deadline_);
  }
}

}  // namespace flashjit::bench
