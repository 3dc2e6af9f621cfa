// The cache side of the commands reports what happened: an item that could not be stored is a
// failure, a failed removal is named and fails the command, a hit names the file it came from,
// and names from the file system are printed escaped.
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cache/entry_file.hpp"
#include "cache/file_io.hpp"
#include "cli_test_support.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>

namespace flashjit::cli::test {
namespace {

using nlohmann::json;

const std::string kDefault = example("configs/default.json");

// Every write (or unlink) of the cache fails with err while alive, as on a full (or read-only)
// file system.
class ScopedIoFault {
 public:
  ScopedIoFault(cache::IoFault op, int err) : op_(op) { cache::inject_io_fault(op, err); }
  ~ScopedIoFault() { cache::inject_io_fault(op_, 0); }

 private:
  cache::IoFault op_;
};

std::string one_config_manifest(const Scratch& s) {
  return s.write("m.json", R"({"schema": "flashjit.manifest.v1", "archs": ["sm_80"],
                               "configs": [{"head_dim": {"qk": 64, "v": 64}}]})");
}

// A file that is not a directory: nothing can be created below it, whoever runs the test.
fs::path unwritable_dir(const Scratch& s) { return fs::path(s.write("a-file", "x")) / "cache"; }

TEST(CliPrecompile, AnItemThatCannotBeStoredIsAFailure) {
  Scratch s;
  const std::string manifest = one_config_manifest(s);
  const fs::path bad_dir = unwritable_dir(s);
  auto store = private_store(bad_dir);
  const std::string summary = (s / "summary.json").string();
  const Outcome o = cli(store.get(), {"precompile", manifest, "--json-summary", summary});
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_TRUE(contains(o.out, "failed      1")) << o.out;
  EXPECT_TRUE(contains(o.out, "compiled but not stored")) << o.out;
  EXPECT_TRUE(contains(o.out, bad_dir.string())) << o.out;
  const json j = json::parse(read_file(summary));
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["compiled"], 0);
  ASSERT_EQ(j["items"].size(), 1u);
  EXPECT_EQ(j["items"][0]["status"], "failed");
  EXPECT_FALSE(j["items"][0].contains("file")) << j.dump(2);
  EXPECT_TRUE(contains(j["items"][0]["error"].get<std::string>(), "is not a directory")) << j.dump(2);

  // a full disk says so, not "not writable"
  auto good = private_store(s / "cache");
  ScopedIoFault full(cache::IoFault::write, ENOSPC);
  const Outcome f = cli(good.get(), {"precompile", manifest});
  EXPECT_EQ(f.code, 1) << f.out << f.err;
  EXPECT_TRUE(contains(f.out, "No space left on device")) << f.out;
  EXPECT_FALSE(contains(f.out, "not writable")) << f.out;
}

TEST(CliCompile, SaysWhereTheEntryIsAndFailsWhenItIsNotStored) {
  Scratch s;
  auto store = private_store(s / "cache");
  const Outcome first = cli(store.get(), {"compile", kDefault, "--arch", "sm_80", "--json"});
  ASSERT_EQ(first.code, 0) << first.err;
  const fs::path file = json::parse(first.out)[0]["file"].get<std::string>();
  ASSERT_TRUE(fs::exists(file));

  // a corrupt copy in a layer searched first: the hit comes from the writable directory
  const fs::path layer = s / "layer";
  fs::create_directories(layer);
  fs::copy_file(file, layer / file.filename());
  fs::resize_file(layer / file.filename(), 100);
  cache::StoreOptions o = store->options();
  o.layers = {layer};
  cache::DiskStore layered(o);
  const Outcome hit = cli(&layered, {"compile", kDefault, "--arch", "sm_80"});
  ASSERT_EQ(hit.code, 0) << hit.err;
  EXPECT_TRUE(contains(hit.out, "status      cache hit")) << hit.out;
  EXPECT_TRUE(contains(hit.out, "cache file  " + file.string() + "\n")) << hit.out;

  // compiled, but the disk is full: not a success
  ScopedIoFault full(cache::IoFault::write, ENOSPC);
  auto fresh = private_store(s / "fresh");
  const Outcome full_disk = cli(fresh.get(), {"compile", kDefault, "--arch", "sm_80"});
  EXPECT_EQ(full_disk.code, 1);
  EXPECT_TRUE(contains(full_disk.out, "cache file  (not stored: cannot store ")) << full_disk.out;
  EXPECT_TRUE(contains(full_disk.out, "No space left on device")) << full_disk.out;
  EXPECT_TRUE(contains(full_disk.err, "compiled but not stored")) << full_disk.err;
  const Outcome as_json = cli(fresh.get(), {"compile", kDefault, "--arch", "sm_80", "--json"});
  EXPECT_EQ(as_json.code, 1);
  const json j = json::parse(as_json.out);
  EXPECT_TRUE(j[0]["file"].is_null());
  EXPECT_TRUE(contains(j[0]["store_error"].get<std::string>(), "No space left on device")) << j.dump(2);
}

// Stores a kernel entry "good" and one "broken" (its last byte cut off); returns the broken one.
fs::path store_good_and_broken(cache::DiskStore& store) {
  const cache::Key good = cache::KeyBuilder().add("t", "good").finish();
  const cache::Key broken = cache::KeyBuilder().add("t", "broken").finish();
  EXPECT_TRUE(store.store(good, "good", kernel_entry("good", "sm_80", good)));
  EXPECT_TRUE(store.store(broken, "broken", kernel_entry("broken", "sm_80", broken)));
  const fs::path file = store.entry_path(store.options().dir, broken, "broken");
  fs::resize_file(file, fs::file_size(file) - 1);
  return file;
}

