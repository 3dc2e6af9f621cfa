// What every command runs with: where its output goes, which cache it uses, how chatty it is.
// Commands take a Context instead of touching std::cout / default_store() directly, so the test
// suite can run them in-process with captured streams and a private cache.
#pragma once

#include "cache/store.hpp"

#include <ostream>
#include <string>

namespace flashjit::cli {

// Exit codes of the flashjit command.
enum Exit : int {
  kOk = 0,
  kFailure = 1,  // something ran and failed (compile error, check FAIL, no GPU, ...)
  kUsage = 2,    // bad command line, config, manifest or input file
};

enum class Verbosity { quiet, normal, verbose };

struct Context {
  std::ostream& out;  // results
  std::ostream& err;  // diagnostics, progress
  std::string out_name = "standard output";  // `out` in messages: run_cli fails when it cannot be written
  cache::DiskStore* store = nullptr;  // nullptr: the process-wide default_store()
  bool err_is_tty = false;            // draw a progress bar on err
  Verbosity verbosity = Verbosity::normal;

  cache::DiskStore& cache() const;
};

}  // namespace flashjit::cli
