// flashjit compile: build a config's kernel through the cache for one or more targets.
#include "cli/build.hpp"
#include "cli/commands.hpp"
#include "cli/config_input.hpp"
#include "cli/errors.hpp"
#include "cli/register.hpp"

#include <memory>

namespace flashjit::cli {

int cmd_compile(const CompileOptions& o, Context& ctx) {
  const Config base = load_config_input(o.config);
  std::vector<std::string> archs = o.archs;
  if (archs.empty()) archs.push_back(base.arch);

  nlohmann::json results = nlohmann::json::array();
  int rc = kOk;
  for (const auto& arch : archs) {
    try {
      const Config c = with_arch(base, arch);
      const KernelSource src = source_for(c, o.reference);
      const Artifact a = build_artifact(src, ctx.cache());
      if (o.json) {
        results.push_back(artifact_json(a));
      } else {
        ctx.out << a.name << " (" << src.arch << ")\n" << artifact_text(a, "  ");
      }
      // Compiled, but not into the cache: the command did not do what it is for.
      if (!a.store_error.empty()) {
        ctx.err << "error: " << arch << ": " << a.name << " compiled but not stored: " << a.store_error << "\n";
        rc = kFailure;
      }
    } catch (...) {
      const int code = report_exception(std::current_exception(), ctx, arch);
      if (o.json)
        results.push_back({{"arch", arch}, {"status", "failed"}, {"error", one_line(std::current_exception())}});
      // A config problem on one target and a compile failure on another: report the failure.
      rc = rc == kOk ? code : (rc == code ? rc : kFailure);
    }
  }
  if (o.json) ctx.out << results.dump(2) << "\n";
  return rc;
}

void register_compile(CLI::App& parent, Context& ctx, Action& action) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App* sub = parent.add_subcommand(
      "compile", "Compile a config's kernel through the cache and print its ptxas report");
  sub->add_option("config", o->config, "Config file (JSON; '-' reads stdin)")->required();
  add_arch_option(*sub, o->archs);
  sub->add_flag("--json", o->json, "Print a JSON array, one object per target");
  sub->add_flag("--reference", o->reference, "The fp32 reference kernel of the same problem");
  sub->footer("Example:\n  flashjit compile examples/configs/default.json --arch sm_90a --arch sm_80");
  sub->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_compile(*o, ctx); }; });
}

}  // namespace flashjit::cli
