// Logging for the JIT path: compiles, cache misses, recovered faults. Lines go to stderr by
// default (level from FLASHJIT_LOG_LEVEL: error, warn, info, debug, off; default info), or to a
// callback an application installs to route them into its own logger.
#pragma once

#include <functional>
#include <string>

namespace flashjit {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

using LogSink = std::function<void(LogLevel, const std::string&)>;

void set_log_sink(LogSink sink);  // nullptr restores stderr
void set_log_level(LogLevel level);
LogLevel log_level();
void log(LogLevel level, const std::string& message);

}  // namespace flashjit
