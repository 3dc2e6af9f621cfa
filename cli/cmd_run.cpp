// flashjit run: launch a config's kernel on random (or .npy) inputs, optionally check it against
// the reference kernel, and time it.
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "cli/format.hpp"
#include "cli/gpu_kernel.hpp"
#include "cli/register.hpp"
#include "cli/shape.hpp"
#include "cli/tensor_io.hpp"
#include "runtime/driver.hpp"
#include "runtime/harness.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <tuple>

namespace flashjit::cli {

int cmd_run(const RunOptions& o, Context& ctx) {
  if (o.iters < 1) throw UsageError("--iters " + std::to_string(o.iters) + ": must be at least 1");
  if (o.warmup < 0) throw UsageError("--warmup " + std::to_string(o.warmup) + ": must not be negative");
  for (auto [scales, file, flag] : {std::tuple{&o.load_q_scale, &o.load_q, "--load-q"},
                                    std::tuple{&o.load_k_scale, &o.load_k, "--load-k"},
                                    std::tuple{&o.load_v_scale, &o.load_v, "--load-v"}})
    if (!scales->empty() && file->empty())
      throw UsageError(std::string(flag) + "-scale " + *scales + ": goes with " + flag + " FILE (the values it scales)");
  GpuKernel g = prepare_gpu_kernel(o.config, o.arch, o.shape);
  const Config& c = g.config;
  const ProblemShape& shape = g.shape;
  if (!o.save_lse.empty() && !c.lse)
    throw UsageError("--save-lse needs a config with \"outputs\": {\"lse\": true}");

  DeviceProblem problem(c, shape, o.seed);
  struct Load { const std::string& file; const std::string& scales; TensorRole role; };
  std::vector<std::string> notes;  // the scales flashjit chose for float32 inputs it quantised
  for (const Load& l : {Load{o.load_q, o.load_q_scale, TensorRole::q}, Load{o.load_k, o.load_k_scale, TensorRole::k},
                        Load{o.load_v, o.load_v_scale, TensorRole::v}}) {
    if (l.file.empty()) continue;
    const std::string note = load_input(l.file, l.scales, l.role, c, problem);
    if (!note.empty()) notes.push_back(note);
  }

  nlohmann::json j;
  if (!notes.empty()) j["quantised"] = notes;
  if (!o.json) {
    for (const std::string& n : notes) ctx.out << "input    " << n << "\n";
    ctx.out << "kernel   " << kernel_status(*g.kernel) << "\n";
    ctx.out << "device   " << device_text(*g.device) << "\n";
    ctx.out << "shape    " << problem.shape().describe() << "\n";
  }
  j["kernel"] = g.kernel->name();
  j["compiled"] = g.kernel->artifact().compiled;
  j["device"] = g.device->name;
  j["arch"] = c.arch;
  j["shape"] = shape_json(problem.shape());

  bool passed = true;
  if (o.check) {
    const CheckResult r = check_against_reference(*g.kernel, c, problem);
    passed = r.passed;
    if (!o.json) ctx.out << "check    " << r.summary() << "\n";
    j["check"] = {{"passed", r.passed},          {"rel_error", r.rel_error},
                  {"max_abs_error", r.max_abs_error}, {"lse_max_error", r.lse_max_error},
                  {"nonfinite", r.nonfinite},    {"tolerance", r.tolerance}};
  }

  const Timing t = time_kernel(*g.kernel, {&problem}, o.warmup, o.iters);
  const double flops = attention_flops(c, problem.shape());
  const double tflops = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) / 1e12 : 0;
  const double gbps = t.median_ms > 0 ? attention_bytes(c, problem.shape()) / (t.median_ms * 1e-3) / 1e9 : 0;
  if (!o.json) {
    ctx.out << "time     " << format_fixed(t.median_ms, 4) << " ms median (min " << format_fixed(t.min_ms, 4) << " ms, "
            << o.iters << (o.iters == 1 ? " launch)" : " launches)") << "\n";
    ctx.out << "TFLOP/s  " << format_fixed(tflops, 1) << "\n";
    ctx.out << "GB/s     " << format_fixed(gbps, 1) << "\n";
  }
  j["median_ms"] = t.median_ms;
  j["min_ms"] = t.min_ms;
  j["iters"] = o.iters;
  j["tflops"] = tflops;
  j["gbps"] = gbps;

  if (!o.save_o.empty()) {
    save_output(o.save_o, TensorRole::o, c, problem);
    if (!o.json) ctx.out << "saved    O to " << o.save_o << "\n";
    j["saved_o"] = o.save_o;
  }
  if (!o.save_lse.empty()) {
    save_output(o.save_lse, TensorRole::lse, c, problem);
    if (!o.json) ctx.out << "saved    LSE to " << o.save_lse << "\n";
    j["saved_lse"] = o.save_lse;
  }
  if (o.json) ctx.out << j.dump(2) << "\n";
  return passed ? kOk : kFailure;
}

void register_run(CLI::App& parent, Context& ctx, Action& action) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = parent.add_subcommand(
      "run", "Run a config's kernel on the GPU (random or .npy inputs); --check compares with the reference");
  sub->add_option("config", o->config, "Config file ('-' reads stdin)")->required();
  add_single_arch_option(*sub, o->arch)->description("Target to build for (default: the config's; 'native' = this GPU)");
  add_shape_options(*sub, o->shape);
  sub->add_flag("--check", o->check, "Compare with the fp32 reference kernel; print the error and PASS/FAIL (exit 1 on FAIL)");
  sub->add_option("--warmup", o->warmup, "Launches before timing")->capture_default_str();
  sub->add_option("--iters", o->iters, "Timed launches (the median is printed)")->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  const char* io = "Inputs and outputs (.npy)";
  sub->add_option("--load-q", o->load_q, "Q from a .npy file (float32 '<f4', quantised when the config scales Q; or dtype.q (else dtype.qkv): fp16 '<f2', bf16 or fp8 bits '<u2'/'|u1')")
      ->type_name("FILE")->group(io);
  sub->add_option("--load-k", o->load_k, "K from a .npy file")->type_name("FILE")->group(io);
  sub->add_option("--load-v", o->load_v, "V from a .npy file")->type_name("FILE")->group(io);
  auto scale_help = [](const char* name) {
    return std::string("Scales of the loaded ") + name +
           " (float32 .npy: [1], [heads], or per token [batch, heads, seqlen]; K's and V's per token with "
           "scales.token_layout \"cache\" like the cache's rows), for values already in dtype.qkv; float32 values "
           "are quantised by flashjit";
  };
  sub->add_option("--load-q-scale", o->load_q_scale, scale_help("Q"))->type_name("FILE")->group(io);
  sub->add_option("--load-k-scale", o->load_k_scale, scale_help("K"))->type_name("FILE")->group(io);
  sub->add_option("--load-v-scale", o->load_v_scale, scale_help("V"))->type_name("FILE")->group(io);
  sub->add_option("--save-o", o->save_o, "Write O to a .npy file (fp16 '<f2', bf16 bits '<u2')")
      ->type_name("FILE")->group(io);
  sub->add_option("--save-lse", o->save_lse, "Write the LSE ('<f4') to a .npy file (configs with outputs.lse)")
      ->type_name("FILE")->group(io);
  sub->add_flag("--json", o->json, "Print the results as JSON");
  sub->footer("Example:\n  flashjit run examples/configs/default.json --arch native --batch 4 --seqlen-q 2048 --check");
  sub->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_run(*o, ctx); }; });
}

}  // namespace flashjit::cli
