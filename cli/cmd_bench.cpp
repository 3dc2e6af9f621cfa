// flashjit bench: time a config's kernel on one problem shape.
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "cli/format.hpp"
#include "cli/gpu_kernel.hpp"
#include "cli/register.hpp"
#include "cli/shape.hpp"
#include "runtime/harness.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace flashjit::cli {

namespace {

constexpr int kMinIters = 20;
constexpr double kRotateBytes = 256.0 * 1024 * 1024;  // working set that defeats L2 reuse
constexpr int kMaxBuffers = 8;

}  // namespace

int cmd_bench(const BenchOptions& o, Context& ctx) {
  if (o.iters < kMinIters)
    throw UsageError("--iters " + std::to_string(o.iters) + ": the median needs at least " +
                     std::to_string(kMinIters) + " timed launches");
  if (o.warmup < 0) throw UsageError("--warmup " + std::to_string(o.warmup) + ": must not be negative");
  if (o.buffers < 0 || o.buffers > 64) throw UsageError("--buffers " + std::to_string(o.buffers) + ": must be 0..64");
  GpuKernel g = prepare_gpu_kernel(o.config, o.arch, o.shape);
  const Config& c = g.config;
  const ProblemShape& shape = g.shape;

  std::vector<std::unique_ptr<DeviceProblem>> problems;
  problems.push_back(std::make_unique<DeviceProblem>(c, shape, o.seed));
  int buffers = o.buffers;
  if (buffers == 0) {
    const double bytes = std::max(1.0, attention_bytes(c, problems.front()->shape()));
    buffers = std::clamp(static_cast<int>(kRotateBytes / bytes) + 1, 1, kMaxBuffers);
  }
  for (int i = 1; i < buffers; ++i)
    problems.push_back(std::make_unique<DeviceProblem>(c, shape, o.seed + static_cast<uint64_t>(i)));
  std::vector<DeviceProblem*> ptrs;
  for (auto& p : problems) ptrs.push_back(p.get());

  const Timing t = time_kernel(*g.kernel, ptrs, o.warmup, o.iters);
  const double flops = attention_flops(c, problems.front()->shape());
  const double tflops = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) / 1e12 : 0;
  const double gbps = t.median_ms > 0 ? attention_bytes(c, problems.front()->shape()) / (t.median_ms * 1e-3) / 1e9 : 0;

  if (o.json) {
    nlohmann::json j = {{"kernel", g.kernel->name()},
                        {"arch", c.arch},
                        {"device", g.device->name},
                        {"shape", shape_json(problems.front()->shape())},
                        {"median_ms", t.median_ms},
                        {"min_ms", t.min_ms},
                        {"tflops", tflops},
                        {"gbps", gbps},
                        {"flops", flops},
                        {"iters", o.iters},
                        {"warmup", o.warmup},
                        {"buffers", buffers},
                        {"samples_ms", t.samples_ms}};
    ctx.out << j.dump(2) << "\n";
    return kOk;
  }
  ctx.out << "kernel   " << kernel_status(*g.kernel) << "\n";
  ctx.out << "device   " << device_text(*g.device) << "\n";
  ctx.out << "shape    " << problems.front()->shape().describe() << "\n";
  ctx.out << "time     " << format_fixed(t.median_ms, 4) << " ms median (min " << format_fixed(t.min_ms, 4) << " ms, "
          << o.iters << " launches after " << o.warmup << " warm-up, " << buffers
          << (buffers == 1 ? " buffer)" : " buffers rotated)") << "\n";
  ctx.out << "TFLOP/s  " << format_fixed(tflops, 1) << "\n";
  ctx.out << "GB/s     " << format_fixed(gbps, 1) << " (Q, the cache's K and V, O)\n";
  return kOk;
}

void register_bench(CLI::App& parent, Context& ctx, Action& action) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = parent.add_subcommand("bench", "Time a config's kernel on one problem shape (median, TFLOP/s)");
  sub->add_option("config", o->config, "Config file ('-' reads stdin)")->required();
  add_single_arch_option(*sub, o->arch)->description("Target to build for (default: the config's; 'native' = this GPU)");
  add_shape_options(*sub, o->shape);
  sub->add_option("--warmup", o->warmup, "Launches before timing")->capture_default_str();
  sub->add_option("--iters", o->iters, "Timed launches (at least 20; the median is reported)")->capture_default_str();
  sub->add_option("--buffers", o->buffers,
                  "Copies of the problem launches rotate through, so small shapes are not served from L2 "
                  "(0: enough for 256 MiB, at most 8)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
  sub->add_flag("--json", o->json, "Print the results (and every sample) as JSON");
  sub->footer("Example:\n  flashjit bench examples/configs/default.json --arch native --batch 8 --seqlen-q 2048 --heads 16");
  sub->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_bench(*o, ctx); }; });
}

}  // namespace flashjit::cli
