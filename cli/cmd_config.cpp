// flashjit config: validate, resolve, and the JSON Schema of configs.
#include "cli/commands.hpp"
#include "cli/config_input.hpp"
#include "cli/errors.hpp"
#include "cli/register.hpp"
#include "generator/resolve.hpp"
#include "runtime/driver.hpp"
#include "runtime/nvrtc_targets.hpp"

#include "cli/config_schema.inc"  // generated: kEmbeddedConfigSchema

#include <nlohmann/json.hpp>

#include <memory>

namespace flashjit::cli {

const std::string& config_schema_text() {
  static const std::string text = kEmbeddedConfigSchema;
  return text;
}

int cmd_config_schema(Context& ctx) {
  ctx.out << config_schema_text();
  return kOk;
}

namespace {

// Every broken rule of one config file: what does not parse, then the rules of what does.
std::vector<ConfigIssue> validate_one(const std::string& file, const std::string& arch, std::string& summary) {
  std::vector<ConfigIssue> issues;
  const nlohmann::json j = parse_config_json(read_config_text(file), file);
  std::vector<std::string> removed;
  Config c = parse_config_collecting(j, issues, removed);
  for (const auto& i : issues)
    if (i.path.empty()) return issues;  // not an object: nothing else to check
  if (!arch.empty()) c.arch = arch;
  auto keep = [&](const ConfigIssue& i) {
    for (const auto& r : removed)
      if (i.path == r || i.path.rfind(r + ".", 0) == 0) return false;
    return true;
  };
  if (c.arch == "native") {
    if (gpu_available()) {
      c.arch = native_arch();
    } else {
      // Without a GPU only the family-independent rules can be checked.
      Config p = c;
      p.arch = "sm_80";
      for (const auto& i : check_problem(p))
        if (keep(i)) issues.push_back(i);
      if (issues.empty()) summary = "arch \"native\": no GPU here, family rules not checked";
      return issues;
    }
  }
  const bool parsed = issues.empty();
  for (const auto& i : check_config(c))
    if (keep(i)) issues.push_back(i);
  for (const auto& i : nvrtc_target_issues(c.arch))
    if (keep(i)) issues.push_back(i);
  if (parsed && issues.empty()) {
    const Config r = resolve(c);
    summary = readable_name(r) + " (family " + to_string(*r.tuning.family) + ")";
  }
  return issues;
}

}  // namespace

int cmd_config_validate(const ConfigValidateOptions& o, Context& ctx) {
  size_t invalid = 0;
  for (const auto& file : o.configs) {
    std::string summary;
    std::vector<ConfigIssue> issues;
    try {
      issues = validate_one(file, o.arch, summary);
    } catch (const ConfigError& e) {
      issues = e.issues();
    }
    if (issues.empty()) {
      ctx.out << file << ": OK" << (summary.empty() ? "" : ", " + summary) << "\n";
      continue;
    }
    ++invalid;
    for (const auto& i : issues) {
      if (i.path.empty() && i.value == file) ctx.err << "error: " << file << ": " << i.rule << "\n";
      else ctx.err << "error: " << file << ": " << issue_line(i) << "\n";
    }
  }
  if (o.configs.size() > 1)
    ctx.out << (o.configs.size() - invalid) << " of " << o.configs.size() << " configs valid\n";
  return invalid ? kUsage : kOk;
}

int cmd_config_resolve(const ConfigResolveOptions& o, Context& ctx) {
  const Config c = with_arch(load_config_input(o.config), o.arch);
  const Config r = resolve(c);
  ctx.out << (o.compact ? canonical_json(r) : to_json(r).dump(2)) << "\n";
  if (ctx.verbosity != Verbosity::quiet)
    ctx.err << "family " << to_string(*r.tuning.family) << ": " << readable_name(r) << "\n";
  return kOk;
}

void register_config(CLI::App& parent, Context& ctx, Action& action) {
  CLI::App* config = parent.add_subcommand("config", "Validate and resolve configs; print their JSON Schema");
  config->require_subcommand(1);
  {
    auto o = std::make_shared<ConfigValidateOptions>();
    CLI::App* s = config->add_subcommand("validate", "Check configs, reporting every broken rule of each");
    s->add_option("configs", o->configs, "Config files")->required();
    add_single_arch_option(*s, o->arch);
    s->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_config_validate(*o, ctx); }; });
  }
  {
    auto o = std::make_shared<ConfigResolveOptions>();
    CLI::App* s = config->add_subcommand(
        "resolve", "Print the fully resolved config (every tuning field chosen) as JSON; the family on stderr");
    s->add_option("config", o->config, "Config file ('-' reads stdin)")->required();
    add_single_arch_option(*s, o->arch);
    s->add_flag("--compact", o->compact, "Print the canonical one-line form (what identifies the kernel)");
    s->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_config_resolve(*o, ctx); }; });
  }
  {
    CLI::App* s = config->add_subcommand("schema", "Print the JSON Schema (draft 2020-12) of configs");
    s->callback([&ctx, &action] { action = [&ctx] { return cmd_config_schema(ctx); }; });
  }
  config->footer(
      "Examples:\n  flashjit config validate examples/configs/*.json\n"
      "  flashjit config resolve examples/configs/default.json --arch sm_80");
}

}  // namespace flashjit::cli
