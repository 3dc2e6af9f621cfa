// flashjit generate: the CUDA source of a config's kernel.
#include "cli/commands.hpp"
#include "cli/config_input.hpp"
#include "cli/errors.hpp"
#include "cli/output_file.hpp"
#include "cli/register.hpp"
#include "generator/generate.hpp"
#include "runtime/compiler.hpp"

#include <memory>

namespace flashjit::cli {

int cmd_generate(const GenerateOptions& o, Context& ctx) {
  const Config c = with_arch(load_config_input(o.config), o.arch);
  const KernelSource src = o.reference ? generate_reference(c) : generate(c);
  const std::string text = o.flat ? compilation_source(src) : src.unit;
  if (o.output.empty() || o.output == "-") {
    ctx.out << text;  // run_cli checks that it was written
    return kOk;
  }
  cache::Fd f;
  if (const std::string why = open_output_file(o.output, f); !why.empty())
    throw UsageError(o.output + ": cannot create the output file: " + why);
  if (const std::string why = write_and_close(f, text); !why.empty())
    throw std::runtime_error(o.output + ": cannot write the generated source: " + why);
  if (ctx.verbosity != Verbosity::quiet)
    ctx.err << "wrote " << src.name << " (" << src.arch << ", " << text.size() << " bytes) to " << o.output << "\n";
  return kOk;
}

void register_generate(CLI::App& parent, Context& ctx, Action& action) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub = parent.add_subcommand(
      "generate", "Print the generated CUDA source of a config's kernel");
  sub->add_option("config", o->config, "Config file (JSON; '-' reads stdin)")->required();
  add_single_arch_option(*sub, o->arch);
  sub->add_flag("--flat", o->flat,
                "Print the self-contained source (every template inlined): what NVRTC compiles and "
                "the cache key hashes; compiles standalone with nvcc");
  sub->add_flag("--reference", o->reference, "The fp32 reference kernel of the same problem");
  sub->add_option("-o,--output", o->output, "Write to FILE instead of stdout")->type_name("FILE");
  sub->footer("Example:\n  flashjit generate examples/configs/default.json --flat -o attn.cu");
  sub->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_generate(*o, ctx); }; });
}

}  // namespace flashjit::cli
