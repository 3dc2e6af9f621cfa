// Wiring of the commands into the CLI11 parser. Each register_* adds one subcommand to `parent`;
// when the user picks it, `action` is set to run the command with the parsed options.
#pragma once

#include "cli/context.hpp"

#include <CLI/CLI.hpp>

#include <functional>

namespace flashjit::cli {

using Action = std::function<int()>;

void register_generate(CLI::App& parent, Context& ctx, Action& action);
void register_compile(CLI::App& parent, Context& ctx, Action& action);
void register_precompile(CLI::App& parent, Context& ctx, Action& action);
void register_cache(CLI::App& parent, Context& ctx, Action& action);
void register_config(CLI::App& parent, Context& ctx, Action& action);
void register_run(CLI::App& parent, Context& ctx, Action& action);
void register_bench(CLI::App& parent, Context& ctx, Action& action);

// --arch, repeatable and comma-separated.
CLI::Option* add_arch_option(CLI::App& app, std::vector<std::string>& archs);
// --arch, once.
CLI::Option* add_single_arch_option(CLI::App& app, std::string& arch);

}  // namespace flashjit::cli

namespace flashjit::cli {
struct ShapeOptions;
// The shape flags `run` and `bench` share.
void add_shape_options(CLI::App& app, ShapeOptions& shape);
}  // namespace flashjit::cli
