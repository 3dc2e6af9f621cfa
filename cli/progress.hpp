// Progress of a batch of builds on stderr: a redrawn bar (counts, rate, ETA) when stderr is a
// terminal, one plain line per finished item otherwise. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <ostream>
#include <string>

namespace flashjit::cli {

enum class ItemStatus { compiled, hit, failed, skipped };

class Progress {
 public:
  // quiet: non-terminal mode prints failures only.
  Progress(std::ostream& err, std::size_t total, bool tty, bool quiet);
  ~Progress();

  // One item finished; `label` names it ("fwd_sm90a_... (sm_90a)"), `detail` says how
  // ("812 ms", or the failure reason).
  void finished(ItemStatus status, const std::string& label, const std::string& detail);
  // A line printed above the bar (log messages).
  void println(const std::string& line);
  // Clears the bar for good.
  void finish();

  std::size_t done() const;
  static std::string bar_text(std::size_t done, std::size_t total, std::size_t compiled, std::size_t hits,
                              std::size_t failed, double elapsed_s, const std::string& last, int width);

 private:
  void draw_locked();
  void clear_locked();

  std::ostream& err_;
  std::size_t total_;
  bool tty_;
  bool quiet_;
  bool finished_ = false;
  std::size_t done_ = 0, compiled_ = 0, hits_ = 0, failed_ = 0;
  std::string last_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
};

// Terminal width of stderr (80 when unknown).
int terminal_width();

}  // namespace flashjit::cli
