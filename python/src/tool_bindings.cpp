// precompile and the cache maintenance functions. precompile runs the CLI library's command with
// captured streams (its progress lines go to a Python callable, its JSON summary to a file), so
// Python and `flashjit precompile` build the same plan the same way; the cache functions use the
// process-wide store the runtime uses.
#include "bindings.hpp"

#include "cache/env_options.hpp"
#include "cache/store.hpp"
#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "line_stream.hpp"
#include "runtime/artifact.hpp"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace flashjit::python {

namespace {

std::pair<int, std::string> precompile(const std::string& manifest, int jobs, const std::vector<std::string>& archs,
                                       const std::string& shard, bool keep_going, const std::string& json_summary,
                                       nb::object progress) {
  // Progress lines arrive from the worker threads; each call takes the GIL, and the first
  // exception the callable raises is re-raised once the command has finished.
  std::optional<nb::python_error> callback_error;
  auto on_line = [&](const std::string& line) {
    if (progress.is_none()) return;
    nb::gil_scoped_acquire gil;
    if (callback_error) return;
    try {
      progress(line);
    } catch (nb::python_error& e) {
      callback_error.emplace(std::move(e));
    }
  };
  std::ostringstream out;
  int rc = 0;
  {
    LineStreamBuf err_buf(on_line);
    std::ostream err(&err_buf);
    nb::gil_scoped_release release;
    cli::Context ctx{out, err};
    cli::PrecompileOptions o;
    o.manifest = manifest;
    o.jobs = jobs;
    o.archs = archs;
    o.shard = shard;
    o.keep_going = keep_going;
    o.json_summary = json_summary;
    rc = cli::cmd_precompile(o, ctx);
  }
  if (callback_error) throw *callback_error;
  return {rc, out.str()};
}

cache::DiskStore& store() { return default_store(); }

nb::list verify(bool remove) {
  cache::VerifyReport report;
  {
    nb::gil_scoped_release release;
    report = store().verify(remove, artifact_entry_check());
  }
  nb::list result;
  for (const auto& e : report.bad) {
    nb::dict d;
    d["path"] = e.path.string();
    d["key"] = e.key;
    d["name"] = e.name;
    d["bytes"] = e.bytes;
    d["read_only"] = e.read_only;
    d["problem"] = e.problem;
    d["removed"] = e.removed;
    d["remove_error"] = e.remove_error;
    result.append(d);
  }
  return result;
}

}  // namespace

void register_tools(nb::module_& m) {
  m.def("precompile", &precompile, nb::arg("manifest"), nb::arg("jobs"), nb::arg("archs"), nb::arg("shard"),
        nb::arg("keep_going"), nb::arg("json_summary"), nb::arg("progress").none(),
        "Runs `flashjit precompile` in this process: returns (exit code, summary text) and writes "
        "the JSON summary to json_summary; progress(line) gets each line of the progress log.");

  m.def("cache_dir", [] { return store().options().dir.string(); }, "The writable cache directory.");
  m.def("cache_layers",
        [] {
          std::vector<std::string> layers;
          for (const auto& l : store().options().layers) layers.push_back(l.string());
          return layers;
        },
        "The read-only layers, in lookup order ($FLASHJIT_CACHE_PATH).");
  m.def("cache_offline", [] { return store().options().offline; }, "A miss is an error ($FLASHJIT_OFFLINE).");
  m.def("cache_max_bytes", [] { return store().options().max_bytes; }, "The size cap; 0: none.");
  m.def("cache_list",
        [] {
          std::ostringstream out, err;
          cli::Context ctx{out, err};
          cli::cmd_cache_list(true, ctx);
          return out.str();
        },
        nb::call_guard<nb::gil_scoped_release>(), "`flashjit cache list --json`: every entry of every layer.");
  m.def("cache_verify", &verify, nb::arg("remove") = false,
        "Checks every entry; returns the invalid ones (removing those of the writable directory if asked).");
  m.def(
      "cache_prune",
      [](std::uint64_t max_bytes) {
        const cache::Cleanup c = store().prune(max_bytes);
        return std::make_pair(c.bytes, c.failures);
      },
      nb::arg("max_bytes"), nb::call_guard<nb::gil_scoped_release>(),
      "Evicts least recently used entries: (bytes freed, removals that failed as 'path: why').");
  m.def(
      "cache_clear",
      [] {
        const cache::Cleanup c = store().clear();
        return std::make_pair(c.entries, c.failures);
      },
      nb::call_guard<nb::gil_scoped_release>(),
      "Deletes every entry of the writable directory: (entries removed, removals that failed).");
  m.def("cache_export", [](const std::string& dir) { return store().export_to(dir, artifact_entry_check()); },
        nb::arg("dir"), nb::call_guard<nb::gil_scoped_release>(),
        "Copies every valid entry to dir (a read-only layer to ship); returns how many.");
  m.def(
      "cache_import",
      [](const std::string& dir) {
        const cache::ImportReport r = store().import_from(dir, artifact_entry_check());
        return std::make_pair(r.imported, r.skipped);
      },
      nb::arg("dir"), nb::call_guard<nb::gil_scoped_release>(),
      "Copies every valid entry of dir into the writable directory: (imported, files skipped as 'path: why').");
  m.def("parse_byte_size",
        [](const std::string& what, const std::string& text) { return cache::parse_byte_size(what, text); },
        nb::arg("what"), nb::arg("text"), "\"512M\", \"2G\", ... as bytes (powers of 1024).");
}

}  // namespace flashjit::python
