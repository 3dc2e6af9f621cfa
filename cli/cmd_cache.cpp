// flashjit cache: inspect and maintain the on-disk kernel cache.
#include "cache/env_options.hpp"
#include "cache/printable.hpp"
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "cli/format.hpp"
#include "cli/register.hpp"
#include "runtime/artifact.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <memory>

namespace flashjit::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string layer_label(const cache::DiskStore& store, const cache::EntryInfo& e) {
  if (!e.read_only) return "writable";
  const auto& layers = store.options().layers;
  for (size_t i = 0; i < layers.size(); ++i)
    if (e.path.parent_path() == layers[i]) return "layer " + std::to_string(i + 1);
  return "read-only";
}

std::string arch_of(const cache::EntryInfo& e) {
  if (!e.valid) return "";
  auto c = e.manifest.find("config");
  if (c == e.manifest.end() || !c->is_object()) return "";
  auto arch = c->find("arch");
  return arch != c->end() && arch->is_string() ? cache::printable(arch->get<std::string>()) : "";
}

json entry_json(const cache::DiskStore& store, const cache::EntryInfo& e) {
  json j = {{"name", e.name},        {"key", e.key},          {"path", cache::printable(e.path.string())},
            {"bytes", e.bytes},      {"last_used", e.last_used}, {"read_only", e.read_only},
            {"layer", layer_label(store, e)}, {"valid", e.valid}};
  if (!e.valid) j["problem"] = e.problem;
  else {
    j["arch"] = arch_of(e);
    if (e.manifest.contains("compile_ms")) j["compile_ms"] = e.manifest["compile_ms"];
    if (e.manifest.contains("launch")) j["family"] = e.manifest["launch"].value("family", "");
  }
  return j;
}

bool is_hex(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c));
  });
}

void print_block(Context& ctx, const std::string& title, const json& j) {
  ctx.out << title << ":\n";
  std::string text = j.dump(2, ' ', /*ensure_ascii=*/true);
  std::string line;
  for (char c : text) {
    if (c == '\n') {
      ctx.out << "  " << line << "\n";
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) ctx.out << "  " << line << "\n";
}

// "  (not used: <why>)" for a directory the store skips, else "".
std::string dir_note(const cache::DirInfo& d) {
  if (d.status == cache::TrustedDir::Status::ok) return "";
  if (d.status == cache::TrustedDir::Status::missing) return "  (does not exist)";
  return "  (not used: " + d.problem + ")";
}

void print_failures(Context& ctx, const std::vector<std::string>& failures) {
  for (const auto& f : failures) ctx.err << "error: " << f << "\n";
}

}  // namespace

int cmd_cache_path(bool layers, Context& ctx) {
  const auto& opt = ctx.cache().options();
  if (layers) {
    for (const auto& l : opt.layers) ctx.out << l.string() << "\n";
  } else {
    ctx.out << opt.dir.string() << "\n";
  }
  return kOk;
}

