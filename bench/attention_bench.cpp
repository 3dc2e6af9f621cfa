// flashjit_bench: times flashjit kernels with CUDA events, on the FlashAttention-3 grid (--grid)
// or on one config and shape. Writes a compact table to stdout and a JSON report (--json).
// Exit status: 0 all points timed (and checked, with --check); 1 a point failed; 2 usage; 3 no GPU;
// 4 a point ran past --point-timeout (the process ends there; the JSON holds the points before).
#include "bench/args.hpp"
#include "bench/env_info.hpp"
#include "bench/grid.hpp"
#include "bench/inputs.hpp"
#include "bench/json_report.hpp"
#include "bench/prebuild.hpp"
#include "bench/timing.hpp"
#include "bench/watchdog.hpp"
#include "generator/resolve.hpp"
#include "generator/user_json.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"
#include "runtime/flashjit.hpp"
#include "runtime/harness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

using namespace flashjit;
using namespace flashjit::bench;
using json = nlohmann::json;

namespace {

const char* kUsage = R"(usage: flashjit_bench --grid [filters] [options]
       flashjit_bench [--config FILE | --dtype T --head-dim D --mask M] [shape] [options]

The FlashAttention-3 grid (--grid): bf16 and fp16, head dim 64/128/256, seqlen 512..16k with
batch*seqlen = 16384 and heads*head_dim = 2048, causal and not (72 points). Filters (comma lists):
  --dtype bf16,fp16  --head-dim 64,128,256  --mask none,causal  --seqlen 512,1k,...,16k
One shape (without --grid):
  --config FILE      a config file (flashjit.attention.v1); --dtype/--head-dim/--mask override it
  --dtype T --head-dim D --mask M   a config from flags (default bf16, 128, none)
  --batch B --seqlen S (or --seqlen-q/--seqlen-k) --heads H --kv-heads HK --layout bshd|bhsd
  --seqlens-q L1,L2,... --seqlens-k ...   ragged batches (configs with "varlen": true)
  --window-left N --window-right N        sliding_window masks
Config options:
  --arch A           target (default "native": the GPU's own; a config file keeps its arch)
  --tuning JSON      tuning overrides, e.g. '{"BN": 128}'
  --family sm80|sm90 pin the kernel family (sm80 times the portable path on Hopper; an
                     sm_80 cubin does not load on sm_90, so keep the arch native)
  --no-seqlen-hint   keep the tiles chosen without a length (by default each point's config
                     gets tuning.seqlen_hint from its key length, as get_kernel(config, seqlen_k))
Timing:
  --warmup N (10)  --iters N (30)  --flush-mb MB (256; 0: no L2 flush between launches)
  --cooldown-ms MS   idle pause before each point (500), so no point runs at the clocks the
                     power draw of the points before it left
  --mode idle|sustained  idle (default): the pause and the flush above; sustained: --sustain-s
                     seconds (1.5) of the kernel's own launches first, then the timed ones back
                     to back with no flush and no pause, at the board's power cap as in serving.
                     Each point records the SM clock, power and clock-limit reasons (NVML), and
                     in sustained mode the energy per FLOP
  --check            verify each point once against the fp32 reference first (on a problem
                     capped at --check-max-seqlen, default 2048, and 4096 tokens)
  --jobs N           parallel compiles before timing (default: the CPU count)
  --seed N           input seed (default: random)
  --point-timeout S  end the run when one point takes longer (default 120; 0: never)
Output:
  --json FILE        the report (rewritten after every point)
  --dry-run          resolve and list the points; no GPU needed (arch native -> --arch or sm_90a)
  --compile-only     --dry-run plus compiling every kernel (no GPU needed)
)";

struct Settings {
  TimingOptions timing;
  bool check = false;
  int check_max_seqlen = 2048;
  int jobs = 0;
  uint64_t seed = 0;
  double point_timeout_s = 120;
};

bool sticky(const DriverError& e) {
  switch (e.code()) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
      return true;
    default:
      return false;
  }
}

