#include "cli/app.hpp"

#include "cache/log.hpp"
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "cli/register.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace flashjit::cli {

CLI::Option* add_arch_option(CLI::App& app, std::vector<std::string>& archs) {
  return app
      .add_option("-a,--arch", archs,
                  "Target(s), e.g. sm_80, sm_90a, sm_100a, or native; repeatable and comma-separated "
                  "(default: the config's arch)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->type_name("ARCH");
}

CLI::Option* add_single_arch_option(CLI::App& app, std::string& arch) {
  return app.add_option("-a,--arch", arch, "Target replacing the config's arch (sm_80, sm_90a, ..., or native)")
      ->type_name("ARCH");
}

namespace {

int run_command(const std::vector<std::string>& args, Context& ctx) {
  CLI::App app{
      "flashjit: FlashAttention kernels generated from a JSON config and compiled at run time.\n"
      "Generate and inspect sources, compile through the cache, precompile caches for shipping,\n"
      "run and benchmark kernels on the GPU.",
      "flashjit"};
  app.get_formatter()->column_width(36);
  app.set_help_all_flag("--help-all", "Print help for every command");
  app.set_version_flag("--version", [] { return version_text(); }, "Print the flashjit and NVRTC versions");
  bool verbose = false, quiet = false;
  CLI::Option* v = app.add_flag("-v,--verbose", verbose, "Log debug messages (cache hits, misses, compiles)");
  app.add_flag("-q,--quiet", quiet, "Log warnings and errors only")->excludes(v);
  app.require_subcommand(1);
  app.fallthrough();
  app.footer(
      "Environment: FLASHJIT_CACHE_DIR (writable cache), FLASHJIT_CACHE_PATH (read-only layers, ':'-separated),\n"
      "FLASHJIT_OFFLINE=1 (a cache miss is an error), FLASHJIT_CACHE_MAX_BYTES, FLASHJIT_LOG_LEVEL.\n"
      "Exit status: 0 success, 1 failure, 2 bad usage, config or input.\n"
      "Run 'flashjit COMMAND --help' for a command's options; docs/cli.md has examples.");

  Action action;
  register_generate(app, ctx, action);
  register_compile(app, ctx, action);
  register_precompile(app, ctx, action);
  register_run(app, ctx, action);
  register_bench(app, ctx, action);
  register_cache(app, ctx, action);
  register_config(app, ctx, action);

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them in reverse
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, ctx.out, ctx.err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, ctx.out, ctx.err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, ctx.out, ctx.err);
  } catch (const CLI::ParseError& e) {
    ctx.err << "error: " << e.what() << "\n"
            << "Run 'flashjit --help' or 'flashjit COMMAND --help' for usage.\n";
    return kUsage;
  }

  if (verbose) {
    ctx.verbosity = Verbosity::verbose;
    set_log_level(LogLevel::debug);
  } else if (quiet) {
    ctx.verbosity = Verbosity::quiet;
    set_log_level(LogLevel::warn);
  }
  if (!action) {
    ctx.err << "error: no command given\nRun 'flashjit --help' for usage.\n";
    return kUsage;
  }
  return guarded(ctx, action);
}

// A command whose results did not reach their destination (a full disk, a closed pipe) failed,
// whatever it computed.
int check_output(Context& ctx, int rc) {
  errno = 0;
  ctx.out.flush();
  if (!ctx.out.fail()) return rc;
  const int err = errno;
  ctx.err << "error: cannot write to " << ctx.out_name << (err ? std::string(": ") + std::strerror(err) : "")
          << "; the command's output is incomplete\n";
  return rc == kOk ? kFailure : rc;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, Context& ctx) {
  return check_output(ctx, run_command(args, ctx));
}

int run_cli(int argc, const char* const* argv, Context& ctx) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return run_cli(args, ctx);
}

}  // namespace flashjit::cli
