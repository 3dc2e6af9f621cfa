// flashjit precompile: build every kernel a manifest lists into the cache, in parallel.
#include "cache/file_io.hpp"
#include "cache/log.hpp"
#include "cli/build.hpp"
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "cli/format.hpp"
#include "cli/manifest.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/register.hpp"
#include "runtime/compiler.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace flashjit::cli {

namespace {

struct ItemResult {
  ItemStatus status = ItemStatus::skipped;
  std::string key;
  std::string file;
  double compile_ms = 0;  // NVRTC time of the build (also for hits: when it was built)
  double load_ms = 0;     // this run's time for the item
  std::string error;
};

std::string label_of(const PlanItem& item) { return item.name + " (" + item.arch + ")"; }

const char* status_name(ItemStatus s) {
  switch (s) {
    case ItemStatus::compiled: return "compiled";
    case ItemStatus::hit: return "hit";
    case ItemStatus::failed: return "failed";
    case ItemStatus::skipped: return "skipped";
  }
  return "?";
}

void print_plan(const std::vector<PlanItem>& items, Context& ctx) {
  std::vector<std::vector<std::string>> rows = {{"#", "KERNEL", "ARCH", "FROM", "STATUS"}};
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& it = items[i];
    rows.push_back({std::to_string(i), it.name, it.arch, it.origin,
                    it.error.empty() ? "ok" : "rejected: " + it.error});
  }
  ctx.out << format_table(rows);
}

}  // namespace