TEST(CliCache, FailedRemovalsAreNamedAndFailTheCommand) {
  Scratch s;
  auto store = private_store(s / "cache");
  const fs::path bad = store_good_and_broken(*store);

  ScopedIoFault read_only(cache::IoFault::unlink, EROFS);
  Outcome o = cli(store.get(), {"cache", "verify", "--remove"});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.out, "(not removed: cannot remove " + bad.string() + ": Read-only file system)")) << o.out;
  EXPECT_TRUE(contains(o.out, "1 invalid, 0 removed")) << o.out;
  EXPECT_TRUE(fs::exists(bad));

  o = cli(store.get(), {"cache", "clear"});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.out, "removed 0 entries")) << o.out;
  EXPECT_TRUE(contains(o.err, "error: cannot remove " + bad.string() + ": Read-only file system")) << o.err;

  o = cli(store.get(), {"cache", "prune", "--max-bytes", "0"});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.out, "freed 0 B")) << o.out;
  EXPECT_TRUE(contains(o.err, "error: cannot remove ")) << o.err;
}

TEST(CliCache, NamesFromTheFileSystemArePrintedEscaped) {
  Scratch s;
  auto store = private_store(s / "cache");
  const cache::Key k = cache::KeyBuilder().add("t", "n").finish();
  ASSERT_TRUE(store->store(k, "kernel", kernel_entry("kernel", "sm_80", k)));
  const std::string evil = "evil\n\x1b[2J\x1b]0;pwned\x07." + k.hex + ".fjc";
  fs::copy_file(store->entry_path(s / "cache", k, "kernel"), s / "cache" / evil);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"cache", "list"}, {"cache", "list", "--json"}, {"cache", "verify"}}) {
    const Outcome o = cli(store.get(), args);
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << ::testing::PrintToString(args) << o.out;
    EXPECT_EQ(o.out.find('\x07'), std::string::npos) << ::testing::PrintToString(args) << o.out;
    EXPECT_FALSE(contains(o.out, "evil\n")) << ::testing::PrintToString(args) << o.out;
  }
  const Outcome listed = cli(store.get(), {"cache", "list"});
  EXPECT_TRUE(contains(listed.out, "evil\\n\\x1b[2J")) << listed.out;
  EXPECT_TRUE(contains(listed.out, "1 invalid")) << listed.out;
  EXPECT_NO_THROW(json::parse(cli(store.get(), {"cache", "list", "--json"}).out));
}

TEST(CliCache, HostileEntriesAreErrorsNotCrashes) {
  Scratch s;
  auto store = private_store(s / "cache");
  const cache::Key deep = cache::KeyBuilder().add("t", "deep").finish();
  const cache::Key thin = cache::KeyBuilder().add("t", "thin").finish();
  const fs::path deep_file = store->entry_path(s / "cache", deep, "fwd_deep");
  fs::create_directories(s / "cache");
  std::ofstream(deep_file, std::ios::binary)
      << cache::encode_entry_raw(deep.hex, "fwd_deep", std::string(100000, '[') + std::string(100000, ']'), "x");
  json m = kernel_entry("fwd_thin", "sm_80", thin).manifest;
  m.erase("ptxas");
  std::ofstream(store->entry_path(s / "cache", thin, "fwd_thin"), std::ios::binary)
      << cache::encode_entry_raw(thin.hex, "fwd_thin", m.dump(), "x");

  Outcome o = cli(store.get(), {"cache", "info", "fwd_deep"});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.err, "nests deeper than 64 levels")) << o.err;
  o = cli(store.get(), {"cache", "info", "fwd_thin"});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.err, "manifest field ptxas is missing")) << o.err;
  o = cli(store.get(), {"cache", "verify"});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.out, "2 invalid")) << o.out;
  o = cli(store.get(), {"cache", "list"});
  EXPECT_EQ(o.code, 0);
  EXPECT_TRUE(contains(o.out, "INVALID: manifest field ptxas is missing")) << o.out;
}

TEST(CliCache, InfoShowsTheCopyALookupWouldLoad) {
  Scratch s;
  auto layer = private_store(s / "layer");
  const fs::path broken = store_good_and_broken(*layer);
  cache::StoreOptions o = layer->options();
  o.dir = s / "cache";
  o.layers = {s / "layer"};
  cache::DiskStore store(o);
  const cache::Key key = cache::KeyBuilder().add("t", "broken").finish();
  ASSERT_TRUE(store.store(key, "broken", kernel_entry("broken", "sm_80", key)));
  const Outcome info = cli(&store, {"cache", "info", "broken"});
  EXPECT_EQ(info.code, 0) << info.err;
  EXPECT_TRUE(contains(info.out, (s / "cache").string() + "/broken.")) << info.out;
  EXPECT_FALSE(contains(info.out, broken.string())) << info.out;
}

TEST(CliCache, ImportReportsWhatItSkippedAndFails) {
  Scratch s;
  auto src = private_store(s / "from");
  const fs::path broken = store_good_and_broken(*src);
  auto dst = private_store(s / "to");
  const Outcome o = cli(dst.get(), {"cache", "import", (s / "from").string()});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.out, "imported 1 entry")) << o.out;
  EXPECT_TRUE(contains(o.err, "error: not imported: " + broken.string())) << o.err;
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