json shape_json(const ProblemShape& s, const Config& c) {
  json j = {{"batch", s.batch},          {"seqlen_q", s.seqlen_q},     {"seqlen_k", s.seqlen_k},
            {"heads_q", s.heads_q},      {"heads_k", s.heads_k},       {"head_dim_qk", c.head_dim.qk},
            {"head_dim_v", c.head_dim.v}, {"layout", s.layout == Layout::bhsd ? "bhsd" : "bshd"}};
  if (!s.seqlens_q.empty()) j["seqlens_q"] = s.seqlens_q;
  if (!s.seqlens_k.empty()) j["seqlens_k"] = s.seqlens_k;
  if (s.window_left >= 0 || s.window_right >= 0) j["window"] = {s.window_left, s.window_right};
  return j;
}

// The problem --check runs: the point's own shape, capped so the fp32 reference (one CTA per
// query row) stays quick.
ProblemShape check_shape(const ProblemShape& s, int cap) {
  if (!s.seqlens_q.empty()) return s;
  ProblemShape c = s;
  c.seqlen_q = std::min(s.seqlen_q, cap);
  c.seqlen_k = s.seqlen_k == s.seqlen_q ? c.seqlen_q : std::min(s.seqlen_k, cap);
  c.batch = std::max(1, std::min(s.batch, 4096 / std::max(1, c.seqlen_q)));
  return c;
}

// The fields of a point known before it runs.
json point_skeleton(const BenchPoint& p, const Config& c) {
  return {{"id", p.id},
          {"dtype", to_string(c.dtype.qkv)},
          {"head_dim", c.head_dim.qk},
          {"mask", to_string(c.mask)},
          {"config", p.config},
          {"shape", shape_json(p.shape, c)},
          {"flops", attention_flops(c, p.shape)},
          {"error", nullptr}};
}

std::vector<BenchPoint> build_points(const Args& a) {
  json tuning;
  if (auto t = a.get("tuning")) {
    try {
      tuning = parse_user_json(*t, kMaxConfigBytes, "--tuning");
    } catch (const JsonInputError& e) {
      throw UsageError(std::string("--tuning: ") + e.what());
    }
  }
  const std::string family = a.get_or("family", "");
  if (!family.empty() && family != "sm80" && family != "sm90" && family != "sm100" && family != "auto")
    throw UsageError("--family must be sm80, sm90, sm100 or auto");

  if (a.flag("grid")) {
    if (a.has("config")) throw UsageError("--grid builds its own configs; drop --config");
    for (const char* f : {"batch", "seqlen-q", "seqlen-k", "heads", "kv-heads", "seqlens-q", "seqlens-k"})
      if (a.has(f)) throw UsageError(std::string("--") + f + " does not apply to --grid");
    GridFilter f;
    f.dtypes = a.list("dtype");
    f.head_dims = a.int_list("head-dim");
    f.masks = a.list("mask");
    f.seqlens = a.int_list("seqlen");
    return fa3_grid(f, a.get_or("arch", "native"), tuning, family);
  }

  BenchPoint p;
  p.id = "custom";
  if (auto file = a.get("config")) {
    try {
      p.config = parse_config_json(read_config_file(*file), *file);
    } catch (const ConfigError& e) {
      throw UsageError("--config " + *file + ": " + e.what());
    }
    if (auto v = a.get("arch")) p.config["arch"] = *v;
    if (auto v = a.get("dtype")) p.config["dtype"] = {{"qkv", *v}, {"out", *v}};
    if (a.has("head-dim")) {
      int d = a.get_int("head-dim", 128);
      p.config["head_dim"] = {{"qk", d}, {"v", d}};
    }
    if (auto v = a.get("mask")) p.config["mask"] = normalize_mask(*v);
  } else {
    p.config = point_config(a.get_or("dtype", "bf16"), a.get_int("head-dim", 128),
                            normalize_mask(a.get_or("mask", "none")), a.get_or("arch", "native"));
  }
  apply_tuning(p.config, tuning, family);
  const int d = p.config.value("head_dim", json::object()).value("qk", 128);
  const int group = p.config.value("group", 1);

  ProblemShape& s = p.shape;
  s.seqlen_q = a.get_int("seqlen-q", a.get_int("seqlen", 4096));
  s.seqlen_k = a.get_int("seqlen-k", s.seqlen_q);
  s.heads_q = a.get_int("heads", std::max(1, kGridHidden / std::max(1, d)));
  s.heads_k = a.get_int("kv-heads", std::max(1, s.heads_q / std::max(1, group)));
  if (!a.has("config") && s.heads_k != s.heads_q) {
    if (s.heads_k <= 0 || s.heads_q % s.heads_k)
      throw UsageError("--kv-heads must divide --heads");
    p.config["group"] = s.heads_q / s.heads_k;
  }
  s.batch = a.get_int("batch", std::max(1, kGridTokens / std::max(1, s.seqlen_q)));
  s.seqlens_q = a.int_list("seqlens-q");
  s.seqlens_k = a.int_list("seqlens-k");
  if (!s.seqlens_q.empty() || !s.seqlens_k.empty()) {
    if (s.seqlens_k.empty()) s.seqlens_k = s.seqlens_q;
    if (s.seqlens_q.size() != s.seqlens_k.size())
      throw UsageError("--seqlens-q and --seqlens-k need the same number of lengths");
    s.batch = static_cast<int>(s.seqlens_q.size());
  } else if (p.config.value("varlen", false)) {
    s.seqlens_q.assign(s.batch, s.seqlen_q);
    s.seqlens_k.assign(s.batch, s.seqlen_k);
  }
  const std::string layout = a.get_or("layout", "bshd");
  if (layout != "bshd" && layout != "bhsd") throw UsageError("--layout must be bshd or bhsd");
  s.layout = layout == "bhsd" ? Layout::bhsd : Layout::bshd;
  s.window_left = a.get_int("window-left", -1);
  s.window_right = a.get_int("window-right", -1);
  return {p};
}