int cmd_precompile(const PrecompileOptions& o, Context& ctx) {
  const Manifest manifest = load_manifest(o.manifest);
  const Shard shard = o.shard.empty() ? Shard{} : parse_shard(o.shard);
  const Plan plan = make_plan(manifest, o.archs);
  const std::vector<PlanItem> items = take_shard(plan.items, shard);

  std::string scope = std::to_string(plan.items.size()) + " kernels";
  std::vector<std::string> dropped;
  if (plan.duplicates) dropped.push_back(std::to_string(plan.duplicates) + (plan.duplicates == 1 ? " duplicate dropped" : " duplicates dropped"));
  if (plan.excluded) dropped.push_back(std::to_string(plan.excluded) + " excluded");
  if (!dropped.empty()) scope += " (" + join(dropped, ", ") + ")";
  if (shard.count > 1) scope += ", shard " + shard.text() + ": " + std::to_string(items.size());

  if (o.dry_run) {
    ctx.out << "precompile plan: " << scope << "\n";
    print_plan(items, ctx);
    for (const auto& it : items)
      if (!it.error.empty()) return kFailure;
    return kOk;
  }

  int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::thread::hardware_concurrency());
  jobs = std::max(1, std::min<int>(jobs, std::max<size_t>(1, items.size())));

  const bool quiet = ctx.verbosity == Verbosity::quiet;
  if (!quiet)
    ctx.err << "precompile: " << scope << " on " << jobs << (jobs == 1 ? " worker" : " workers")
            << " (cache " << ctx.cache().options().dir.string() << ")\n";

  Progress progress(ctx.err, items.size(), ctx.err_is_tty && !quiet, quiet);
  // The per-item lines say what the library's info lines would; warnings go above the bar.
  const LogLevel saved_level = log_level();
  if (ctx.verbosity != Verbosity::verbose && saved_level < LogLevel::warn) set_log_level(LogLevel::warn);
  const bool routed = ctx.err_is_tty && !quiet;
  if (routed) set_log_sink([&progress](LogLevel, const std::string& m) { progress.println(m); });

  std::vector<ItemResult> results(items.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  cache::DiskStore& store = ctx.cache();
  const auto start = std::chrono::steady_clock::now();

  auto worker = [&] {
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= items.size()) return;
      const PlanItem& item = items[i];
      ItemResult& r = results[i];
      if (stop.load()) {
        r.status = ItemStatus::skipped;
        progress.finished(r.status, label_of(item), "(stopped after a failure; --keep-going compiles the rest)");
        continue;
      }
      if (!item.error.empty()) {
        r.status = ItemStatus::failed;
        r.error = item.error;
      } else {
        try {
          const Artifact a = build_artifact(source_for(item.config, item.reference), store);
          r.status = a.compiled ? ItemStatus::compiled : ItemStatus::hit;
          r.key = a.key;
          r.file = a.cache_file;
          // A kernel that is not in the cache afterwards is not precompiled.
          if (!a.store_error.empty()) {
            r.status = ItemStatus::failed;
            r.error = "compiled but not stored: " + a.store_error;
          }
          r.compile_ms = a.compile_ms;
          r.load_ms = a.load_ms;
        } catch (...) {
          r.status = ItemStatus::failed;
          r.error = one_line(std::current_exception());
        }
      }
      if (r.status == ItemStatus::failed && !o.keep_going) stop.store(true);
      progress.finished(r.status, label_of(item),
                        r.status == ItemStatus::failed ? r.error
                        : r.status == ItemStatus::compiled ? format_ms(r.compile_ms)
                                                           : std::string());
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < jobs; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  progress.finish();
  if (routed) set_log_sink(nullptr);
  set_log_level(saved_level);

  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t compiled = 0, hits = 0, failed = 0, skipped = 0;
  double compile_s = 0;
  for (const auto& r : results) {
    compiled += r.status == ItemStatus::compiled;
    hits += r.status == ItemStatus::hit;
    failed += r.status == ItemStatus::failed;
    skipped += r.status == ItemStatus::skipped;
    if (r.status == ItemStatus::compiled) compile_s += r.compile_ms / 1000;
  }

  ctx.out << "precompile: " << scope << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"  compiled", std::to_string(compiled)},
      {"  cache hits", std::to_string(hits)},
      {"  failed", std::to_string(failed)},
  };
  if (skipped) rows.push_back({"  skipped", std::to_string(skipped)});
  rows.push_back({"  total time", format_ms(wall_s * 1000) + " (NVRTC " + format_ms(compile_s * 1000) + " over " +
                                      std::to_string(jobs) + (jobs == 1 ? " worker)" : " workers)")});
  ctx.out << format_table(rows);
  if (failed) {
    ctx.out << "failed:\n";
    for (size_t i = 0; i < items.size(); ++i)
      if (results[i].status == ItemStatus::failed)
        ctx.out << "  " << label_of(items[i]) << " [" << items[i].origin << "]: " << results[i].error << "\n";
  }
  ctx.out.flush();

  if (!o.json_summary.empty()) {
    nlohmann::json s;
    s["schema"] = "flashjit.precompile-summary.v1";
    s["manifest"] = o.manifest;
    s["shard"] = shard.text();
    s["jobs"] = jobs;
    s["kernels"] = plan.items.size();
    s["duplicates"] = plan.duplicates;
    s["excluded"] = plan.excluded;
    s["total"] = items.size();
    s["compiled"] = compiled;
    s["hits"] = hits;
    s["failed"] = failed;
    s["skipped"] = skipped;
    s["wall_s"] = wall_s;
    s["compile_s"] = compile_s;
    s["nvrtc"] = nvrtc_identity();
    s["cache_dir"] = store.options().dir.string();
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      const auto& r = results[i];
      nlohmann::json e = {{"name", it.name},
                          {"arch", it.arch},
                          {"kind", it.reference ? "reference" : "fwd"},
                          {"origin", it.origin},
                          {"status", status_name(r.status)},
                          {"config", to_json(it.config)}};
      if (!r.key.empty()) e["key"] = r.key;
      if (!r.file.empty()) e["file"] = r.file;
      if (r.status == ItemStatus::compiled || r.status == ItemStatus::hit) {
        e["compile_ms"] = r.compile_ms;
        e["load_ms"] = r.load_ms;
      }
      if (!r.error.empty()) e["error"] = r.error;
      list.push_back(std::move(e));
    }
    s["items"] = std::move(list);
    cache::Fd f;
    std::string why = open_output_file(o.json_summary, f);
    if (why.empty()) why = write_and_close(f, s.dump(2) + "\n");
    if (!why.empty()) throw std::runtime_error(o.json_summary + ": cannot write the JSON summary: " + why);
  }
  return failed || skipped ? kFailure : kOk;
}

void register_precompile(CLI::App& parent, Context& ctx, Action& action) {
  auto o = std::make_shared<PrecompileOptions>();
  CLI::App* sub = parent.add_subcommand(
      "precompile", "Compile every kernel a manifest lists into the cache (for shipping a read-only cache)");
  sub->add_option("manifest", o->manifest, "Manifest file (schema flashjit.manifest.v1; see docs/cli.md)")
      ->required();
  sub->add_option("-j,--jobs", o->jobs, "Parallel compiles (default: hardware threads)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--shard", o->shard,
                  "Build only items whose index % N == I (indices after dropping duplicates)")
      ->type_name("I/N");
  add_arch_option(*sub, o->archs)->description("Targets (replace the manifest's archs); repeatable, comma-separated");
  sub->add_flag("-k,--keep-going", o->keep_going, "Keep compiling after a failure");
  sub->add_flag("-n,--dry-run", o->dry_run, "Print the plan (deduplicated, sharded) and compile nothing");
  sub->add_option("--json-summary", o->json_summary, "Write a JSON summary of every item to FILE")
      ->type_name("FILE");
  sub->footer("Example:\n  FLASHJIT_CACHE_DIR=./kernels flashjit precompile examples/manifests/ci.json -j 8 --shard 0/2");
  sub->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_precompile(*o, ctx); }; });
}

}  // namespace flashjit::cli
