// The flashjit command. Everything but the process boundary lives in flashjit_cli_lib.
#include "cli/app.hpp"

#include <unistd.h>

#include <iostream>

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(true);
  flashjit::cli::Context ctx{std::cout, std::cerr};
  ctx.err_is_tty = ::isatty(STDERR_FILENO) == 1;
  const int rc = flashjit::cli::run_cli(argc, argv, ctx);
  std::cout.flush();
  return rc;
}
