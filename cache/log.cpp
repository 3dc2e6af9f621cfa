#include "cache/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace flashjit {

namespace {

LogLevel level_from_env() {
  const char* e = std::getenv("FLASHJIT_LOG_LEVEL");
  if (!e) return LogLevel::info;
  if (!std::strcmp(e, "debug")) return LogLevel::debug;
  if (!std::strcmp(e, "warn")) return LogLevel::warn;
  if (!std::strcmp(e, "error")) return LogLevel::error;
  if (!std::strcmp(e, "off")) return LogLevel::off;
  return LogLevel::info;
}

std::atomic<int>& level() {
  static std::atomic<int> l{static_cast<int>(level_from_env())};
  return l;
}

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}

LogSink& sink() {
  static LogSink s;
  return s;
}

const char* tag(LogLevel l) {
  switch (l) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warning";
    case LogLevel::error: return "error";
    default: return "";
  }
}

}  // namespace

void set_log_sink(LogSink s) {
  std::lock_guard<std::mutex> g(sink_mutex());
  sink() = std::move(s);
}

void set_log_level(LogLevel l) { level() = static_cast<int>(l); }
LogLevel log_level() { return static_cast<LogLevel>(level().load()); }

void log(LogLevel l, const std::string& message) {
  if (static_cast<int>(l) < level().load() || l == LogLevel::off) return;
  std::lock_guard<std::mutex> g(sink_mutex());
  if (sink()) {
    sink()(l, message);
    return;
  }
  std::fprintf(stderr, "[flashjit] %s: %s\n", tag(l), message.c_str());
}

}  // namespace flashjit
