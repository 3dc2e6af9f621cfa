// Hostile files in the cache: FIFOs, deep and huge manifests, manifests the caller rejects,
// sparse giants, misnamed copies. None may block, crash or load; a bad entry in the writable
// directory is a miss that is replaced.
#include "cache/entry_file.hpp"
#include "cache/file_lock.hpp"
#include "cache/store.hpp"
#include "cache_test_support.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flashjit::cache::test {
namespace {

// The check a caller of the cache might make: here, that the manifest has a "launch" object.
std::string needs_launch(const std::string&, const nlohmann::json& m) {
  return m.contains("launch") && m["launch"].is_object() ? "" : "manifest field launch is missing";
}

void write_entry_raw(const fs::path& file, const std::string& name, const std::string& manifest,
                     const std::string& binary = "bin") {
  const std::string key = parse_entry_file_name(file.filename().string())->key;
  write_bytes(file, encode_entry_raw(key, name, manifest, binary));
}

TEST(CacheHostileFiles, AFifoAtAnEntryNameNeverBlocks) {
  ScratchDir scratch;
  const fs::path layer = scratch / "layer", dir = scratch / "rw";
  fs::create_directories(layer);
  DiskStore(options_for(dir)).store(key_of("other"), "x", make_entry("other"));
  auto o = options_for(dir);
  o.layers = {layer};
  DiskStore store(o);
  const fs::path in_dir = store.entry_path(dir, key_of("f"), "f"), in_layer = store.entry_path(layer, key_of("f"), "f");
  ASSERT_EQ(::mkfifo(in_dir.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(in_layer.c_str(), 0600), 0);

  LogCapture log;
  EXPECT_FALSE(store.load(key_of("f"), "f").has_value());
  EXPECT_EQ(log.count_warnings({in_layer.string(), "is a FIFO", "left in place"}), 1u) << ::testing::PrintToString(log.warnings());
  EXPECT_EQ(log.count_warnings({in_dir.string(), "is a FIFO", "removed"}), 1u) << ::testing::PrintToString(log.warnings());
  EXPECT_FALSE(fs::exists(in_dir));
  EXPECT_TRUE(fs::exists(in_layer));
  ASSERT_EQ(::mkfifo(in_dir.c_str(), 0600), 0);
  bool produced = false;
  EXPECT_TRUE(same(store.get_or_create(key_of("f"), "f", [] { return make_entry("f"); }, &produced), make_entry("f")));
  EXPECT_TRUE(produced);
  EXPECT_TRUE(fs::is_regular_file(in_dir));

  // listing and verifying say what it is, and do not wait for a writer either
  const auto listed = store.list();
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_NE(listed[0].problem.find("is a FIFO, not a regular file"), std::string::npos) << listed[0].problem;
  EXPECT_EQ(store.verify(false).bad.size(), 1u);
}

TEST(CacheHostileFiles, AFifoAtTheLockPathDoesNotBlock) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  const Key key = key_of("l");
  fs::create_directories(scratch / ".locks");
  const fs::path lock = scratch / ".locks" / (key.hex + ".lock");
  ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0);
  LogCapture log;
  bool produced = false;
  store.get_or_create(key, "l", [] { return make_entry("l"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_EQ(log.count_warnings({lock.string(), "is a FIFO", "without a cross-process lock"}), 1u)
      << ::testing::PrintToString(log.warnings());
}

TEST(CacheHostileFiles, DeeplyNestedManifestsAreAMissNotACrash) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  const fs::path file = store.entry_path(scratch.path(), key_of("deep"), "deep");
  write_entry_raw(file, "deep", std::string(100000, '[') + std::string(100000, ']'));
  LogCapture log;
  const auto listed = store.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_NE(listed[0].problem.find("nests deeper than 64 levels"), std::string::npos) << listed[0].problem;
  EXPECT_EQ(store.verify(false).bad.size(), 1u);
  bool produced = false;
  store.get_or_create(key_of("deep"), "deep", [] { return make_entry("deep"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_EQ(log.count_warnings({file.string(), "nests deeper", "removed"}), 1u) << ::testing::PrintToString(log.warnings());
  EXPECT_TRUE(same(*store.load(key_of("deep"), "deep"), make_entry("deep")));
}

TEST(CacheHostileFiles, AManifestTheCallerRejectsIsAMissThatIsReplaced) {
  ScratchDir scratch;
  const fs::path layer = scratch / "layer", dir = scratch / "rw";
  Entry incomplete = make_entry("old");
  incomplete.manifest.erase("launch");
  ASSERT_TRUE(DiskStore(options_for(layer)).store(key_of("m"), "m", incomplete));
  auto o = options_for(dir);
  o.layers = {layer};
  DiskStore store(o);
  ASSERT_TRUE(store.store(key_of("m"), "m", incomplete));
  const fs::path in_dir = store.entry_path(dir, key_of("m"), "m"), in_layer = store.entry_path(layer, key_of("m"), "m");

  LogCapture log;
  EXPECT_TRUE(store.load(key_of("m"), "m").has_value()) << "the cache itself does not know the field";
  EXPECT_FALSE(store.load(key_of("m"), "m", needs_launch).has_value());
  EXPECT_EQ(log.count_warnings({in_layer.string(), "launch is missing", "left in place"}), 1u)
      << ::testing::PrintToString(log.warnings());
  EXPECT_EQ(log.count_warnings({in_dir.string(), "launch is missing", "removed"}), 1u)
      << ::testing::PrintToString(log.warnings());
  Provenance where;
  const Entry e = store.get_or_create(key_of("m"), "m", [] { return make_entry("new"); }, needs_launch, &where);
  EXPECT_TRUE(where.produced);
  EXPECT_EQ(where.file, in_dir);
  EXPECT_TRUE(same(*store.load(key_of("m"), "m", needs_launch), make_entry("new")));
  const VerifyReport r = store.verify(false, needs_launch);
  ASSERT_EQ(r.bad.size(), 1u);  // the layer's copy, left in place
  EXPECT_EQ(r.bad[0].path, in_layer);

  // an entry that would fail its own check is never stored (every load would rebuild it)
  EXPECT_THROW(store.get_or_create(key_of("n"), "n", [&] { return incomplete; }, needs_launch, nullptr), std::runtime_error);
  EXPECT_FALSE(fs::exists(store.entry_path(dir, key_of("n"), "n")));
}

TEST(CacheHostileFiles, AListingReadsHeadersAndManifestsOnly) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  // A 64 MiB entry whose binary is a hole, with a checksum that holds...
  const fs::path big = store.entry_path(scratch.path(), key_of("big"), "big");
  const std::string manifest = R"({"tag":"big"})";
  const std::string whole = encode_entry_raw(key_of("big").hex, "big", manifest, std::string(64 << 20, '\0'));
  write_bytes(big, whole.substr(0, kHeaderSize + manifest.size()));
  fs::resize_file(big, whole.size());
  EXPECT_TRUE(store.verify(false).bad.empty());
  // ... until its last byte changes: a listing does not read that far, a verify does
  {
    std::fstream f(big, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('x');
  }
  const auto listed = store.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].valid) << listed[0].problem;
  EXPECT_EQ(listed[0].bytes, whole.size());
  const VerifyReport r = store.verify(false);
  ASSERT_EQ(r.bad.size(), 1u);
  EXPECT_NE(r.bad[0].problem.find("checksum mismatch"), std::string::npos) << r.bad[0].problem;
  EXPECT_NE(store.inspect(listed[0]).problem.find("checksum mismatch"), std::string::npos);

  // a 1 GiB file is not an entry: refused from its size, never read
  const fs::path huge = store.entry_path(scratch.path(), key_of("huge"), "huge");
  write_bytes(huge, whole.substr(0, kHeaderSize));
  fs::resize_file(huge, std::uint64_t(1) << 30);
  for (const auto& i : store.list())
    if (i.path == huge) EXPECT_NE(i.problem.find("larger than any cache entry"), std::string::npos) << i.problem;
  LogCapture quiet;
  EXPECT_FALSE(store.load(key_of("huge"), "huge").has_value());
}

TEST(CacheHostileFiles, MisnamedCopiesAreReportedAsSuch) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  ASSERT_TRUE(store.store(key_of("a"), "a", make_entry("a")));
  const fs::path a = store.entry_path(scratch.path(), key_of("a"), "a");
  const fs::path renamed = store.entry_path(scratch.path(), key_of("a"), "b");  // same key, other name
  const fs::path rekeyed = store.entry_path(scratch.path(), key_of("z"), "a");  // other key
  fs::copy_file(a, renamed);
  fs::copy_file(a, rekeyed);
  for (const auto& i : store.list()) {
    if (i.path == a) EXPECT_TRUE(i.valid) << i.problem;
    else EXPECT_NE(i.problem.find("misnamed: it holds the entry " + a.filename().string()), std::string::npos) << i.problem;
  }
  EXPECT_EQ(store.verify(false).bad.size(), 2u);
  LogCapture quiet;
  EXPECT_FALSE(store.load(key_of("a"), "b").has_value());
  EXPECT_FALSE(store.load(key_of("z"), "a").has_value());
}

TEST(CacheHostileFiles, ImportNamesEntriesFromTheirVerifiedContents) {
  ScratchDir scratch;
  const fs::path from = scratch / "from";
  DiskStore src(options_for(from));
  ASSERT_TRUE(src.store(key_of("k"), "kernel", make_entry("k")));
  const fs::path good = src.entry_path(from, key_of("k"), "kernel");
  const fs::path evil = from / ("evil\n\x1b[31m." + key_of("k").hex + ".fjc");
  fs::copy_file(good, evil);
  DiskStore dst(options_for(scratch / "dst"));
  LogCapture quiet;
  const ImportReport r = dst.import_from(from);
  EXPECT_EQ(r.imported, 1u) << "two files of one key are one entry";
  EXPECT_TRUE(r.skipped.empty()) << ::testing::PrintToString(r.skipped);
  ASSERT_FALSE(r.notes.empty());
  for (const auto& n : r.notes) {
    EXPECT_EQ(n.find('\n'), std::string::npos) << n;
    EXPECT_EQ(n.find('\x1b'), std::string::npos) << n;
  }
  std::vector<std::string> names;
  for (const auto& f : fs::directory_iterator(scratch / "dst"))
    if (f.is_regular_file()) names.push_back(f.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{good.filename().string()});
  EXPECT_TRUE(same(*dst.load(key_of("k"), "kernel"), make_entry("k")));
}

}  // namespace
}  // namespace flashjit::cache::test