// --dry-run / --compile-only: everything up to the launch, for a named arch; no GPU.
// What get_kernel(config, seqlen_k) does, written into the point's config so that prebuilding,
// the report and the timed kernel all see the same tiles.
void hint_seqlen(BenchPoint& p) {
  json& tuning = p.config["tuning"];
  if (tuning.is_object() && tuning.contains("seqlen_hint")) return;
  tuning["seqlen_hint"] = *with_seqlen_hint(Config{}, p.shape.max_seqlen_k()).tuning.seqlen_hint;
}

int offline_run(const Args& a, std::vector<BenchPoint> points, bool compile) {
  std::string target = a.get_or("arch", "native");
  if (target == "native") target = "sm_90a";
  json report = {{"schema", "flashjit.bench.v1"},
                 {"tool", "flashjit_bench"},
                 {"mode", compile ? "compile-only" : "dry-run"},
                 {"host", host_info()},
                 {"build", build_info()},
                 {"gpu", nullptr},
                 {"points", json::array()}};
  std::vector<Config> configs;
  for (auto& p : points) {
    if (p.config.value("arch", "native") == "native") p.config["arch"] = target;
    json pj;
    try {
      Config c = parse_config(p.config);
      pj = point_skeleton(p, c);
      Config r = resolve(c);
      pj["resolved"] = to_json(r);
      pj["tuning"] = pj["resolved"]["tuning"];
      pj["kernel"] = readable_name(r);
      configs.push_back(c);
    } catch (const std::exception& e) {
      pj = {{"id", p.id}, {"config", p.config}, {"error", e.what()}};
    }
    report["points"].push_back(pj);
  }
  int rc = 0;
  if (compile) {
    PrebuildOptions po;
    po.jobs = a.get_int("jobs", 0);
    po.references = a.flag("check");
    auto built = prebuild(configs, target, po, &std::cerr);
    for (auto& pj : report["points"]) {
      if (!pj.contains("resolved")) continue;
      auto it = built.find(prebuild_key(parse_config(pj["config"]), target));
      if (it == built.end()) continue;
      pj["jit"] = it->second.to_json();
      if (!it->second.error.empty()) {
        pj["error"] = it->second.error;
        rc = 1;
      }
    }
  }
  for (const auto& pj : report["points"])
    if (pj.contains("error") && pj["error"].is_string()) rc = 1;
  if (auto path = a.get("json")) write_json_file(*path, report);
  std::cout << format_points_table(report["points"]);
  return rc;
}

