// The flashjit command line: parses arguments with CLI11 and runs the chosen command.
#pragma once

#include "cli/context.hpp"

#include <string>
#include <vector>

namespace flashjit::cli {

// `args` without the program name. Returns the exit code; never throws. Output that cannot be
// written to ctx.out (checked when the command is done) makes it a failure.
int run_cli(const std::vector<std::string>& args, Context& ctx);
int run_cli(int argc, const char* const* argv, Context& ctx);

}  // namespace flashjit::cli
