#include "cli/progress.hpp"

#include "cli/format.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace flashjit::cli {

int terminal_width() {
  struct winsize w {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
  return 80;
}

Progress::Progress(std::ostream& err, std::size_t total, bool tty, bool quiet)
    : err_(err), total_(total), tty_(tty), quiet_(quiet), start_(std::chrono::steady_clock::now()) {
  std::lock_guard<std::mutex> g(mutex_);
  if (tty_) draw_locked();
}

Progress::~Progress() { finish(); }

std::size_t Progress::done() const {
  std::lock_guard<std::mutex> g(mutex_);
  return done_;
}

std::string Progress::bar_text(std::size_t done, std::size_t total, std::size_t compiled, std::size_t hits,
                               std::size_t failed, double elapsed_s, const std::string& last, int width) {
  const int bar_width = 24;
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * bar_width + 0.5);
  std::string s(1, '[');
  s.append(filled, '#');
  s.append(bar_width - filled, '.');
  s += "] ";
  s += std::to_string(done);
  s += '/';
  s += std::to_string(total);
  s += "  " + std::to_string(compiled) + " compiled, " + std::to_string(hits) + " hits";
  if (failed) s += ", " + std::to_string(failed) + " failed";
  if (done > 0 && elapsed_s > 0) {
    const double rate = static_cast<double>(done) / elapsed_s;
    s += "  " + format_fixed(rate, rate < 10 ? 2 : 1) + "/s";
    if (done < total) s += "  ETA " + format_duration_s(static_cast<double>(total - done) / rate);
  }
  s += "  " + format_duration_s(elapsed_s);
  if (!last.empty()) s += "  " + last;
  if (width > 1 && static_cast<int>(s.size()) > width - 1) s.resize(width - 1);
  return s;
}

void Progress::clear_locked() {
  if (tty_) err_ << "\r\033[K";
}

void Progress::draw_locked() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  err_ << "\r\033[K" << bar_text(done_, total_, compiled_, hits_, failed_, elapsed, last_, terminal_width())
       << std::flush;
}

void Progress::finished(ItemStatus status, const std::string& label, const std::string& detail) {
  std::lock_guard<std::mutex> g(mutex_);
  ++done_;
  switch (status) {
    case ItemStatus::compiled: ++compiled_; break;
    case ItemStatus::hit: ++hits_; break;
    case ItemStatus::failed: ++failed_; break;
    case ItemStatus::skipped: break;
  }
  const char* word = status == ItemStatus::compiled ? "compiled"
                     : status == ItemStatus::hit    ? "cache hit"
                     : status == ItemStatus::failed ? "FAILED"
                                                    : "skipped";
  std::string counter(1, '[');
  counter += std::to_string(done_);
  counter += '/';
  counter += std::to_string(total_);
  counter += "] ";
  if (tty_) {
    last_ = label;
    if (status == ItemStatus::failed) {
      clear_locked();
      err_ << counter << word << " " << label << ": " << detail << "\n";
    }
    draw_locked();
    return;
  }
  if (quiet_ && status != ItemStatus::failed) return;
  err_ << counter << word << " " << label << (detail.empty() ? "" : (status == ItemStatus::failed ? ": " : " ") + detail)
       << "\n";
  err_.flush();
}

void Progress::println(const std::string& line) {
  std::lock_guard<std::mutex> g(mutex_);
  clear_locked();
  err_ << line << "\n";
  if (tty_ && !finished_) draw_locked();
  else err_.flush();
}

void Progress::finish() {
  std::lock_guard<std::mutex> g(mutex_);
  if (finished_) return;
  finished_ = true;
  if (tty_) {
    draw_locked();
    err_ << "\n" << std::flush;
  }
}

}  // namespace flashjit::cli
