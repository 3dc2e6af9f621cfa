// Errors the commands raise, and the one place that turns any exception into readable lines on
// stderr and an exit code. No exception type name is ever printed.
#pragma once

#include "cli/context.hpp"
#include "generator/config.hpp"

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit::cli {

// A bad command line or input file the parser could not catch (exit 2). One line per problem.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what), lines_{what} {}
  explicit UsageError(std::vector<std::string> lines);
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::vector<std::string> lines_;
};

// Prints `e` as "error: ..." lines on ctx.err (a ConfigError one line per issue, each prefixed
// with `origin` when given) and returns the exit code it maps to.
int report_exception(std::exception_ptr e, Context& ctx, const std::string& origin = "");

// Runs body(), mapping any exception through report_exception.
template <class F>
int guarded(Context& ctx, F&& body) {
  try {
    return body();
  } catch (...) {
    return report_exception(std::current_exception(), ctx);
  }
}

// One ConfigIssue as a line: "head_dim.qk = 100: must be ..." (a file-level problem, whose path
// is empty, reads "file.json: not valid JSON ...").
std::string issue_line(const ConfigIssue& issue);

// The issues of a ConfigError joined with "; " (for one-line failure reasons).
std::string one_line(const std::exception& e);
std::string one_line(std::exception_ptr e);

}  // namespace flashjit::cli