int cmd_cache_list(bool as_json, Context& ctx) {
  cache::DiskStore& store = ctx.cache();
  const auto entries = store.list(artifact_entry_check());
  if (as_json) {
    json a = json::array();
    for (const auto& e : entries) a.push_back(entry_json(store, e));
    ctx.out << a.dump(2, ' ', /*ensure_ascii=*/true) << "\n";
    return kOk;
  }
  const auto dirs = store.directories();
  const cache::DirInfo& writable = dirs.back();
  ctx.out << "writable  " << cache::printable(writable.path.string()) << dir_note(writable) << "\n";
  for (size_t i = 0; i + 1 < dirs.size(); ++i)
    ctx.out << "layer " << (i + 1) << "   " << cache::printable(dirs[i].path.string()) << " (read-only)"
            << dir_note(dirs[i]) << "\n";
  if (entries.empty()) {
    ctx.out << "no entries\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "KEY", "SIZE", "LAST USED", "LAYER", ""}};
  std::uint64_t total = 0;
  size_t invalid = 0;
  for (const auto& e : entries) {
    total += e.bytes;
    invalid += !e.valid;
    rows.push_back({e.name.empty() ? cache::printable(e.path.filename().string()) : e.name,
                    e.key.empty() ? "-" : e.key.substr(0, 12), format_bytes(e.bytes), format_age(e.last_used),
                    layer_label(store, e), e.valid ? "" : "INVALID: " + e.problem});
  }
  ctx.out << format_table(rows);
  ctx.out << entries.size() << (entries.size() == 1 ? " entry, " : " entries, ") << format_bytes(total);
  if (invalid) ctx.out << ", " << invalid << " invalid (flashjit cache verify --remove)";
  ctx.out << "\n";
  return kOk;
}

int cmd_cache_info(const CacheInfoOptions& o, Context& ctx) {
  cache::DiskStore& store = ctx.cache();
  const cache::EntryCheck check = artifact_entry_check();
  const auto entries = store.list(check);
  std::vector<const cache::EntryInfo*> matches;
  const bool hex = is_hex(o.what);
  for (const auto& e : entries) {
    if (e.key.empty()) continue;
    if (e.key == o.what || e.name == o.what || (hex && o.what.size() >= 6 && e.key.rfind(o.what, 0) == 0))
      matches.push_back(&e);
  }
  if (matches.empty())
    throw std::runtime_error("no cache entry matches \"" + o.what +
                             "\" (give a key, a key prefix of at least 6 hex digits, or a kernel name; "
                             "`flashjit cache list` shows the entries)");
  // The same key in several layers is one kernel: show the copy lookup finds first.
  for (const auto* m : matches)
    if (m->key != matches.front()->key) {
      std::vector<std::string> lines = {"\"" + o.what + "\" matches several kernels; name one by key:"};
      for (const auto* c : matches)
        lines.push_back("  " + c->key + "  " + c->name + "  " + cache::printable(c->path.string()));
      throw UsageError(lines);
    }
  // What is printed is checked in full first (the listing reads no binary); as a lookup, the
  // first valid copy wins.
  cache::EntryInfo e = store.inspect(*matches.front(), check);
  for (size_t i = 1; i < matches.size() && !e.valid; ++i) {
    cache::EntryInfo next = store.inspect(*matches[i], check);
    if (next.valid) e = std::move(next);
  }
  if (!e.valid) throw std::runtime_error(cache::printable(e.path.string()) + " is invalid: " + e.problem);
  const json& m = e.manifest;

  if (o.source) {
    if (!m.contains("source") || !m["source"].is_string())
      throw std::runtime_error(cache::printable(e.path.string()) + ": the entry stores no source");
    ctx.out << m["source"].get<std::string>();
    return kOk;
  }
  if (o.log) {
    ctx.out << m.value("compile_log", std::string());
    return kOk;
  }
  if (o.json) {
    json j = m;
    j.erase("source");
    j["path"] = cache::printable(e.path.string());
    j["bytes"] = e.bytes;
    j["last_used"] = e.last_used;
    j["read_only"] = e.read_only;
    ctx.out << j.dump(2, ' ', /*ensure_ascii=*/true) << "\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"name", e.name},
      {"key", e.key},
      {"file", cache::printable(e.path.string()) + " (" + layer_label(store, e) + ")"},
      {"size", format_bytes(e.bytes)},
      {"last used", format_time(e.last_used) + " (" + format_age(e.last_used) + ")"},
  };
  if (m.contains("created_unix") && m["created_unix"].is_number_integer())
    rows.push_back({"created", format_time(m["created_unix"].get<std::int64_t>())});
  if (m.contains("compile_ms") && m["compile_ms"].is_number())
    rows.push_back({"compile time", format_ms(m["compile_ms"].get<double>())});
  ctx.out << format_table(rows);
  for (const char* block : {"config", "launch", "ptxas", "key_inputs"})
    if (m.contains(block)) {
      const std::string title = std::string(block) == "config"       ? "resolved config"
                                : std::string(block) == "key_inputs" ? "key inputs"
                                : std::string(block) == "ptxas"      ? "ptxas report"
                                                                     : block;
      print_block(ctx, title, m[block]);
    }
  if (m.contains("source")) ctx.out << "(source: flashjit cache info " << e.key.substr(0, 12) << " --source)\n";
  return kOk;
}

int cmd_cache_verify(bool remove, Context& ctx) {
  cache::DiskStore& store = ctx.cache();
  const cache::VerifyReport report = store.verify(remove, artifact_entry_check());
  size_t kept = 0, removed = 0;
  for (const auto& d : report.skipped_dirs) ctx.out << "skipped  " << d << "\n";
  for (const auto& e : report.bad) {
    std::string what = cache::printable(e.path.string()) + ": " + e.problem;
    if (e.removed) {
      what += " (removed)";
      ++removed;
    } else {
      ++kept;
      if (e.read_only) what += " (read-only layer, left in place)";
      else if (!e.remove_error.empty()) what += " (not removed: " + e.remove_error + ")";
    }
    ctx.out << "invalid  " << what << "\n";
  }
  ctx.out << "checked " << report.checked << (report.checked == 1 ? " entry: " : " entries: ") << report.bad.size()
          << " invalid";
  if (remove && !report.bad.empty()) ctx.out << ", " << removed << " removed";
  if (!report.skipped_dirs.empty())
    ctx.out << "; " << report.skipped_dirs.size()
            << (report.skipped_dirs.size() == 1 ? " directory" : " directories") << " not checked";
  ctx.out << "\n";
  return kept || !report.skipped_dirs.empty() ? kFailure : kOk;
}

int cmd_cache_prune(const std::string& max_bytes, Context& ctx) {
  const std::uint64_t cap = cache::parse_byte_size("--max-bytes", max_bytes);
  cache::DiskStore& store = ctx.cache();
  const cache::Cleanup c = store.prune(cap);
  std::uint64_t left = 0;
  for (const auto& e : store.list())
    if (!e.read_only) left += e.bytes;
  ctx.out << "freed " << format_bytes(c.bytes) << "; " << cache::printable(store.options().dir.string())
          << " now holds " << format_bytes(left) << " (cap " << format_bytes(cap) << ")\n";
  print_failures(ctx, c.failures);
  return c.failures.empty() ? kOk : kFailure;
}

int cmd_cache_clear(Context& ctx) {
  cache::DiskStore& store = ctx.cache();
  const cache::Cleanup c = store.clear();
  ctx.out << "removed " << c.entries << (c.entries == 1 ? " entry" : " entries") << " from "
          << cache::printable(store.options().dir.string()) << "\n";
  print_failures(ctx, c.failures);
  return c.failures.empty() ? kOk : kFailure;
}

int cmd_cache_export(const std::string& dir, Context& ctx) {
  const size_t n = ctx.cache().export_to(dir, artifact_entry_check());
  ctx.out << "exported " << n << (n == 1 ? " entry" : " entries") << " to " << cache::printable(dir)
          << " (use it as a read-only layer: FLASHJIT_CACHE_PATH=" << cache::printable(fs::absolute(dir).string())
          << ")\n";
  return kOk;
}

int cmd_cache_import(const std::string& dir, Context& ctx) {
  const cache::ImportReport r = ctx.cache().import_from(dir, artifact_entry_check());
  for (const auto& n : r.notes) ctx.out << "note: " << n << "\n";
  ctx.out << "imported " << r.imported << (r.imported == 1 ? " entry" : " entries") << " into "
          << cache::printable(ctx.cache().options().dir.string()) << "\n";
  for (const auto& s : r.skipped) ctx.err << "error: not imported: " << s << "\n";
  return r.skipped.empty() ? kOk : kFailure;
}

void register_cache(CLI::App& parent, Context& ctx, Action& action) {
  CLI::App* cache = parent.add_subcommand(
      "cache", "Inspect and maintain the kernel cache ($FLASHJIT_CACHE_DIR, layers in $FLASHJIT_CACHE_PATH)");
  cache->require_subcommand(1);

  {
    auto json_out = std::make_shared<bool>(false);
    CLI::App* s = cache->add_subcommand("list", "List the entries of every layer and the writable directory");
    s->add_flag("--json", *json_out, "Print a JSON array");
    s->callback([json_out, &ctx, &action] { action = [json_out, &ctx] { return cmd_cache_list(*json_out, ctx); }; });
  }
  {
    auto o = std::make_shared<CacheInfoOptions>();
    CLI::App* s = cache->add_subcommand(
        "info", "Show one entry: resolved config, launch, ptxas report, key inputs");
    s->add_option("entry", o->what, "Key, key prefix (6+ hex digits) or kernel name")->required()->type_name("KEY_OR_NAME");
    s->add_flag("--source", o->source, "Print the stored (flat) source instead");
    s->add_flag("--log", o->log, "Print the stored NVRTC log instead");
    s->add_flag("--json", o->json, "Print the manifest as JSON (without the source)");
    s->callback([o, &ctx, &action] { action = [o, &ctx] { return cmd_cache_info(*o, ctx); }; });
  }
  {
    auto remove = std::make_shared<bool>(false);
    CLI::App* s = cache->add_subcommand("verify", "Check every entry; report (and with --remove delete) invalid ones");
    s->add_flag("--remove", *remove, "Delete invalid entries of the writable directory");
    s->callback([remove, &ctx, &action] { action = [remove, &ctx] { return cmd_cache_verify(*remove, ctx); }; });
  }
  {
    auto max = std::make_shared<std::string>();
    CLI::App* s = cache->add_subcommand("prune", "Evict least recently used entries until the cache fits");
    s->add_option("--max-bytes", *max, "Size to keep (suffixes K, M, G)")->required()->type_name("N");
    s->callback([max, &ctx, &action] { action = [max, &ctx] { return cmd_cache_prune(*max, ctx); }; });
  }
  {
    CLI::App* s = cache->add_subcommand("clear", "Delete every entry of the writable directory");
    s->callback([&ctx, &action] { action = [&ctx] { return cmd_cache_clear(ctx); }; });
  }
  {
    auto dir = std::make_shared<std::string>();
    CLI::App* s = cache->add_subcommand("export", "Copy every valid entry to DIR (a read-only layer to ship)");
    s->add_option("dir", *dir, "Destination directory")->required()->type_name("DIR");
    s->callback([dir, &ctx, &action] { action = [dir, &ctx] { return cmd_cache_export(*dir, ctx); }; });
  }
  {
    auto dir = std::make_shared<std::string>();
    CLI::App* s = cache->add_subcommand("import", "Copy every valid entry of DIR into the writable directory");
    s->add_option("dir", *dir, "Source directory")->required()->type_name("DIR");
    s->callback([dir, &ctx, &action] { action = [dir, &ctx] { return cmd_cache_import(*dir, ctx); }; });
  }
  {
    auto layers = std::make_shared<bool>(false);
    CLI::App* s = cache->add_subcommand("path", "Print the writable cache directory");
    s->add_flag("--layers", *layers, "Print the read-only layers instead, one per line");
    s->callback([layers, &ctx, &action] { action = [layers, &ctx] { return cmd_cache_path(*layers, ctx); }; });
  }
  cache->footer(
      "Examples:\n  flashjit cache list\n  flashjit cache info fwd_sm90a_bf16_d128_none_sm90_bm128_bn176\n"
      "  flashjit cache prune --max-bytes 2G\n  flashjit cache export ./shipped-kernels");
}

}  // namespace flashjit::cli