int gpu_run(const Args& a, const std::vector<BenchPoint>& points, const Settings& st) {
  const DeviceInfo& dev = current_device();
  json report = {{"schema", "flashjit.bench.v1"},
                 {"tool", "flashjit_bench"},
                 {"mode", a.flag("grid") ? "grid" : "single"},
                 {"host", host_info()},
                 {"build", build_info()},
                 {"gpu", gpu_info()},
                 {"settings",
                  {{"warmup", st.timing.warmup},
                   {"iters", st.timing.iters},
                   {"flush_bytes", st.timing.flush_bytes},
                   {"cooldown_ms", st.timing.cooldown_ms},
                   {"timing_mode", st.timing.sustained ? "sustained" : "idle"},
                   {"sustain_s", st.timing.sustained ? st.timing.sustain_s : 0.0},
                   {"check", st.check},
                   {"check_max_seqlen", st.check_max_seqlen},
                   {"seed", st.seed},
                   {"method",
                    st.timing.sustained
                        ? "CUDA events around each launch; the kernel's own back-to-back launches for "
                          "sustain_s seconds first, then the timed launches back to back (no flush, no "
                          "pause); inputs rotated over sets totalling > 3x L2; median of iters"
                        : "CUDA events around each launch; an L2-flushing memset before each; inputs "
                          "rotated over sets totalling > 3x L2; an idle pause before each point; "
                          "median of iters"}}},
                 {"points", json::array()}};
  const std::string json_path = a.get_or("json", "");
  auto save = [&] {
    if (!json_path.empty()) write_json_file(json_path, report);
  };

  // Compile every distinct kernel first, in parallel; the timed loop then hits the disk cache.
  std::vector<Config> configs;
  for (const auto& p : points) {
    try {
      configs.push_back(parse_config(p.config));
    } catch (const std::exception&) {
      // reported at the point
    }
  }
  PrebuildOptions po;
  po.jobs = st.jobs;
  po.references = st.check;
  auto built = prebuild(configs, dev.arch(), po, &std::cerr);

  InputPool pool(l2_cache_bytes(), st.seed);
  Timer timer(st.timing);
  Watchdog watchdog("flashjit_bench", st.point_timeout_s, 4);
  int failures = 0;
  std::string lost;  // set when the context is gone
  const auto run_start = std::chrono::steady_clock::now();
  std::cerr << points_table_header() << "\n";
  for (size_t i = 0; i < points.size(); ++i) {
    const BenchPoint& p = points[i];
    json pj = {{"id", p.id}, {"config", p.config}, {"error", nullptr}};
    watchdog.arm(p.id);
    try {
      if (!lost.empty()) throw std::runtime_error("not run: " + lost);
      Config c = parse_config(p.config);
      pj = point_skeleton(p, c);
      auto b = built.find(prebuild_key(c, dev.arch()));
      if (b != built.end()) {
        pj["jit"] = b->second.to_json();
        if (!b->second.error.empty()) throw std::runtime_error(b->second.error);
      }
      auto t0 = std::chrono::steady_clock::now();
      auto kernel = get_kernel(c);
      pj["get_kernel_ms"] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      json resolved = to_json(kernel->config());
      pj["resolved"] = resolved;
      pj["tuning"] = resolved["tuning"];
      pj["kernel"] = kernel->name();
      pj["launch"] = to_json(kernel->launch_info());
      pj["ptxas"] = to_json(kernel->ptxas());
      if (st.check) {
        ProblemShape cs = check_shape(p.shape, st.check_max_seqlen);
        DeviceProblem prob(c, cs, st.seed + 1000003 * (i + 1));
        CheckResult r = check_against_reference(*kernel, c, prob, timer.stream());
        pj["check"] = {{"passed", r.passed},         {"rel_error", r.rel_error},
                       {"max_abs_error", r.max_abs_error}, {"lse_max_error", r.lse_max_error},
                       {"nonfinite", r.nonfinite},   {"tolerance", r.tolerance},
                       {"shape", shape_json(cs, c)}, {"summary", r.summary()}};
        if (!r.passed) ++failures;
      }
      InputSets sets = pool.prepare(c, p.shape);
      TimingResult t = timer.time(*kernel, sets.args);
      const double flops = pj["flops"].get<double>();
      pj["median_ms"] = t.median_ms;
      pj["min_ms"] = t.min_ms;
      pj["mean_ms"] = t.mean_ms;
      pj["tflops"] = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) / 1e12 : 0.0;
      pj["tflops_at_min"] = t.min_ms > 0 ? flops / (t.min_ms * 1e-3) / 1e12 : 0.0;
      pj["samples_ms"] = t.samples_ms;
      pj["telemetry"] = t.telemetry.to_json();
      // Board power at the end of the window times the median launch: NVML's energy counter
      // advances in steps of about 0.1 s, longer than the timed launches of most points.
      if (st.timing.sustained && t.telemetry.power_w && flops > 0)
        pj["energy_pj_per_flop"] = *t.telemetry.power_w * t.median_ms * 1e-3 * 1e12 / flops;
      pj["input_sets"] = sets.args.size();
      pj["input_set_bytes"] = sets.bytes_per_set;
      pj["pooled_inputs"] = sets.pooled;
    } catch (const DriverError& e) {
      pj["error"] = e.what();
      ++failures;
      if (sticky(e)) lost = std::string("the CUDA context was lost at ") + p.id + " (" + e.what() + ")";
    } catch (const std::exception& e) {
      pj["error"] = e.what();
      ++failures;
    }
    watchdog.disarm();
    report["points"].push_back(pj);
    save();
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    std::fprintf(stderr, "%s  [%zu/%zu %.0fs]\n", format_point_line(pj).c_str(), i + 1,
                 points.size(), elapsed);
  }
  std::cout << "\n" << report["gpu"].value("name", "GPU") << ", flashjit " << version() << ", "
            << st.timing.iters << " iters (median)\n";
  std::cout << format_points_table(report["points"]);
  if (!lost.empty()) std::cerr << "flashjit_bench: stopped early: " << lost << "\n";
  if (!json_path.empty()) std::cerr << "flashjit_bench: wrote " << json_path << "\n";
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a(argc, argv,
           {"config", "dtype", "head-dim", "mask", "seqlen", "batch", "seqlen-q", "seqlen-k", "heads",
            "kv-heads", "layout", "seqlens-q", "seqlens-k", "window-left", "window-right", "arch",
            "tuning", "family", "warmup", "iters", "flush-mb", "cooldown-ms", "mode", "sustain-s", "json", "jobs",
            "seed",
            "check-max-seqlen", "point-timeout"},
           {"grid", "check", "dry-run", "compile-only", "no-seqlen-hint", "help"});
    if (a.flag("help")) {
      std::cout << kUsage;
      return 0;
    }
    if (!a.positional().empty()) throw UsageError("unexpected argument \"" + a.positional()[0] + "\"");
    std::vector<BenchPoint> points = build_points(a);
    if (!a.flag("no-seqlen-hint"))
      for (BenchPoint& p : points) hint_seqlen(p);
    if (a.flag("dry-run") || a.flag("compile-only")) return offline_run(a, points, a.flag("compile-only"));

    Settings st;
    st.timing.warmup = a.get_int("warmup", 10);
    st.timing.iters = a.get_int("iters", 30);
    st.timing.flush_bytes = size_t(a.get_int("flush-mb", 256)) << 20;
    st.timing.cooldown_ms = a.get_int("cooldown-ms", 500);
    const std::string mode = a.get_or("mode", "idle");
    if (mode != "idle" && mode != "sustained") throw UsageError("--mode " + mode + ": idle or sustained");
    st.timing.sustained = mode == "sustained";
    st.timing.sustain_s = a.get_double("sustain-s", 1.5);
    if (st.timing.sustained && st.timing.sustain_s < 1.0)
      throw UsageError("--sustain-s: the sustained mode needs at least 1 s of launches before timing");
    if (st.timing.iters < 1) throw UsageError("--iters must be at least 1");
    if (st.timing.iters < 20)
      std::cerr << "flashjit_bench: note: --iters " << st.timing.iters
                << " is below 20; medians will be noisy\n";
    st.check = a.flag("check");
    st.check_max_seqlen = a.get_int("check-max-seqlen", 2048);
    st.jobs = a.get_int("jobs", 0);
    st.point_timeout_s = a.get_double("point-timeout", 120);
    st.seed = a.has("seed") ? uint64_t(a.get_int("seed", 0)) : uint64_t(std::random_device{}()) << 16;

    if (!gpu_available()) {
      std::cerr << "flashjit_bench: no GPU to time on: " << gpu_unavailable_reason()
                << "\n  (--dry-run and --compile-only work without one)\n";
      return 3;
    }
    return gpu_run(a, points, st);
  } catch (const UsageError& e) {
    std::cerr << "flashjit_bench: " << e.what() << "\n";
    return 2;
  } catch (const ConfigError& e) {
    std::cerr << "flashjit_bench: bad config: " << e.what() << "\n";
    return 2;
  } catch (const NoDeviceError& e) {
    std::cerr << "flashjit_bench: no GPU: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "flashjit_bench: " << e.what() << "\n";
    return 1;
  }
}
