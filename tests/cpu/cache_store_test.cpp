// DiskStore: hits, misses, fault handling, layers, offline mode, eviction, maintenance.
#include "cache/entry_file.hpp"
#include "cache/store.hpp"
#include "cache_test_support.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>

namespace flashjit::cache::test {
namespace {

std::vector<std::string> fjc_files(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".fjc") out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CacheStore, MissThenStoreThenHit) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch / "cache"));
  const Key key = key_of("a");
  EXPECT_FALSE(store.load(key, "fwd_sm90a_bf16_d128").has_value());
  const Entry e = make_entry("a");
  ASSERT_TRUE(store.store(key, "fwd_sm90a_bf16_d128", e));
  const fs::path path = store.entry_path(scratch / "cache", key, "fwd_sm90a_bf16_d128");
  EXPECT_EQ(path.filename().string(), "fwd_sm90a_bf16_d128." + key.hex + ".fjc");
  EXPECT_TRUE(fs::is_regular_file(path));
  const auto hit = store.load(key, "fwd_sm90a_bf16_d128");
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(same(*hit, e));
  // no temp file left behind
  EXPECT_EQ(std::distance(fs::directory_iterator(scratch / "cache"), fs::directory_iterator()), 1);
}

TEST(CacheStore, RoundTripKeepsManifestAndBinaryExactly) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  Entry e;
  e.manifest = {{"name", "fwd_\xc3\xa9t\xc3\xa9"}, {"nested", {{"list", {1, 2.5, nullptr, true}}}}, {"empty", ""}};
  for (int i = 0; i < (1 << 20); ++i) e.binary.push_back(static_cast<char>(i * 7 & 0xff));  // NULs included
  const Key key = key_of("big");
  ASSERT_TRUE(store.store(key, "big", e));
  const auto back = store.load(key, "big");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->manifest, e.manifest);
  EXPECT_EQ(back->binary, e.binary);

  Entry empty;  // null manifest, empty binary
  ASSERT_TRUE(store.store(key_of("empty"), "empty", empty));
  const auto back2 = store.load(key_of("empty"), "empty");
  ASSERT_TRUE(back2.has_value());
  EXPECT_TRUE(back2->manifest.is_null());
  EXPECT_TRUE(back2->binary.empty());
}

TEST(CacheStore, DifferentKeysAreDifferentFiles) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  ASSERT_TRUE(store.store(key_of("one"), "same_name", make_entry("one")));
  ASSERT_TRUE(store.store(key_of("two"), "same_name", make_entry("two")));
  EXPECT_EQ(fjc_files(scratch.path()).size(), 2u);
  EXPECT_TRUE(same(*store.load(key_of("one"), "same_name"), make_entry("one")));
  EXPECT_TRUE(same(*store.load(key_of("two"), "same_name"), make_entry("two")));
  EXPECT_FALSE(store.load(key_of("three"), "same_name").has_value());
}

TEST(CacheStore, GetOrCreateProducesOnceThenHits) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  int calls = 0;
  auto produce = [&] {
    ++calls;
    return make_entry("p");
  };
  bool produced = false;
  EXPECT_TRUE(same(store.get_or_create(key_of("p"), "p", produce, &produced), make_entry("p")));
  EXPECT_TRUE(produced);
  EXPECT_TRUE(same(store.get_or_create(key_of("p"), "p", produce, &produced), make_entry("p")));
  EXPECT_FALSE(produced);
  DiskStore other(options_for(scratch.path()));  // a second store (e.g. a new process) hits too
  EXPECT_TRUE(same(other.get_or_create(key_of("p"), "p", produce, &produced), make_entry("p")));
  EXPECT_FALSE(produced);
  EXPECT_EQ(calls, 1);
  // the lock file is gone again
  EXPECT_TRUE(fs::is_empty(scratch / ".locks"));
}

TEST(CacheStore, ProduceExceptionPropagatesAndReleasesTheLock) {
  ScratchDir scratch;
  auto o = options_for(scratch.path());
  o.lock_timeout_s = 0.5;
  DiskStore store(o);
  EXPECT_THROW(store.get_or_create(key_of("x"), "x", []() -> Entry { throw std::runtime_error("compile failed"); }),
               std::runtime_error);
  EXPECT_TRUE(fjc_files(scratch.path()).empty());
  bool produced = false;
  EXPECT_TRUE(same(store.get_or_create(key_of("x"), "x", [] { return make_entry("x"); }, &produced), make_entry("x")));
  EXPECT_TRUE(produced);
}

TEST(CacheStore, NamesAreSanitisedAndKeysChecked) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch / "c"));
  ASSERT_TRUE(store.store(key_of("n"), "../../etc/passwd x", make_entry("n")));
  const auto files = fjc_files(scratch / "c");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], "_._.._etc_passwd_x." + key_of("n").hex + ".fjc");  // no "/", no leading "."
  EXPECT_TRUE(store.load(key_of("n"), "../../etc/passwd x").has_value());
  EXPECT_THROW(store.load(Key{"../../x"}, "n"), std::invalid_argument);
  EXPECT_THROW(store.store(Key{std::string(64, 'G')}, "n", make_entry("n")), std::invalid_argument);
}

// ---- corruption: every kind is a miss with a warning, and get_or_create replaces the file ----

struct Fault {
  const char* label;
  std::function<void(const fs::path& file, const fs::path& other_keys_file)> inflict;
  const char* problem;  // expected in the warning
};

void flip(const fs::path& p, std::size_t offset) {
  std::string b = read_bytes(p);
  ASSERT_LT(offset, b.size());
  b[offset] = static_cast<char>(b[offset] ^ 0x5a);
  write_bytes(p, b);
}

const std::vector<Fault>& faults() {
  // The entry is make_entry("good"): manifest of a few dozen bytes, 256-byte binary.
  static const std::vector<Fault> f = {
      {"Truncated", [](const fs::path& p, const fs::path&) { fs::resize_file(p, fs::file_size(p) - 10); },
       "do not match the file size"},
      {"TruncatedInsideHeader", [](const fs::path& p, const fs::path&) { fs::resize_file(p, 40); }, "truncated"},
      {"ZeroLength", [](const fs::path& p, const fs::path&) { fs::resize_file(p, 0); }, "empty"},
      {"FlippedBinaryByte", [](const fs::path& p, const fs::path&) { flip(p, fs::file_size(p) - 7); },
       "checksum mismatch"},
      {"FlippedManifestByte", [](const fs::path& p, const fs::path&) { flip(p, kHeaderSize + 3); },
       "checksum mismatch"},
      {"FlippedChecksumByte", [](const fs::path& p, const fs::path&) { flip(p, 40); }, "checksum mismatch"},
      {"WrongMagic", [](const fs::path& p, const fs::path&) { flip(p, 2); }, "bad magic"},
      {"WrongVersion",
       [](const fs::path& p, const fs::path&) {
         std::string b = read_bytes(p);
         b[8] = static_cast<char>(kFormatVersion + 1);
         write_bytes(p, b);
       },
       "format version"},
      {"WrongHeaderSize", [](const fs::path& p, const fs::path&) { flip(p, 12); }, "header size"},
      {"ExtraBytesAppended",
       [](const fs::path& p, const fs::path&) { write_bytes(p, read_bytes(p) + "tail"); },
       "do not match the file size"},
      {"OtherKeysFile", [](const fs::path& p, const fs::path& other) { fs::copy_file(other, p, fs::copy_options::overwrite_existing); },
       "holds the entry of key"},
      {"ManifestNotJsonWithValidChecksum",
       [](const fs::path& p, const fs::path&) {
         const std::string key = parse_entry_file_name(p.filename().string())->key;
         write_bytes(p, encode_entry_raw(key, "victim", "{\"tag\": ", "binary"));
       },
       "not valid JSON"},
      {"Oversized", [](const fs::path& p, const fs::path&) { fs::resize_file(p, kMaxFileBytes + 1); },
       "larger than any cache entry"},
      {"NotAFileButADirectory",
       [](const fs::path& p, const fs::path&) {
         fs::remove(p);
         fs::create_directory(p);
       },
       "not a regular file"},
  };
  return f;
}

class CacheCorruption : public ::testing::TestWithParam<std::size_t> {};

TEST_P(CacheCorruption, IsAMissThenReplaced) {
  const Fault& fault = faults()[GetParam()];
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  const Key key = key_of("good"), other = key_of("other");
  ASSERT_TRUE(store.store(key, "victim", make_entry("good")));
  ASSERT_TRUE(store.store(other, "victim", make_entry("other")));
  const fs::path file = store.entry_path(scratch.path(), key, "victim");
  fault.inflict(file, store.entry_path(scratch.path(), other, "victim"));

  LogCapture log;
  EXPECT_FALSE(store.load(key, "victim").has_value());
  EXPECT_EQ(log.count_warnings({file.string(), fault.problem}), 1u) << ::testing::PrintToString(log.warnings());
  const bool is_dir = std::string(fault.label) == "NotAFileButADirectory";
  if (!is_dir) {
    EXPECT_FALSE(fs::exists(file)) << "bad file not removed";
    ASSERT_TRUE(store.store(key, "victim", make_entry("good")));  // and break it again, for get_or_create
    fault.inflict(file, store.entry_path(scratch.path(), other, "victim"));
  } else {
    EXPECT_TRUE(fs::is_directory(file)) << "a directory is not ours to delete";
    fs::remove(file);
  }
  Entry fresh = make_entry("fresh");
  bool produced = false;
  const Entry got = store.get_or_create(key, "victim", [&] { return fresh; }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_TRUE(same(got, fresh));
  const auto again = store.load(key, "victim");
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(same(*again, fresh));
  // the other key's entry is untouched
  EXPECT_TRUE(same(*store.load(other, "victim"), make_entry("other")));
}

INSTANTIATE_TEST_SUITE_P(Faults, CacheCorruption, ::testing::Range<std::size_t>(0, faults().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& i) { return faults()[i.param].label; });

TEST(CacheStore, EveryByteFlipAndEveryTruncationIsDetected) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  const Key key = key_of("small");
  Entry e;
  e.manifest = {{"k", 1}};
  e.binary = "cubin bytes";
  ASSERT_TRUE(store.store(key, "s", e));
  const fs::path file = store.entry_path(scratch.path(), key, "s");
  const std::string good = read_bytes(file);
  LogCapture quiet;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      write_bytes(file, bad);
      EXPECT_FALSE(store.load(key, "s").has_value()) << "flip at byte " << i;
    }
  }
  for (std::size_t n = 0; n < good.size(); ++n) {
    write_bytes(file, good.substr(0, n));
    EXPECT_FALSE(store.load(key, "s").has_value()) << "truncated to " << n;
  }
  write_bytes(file, good);
  EXPECT_TRUE(store.load(key, "s").has_value());
}

TEST(CacheStore, EntryDeletedBetweenStoreAndLoadIsAQuietMiss) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  ASSERT_TRUE(store.store(key_of("d"), "d", make_entry("d")));
  fs::remove(store.entry_path(scratch.path(), key_of("d"), "d"));
  LogCapture log;
  EXPECT_FALSE(store.load(key_of("d"), "d").has_value());
  EXPECT_TRUE(log.warnings().empty());
  // the whole cache directory gone
  fs::remove_all(scratch.path());
  EXPECT_FALSE(store.load(key_of("d"), "d").has_value());
  bool produced = false;
  store.get_or_create(key_of("d"), "d", [] { return make_entry("d"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_TRUE(store.load(key_of("d"), "d").has_value());
}

TEST(CacheStore, HitInWritableDirTouchesMtime) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  ASSERT_TRUE(store.store(key_of("t"), "t", make_entry("t")));
  const fs::path file = store.entry_path(scratch.path(), key_of("t"), "t");
  set_mtime(file, 1'000'000);
  ASSERT_TRUE(store.load(key_of("t"), "t").has_value());
  EXPECT_GT(mtime_of(file), 1'000'000);
}

// ---- read-only layers ----

TEST(CacheStore, ReadOnlyLayerIsSearchedFirstAndNeverWritten) {
  ScratchDir scratch;
  const fs::path layer = scratch / "layer", dir = scratch / "rw";
  {
    DiskStore builder(options_for(layer));
    ASSERT_TRUE(builder.store(key_of("shared"), "k", make_entry("from-layer")));
    ASSERT_TRUE(builder.store(key_of("layer-only"), "k", make_entry("layer-only")));
    ASSERT_TRUE(builder.store(key_of("bad-in-layer"), "k", make_entry("x")));
    ASSERT_TRUE(builder.store(key_of("bad-only-in-layer"), "k", make_entry("y")));
  }
  const fs::path bad_in_layer = DiskStore(options_for(layer)).entry_path(layer, key_of("bad-in-layer"), "k");
  const fs::path bad_only = DiskStore(options_for(layer)).entry_path(layer, key_of("bad-only-in-layer"), "k");
  flip(bad_in_layer, kHeaderSize + 1);
  flip(bad_only, 0);
  for (const auto& f : fs::directory_iterator(layer)) set_mtime(f.path(), 2'000'000);
  ASSERT_EQ(::chmod(layer.c_str(), 0555), 0);

  auto o = options_for(dir);
  o.layers = {scratch / "does-not-exist", layer};
  DiskStore store(o);
  ASSERT_TRUE(store.store(key_of("shared"), "k", make_entry("from-dir")));
  ASSERT_TRUE(store.store(key_of("bad-in-layer"), "k", make_entry("good-in-dir")));

  EXPECT_TRUE(same(*store.load(key_of("shared"), "k"), make_entry("from-layer")));
  bool produced = true;
  EXPECT_TRUE(same(store.get_or_create(key_of("layer-only"), "k", [] { return make_entry("no"); }, &produced),
                   make_entry("layer-only")));
  EXPECT_FALSE(produced);
  for (const auto& f : fs::directory_iterator(layer)) EXPECT_EQ(mtime_of(f.path()), 2'000'000) << "layer touched";

  LogCapture log;
  EXPECT_TRUE(same(*store.load(key_of("bad-in-layer"), "k"), make_entry("good-in-dir")));
  EXPECT_EQ(log.count_warnings({bad_in_layer.string(), "read-only layer"}), 1u);
  EXPECT_TRUE(fs::exists(bad_in_layer));

  // a bad layer file is skipped by get_or_create too, warned about once, and the kernel rebuilt
  EXPECT_TRUE(same(store.get_or_create(key_of("bad-only-in-layer"), "k", [] { return make_entry("rebuilt"); },
                                       &produced),
                   make_entry("rebuilt")));
  EXPECT_TRUE(produced);
  EXPECT_EQ(log.count_warnings({bad_only.string(), "bad magic", "read-only layer"}), 1u)
      << ::testing::PrintToString(log.warnings());
  EXPECT_TRUE(fs::exists(bad_only));
  EXPECT_TRUE(same(*store.load(key_of("bad-only-in-layer"), "k"), make_entry("rebuilt")));

  // a produced entry goes to the writable directory
  store.get_or_create(key_of("new"), "k", [] { return make_entry("new"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_TRUE(fs::exists(store.entry_path(dir, key_of("new"), "k")));
  EXPECT_FALSE(fs::exists(store.entry_path(layer, key_of("new"), "k")));

  // eviction and clear never touch the layer
  auto capped = o;
  capped.max_bytes = 1;
  DiskStore(capped).prune(0);
  DiskStore(capped).clear();
  EXPECT_EQ(fjc_files(layer).size(), 4u);
  EXPECT_TRUE(fjc_files(dir).empty());
}

// ---- offline mode ----

TEST(CacheStore, OfflineMissThrowsNamingTheConfig) {
  ScratchDir scratch;
  const fs::path layer = scratch / "layer";
  DiskStore(options_for(layer)).store(key_of("shipped"), "fwd_shipped", make_entry("shipped"));
  auto o = options_for(scratch / "rw");
  o.offline = true;
  o.layers = {layer};
  DiskStore store(o);
  int calls = 0;
  auto produce = [&] {
    ++calls;
    return make_entry("never");
  };
  EXPECT_TRUE(same(store.get_or_create(key_of("shipped"), "fwd_shipped", produce), make_entry("shipped")));
  try {
    store.get_or_create(key_of("missing"), "fwd_sm90a_bf16_d128_causal", produce);
    FAIL() << "expected MissError";
  } catch (const MissError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fwd_sm90a_bf16_d128_causal"), std::string::npos) << m;
    EXPECT_NE(m.find(key_of("missing").hex), std::string::npos) << m;
    EXPECT_NE(m.find("FLASHJIT_OFFLINE=1"), std::string::npos) << m;
    EXPECT_NE(m.find(layer.string()), std::string::npos) << m;
    EXPECT_NE(m.find((scratch / "rw").string()), std::string::npos) << m;
  }
  EXPECT_EQ(calls, 0);
}

TEST(CacheStore, OfflineMissReportsARejectedFile) {
  ScratchDir scratch;
  const fs::path layer = scratch / "layer";
  DiskStore(options_for(layer)).store(key_of("k"), "name", make_entry("k"));
  const fs::path file = DiskStore(options_for(layer)).entry_path(layer, key_of("k"), "name");
  flip(file, 0);
  auto o = options_for(scratch / "rw");
  o.offline = true;
  o.layers = {layer};
  LogCapture quiet;
  try {
    DiskStore(o).get_or_create(key_of("k"), "name", [] { return make_entry("never"); });
    FAIL() << "expected MissError";
  } catch (const MissError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + ": bad magic"), std::string::npos) << e.what();
  }
}

// ---- eviction ----

TEST(CacheStore, EvictionKeepsTheMostRecentlyUsed) {
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  auto o = options_for(dir);
  DiskStore uncapped(o);
  ASSERT_TRUE(uncapped.store(key_of("A"), "A", make_entry("A", 1000)));
  const std::uint64_t one = fs::file_size(uncapped.entry_path(dir, key_of("A"), "A"));
  o.max_bytes = one * 3 + one / 2;  // room for three entries
  DiskStore store(o);
  ASSERT_TRUE(store.store(key_of("B"), "B", make_entry("B", 1000)));
  ASSERT_TRUE(store.store(key_of("C"), "C", make_entry("C", 1000)));
  ASSERT_EQ(fjc_files(dir).size(), 3u);
  const std::int64_t now = std::time(nullptr);
  set_mtime(store.entry_path(dir, key_of("A"), "A"), now - 300);
  set_mtime(store.entry_path(dir, key_of("B"), "B"), now - 200);
  set_mtime(store.entry_path(dir, key_of("C"), "C"), now - 100);
  ASSERT_TRUE(store.load(key_of("A"), "A").has_value());  // A is now the most recently used

  ASSERT_TRUE(store.store(key_of("D"), "D", make_entry("D", 1000)));
  EXPECT_FALSE(store.load(key_of("B"), "B").has_value()) << "least recently used entry survived";
  for (const char* k : {"A", "C", "D"}) EXPECT_TRUE(fs::exists(store.entry_path(dir, key_of(k), k))) << k;

  set_mtime(store.entry_path(dir, key_of("A"), "A"), now - 50);
  set_mtime(store.entry_path(dir, key_of("D"), "D"), now - 40);
  ASSERT_TRUE(store.store(key_of("E"), "E", make_entry("E", 1000)));
  EXPECT_FALSE(fs::exists(store.entry_path(dir, key_of("C"), "C")));
  for (const char* k : {"A", "D", "E"}) EXPECT_TRUE(fs::exists(store.entry_path(dir, key_of(k), k))) << k;
}

TEST(CacheStore, EvictionNeverRemovesTheEntryJustWritten) {
  ScratchDir scratch;
  auto o = options_for(scratch.path());
  o.max_bytes = 10;  // smaller than any entry
  DiskStore store(o);
  ASSERT_TRUE(store.store(key_of("old"), "old", make_entry("old")));
  ASSERT_TRUE(store.store(key_of("new"), "new", make_entry("new")));
  EXPECT_EQ(fjc_files(scratch.path()), std::vector<std::string>{"new." + key_of("new").hex + ".fjc"});
  EXPECT_TRUE(store.load(key_of("new"), "new").has_value());
}

TEST(CacheStore, PruneEvictsOldestFirstAndReportsBytes) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  const std::int64_t now = std::time(nullptr);
  std::uint64_t total = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string k = "e" + std::to_string(i);
    ASSERT_TRUE(store.store(key_of(k), k, make_entry(k, 500)));
    set_mtime(store.entry_path(scratch.path(), key_of(k), k), now - 1000 + i);
    total += fs::file_size(store.entry_path(scratch.path(), key_of(k), k));
  }
  const std::uint64_t each = total / 5;
  EXPECT_EQ(store.prune(total).bytes, 0u);
  EXPECT_EQ(store.prune(total - 1).bytes, each);  // one entry goes: e0
  EXPECT_FALSE(store.load(key_of("e0"), "e0").has_value());
  EXPECT_EQ(store.prune(each * 2).bytes, each * 2);  // e1, e2
  EXPECT_EQ(fjc_files(scratch.path()).size(), 2u);
  EXPECT_TRUE(store.load(key_of("e3"), "e3").has_value());
  EXPECT_TRUE(store.load(key_of("e4"), "e4").has_value());
}

// ---- an unusable writable directory ----

TEST(CacheStore, UnwritableDirStoreFailsOnceLoudlyAndGetOrCreateStillWorks) {
  ScratchDir scratch;
  fs::path dir = scratch / "ro";
  fs::create_directory(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0500), 0);
  if (::access(dir.c_str(), W_OK) == 0) dir = unwritable_dir(scratch);  // root ignores the mode
  DiskStore store(options_for(dir));
  LogCapture log;
  EXPECT_FALSE(store.store(key_of("u"), "u", make_entry("u")));
  EXPECT_FALSE(store.store(key_of("v"), "v", make_entry("v")));
  EXPECT_EQ(log.count_warnings({dir.string()}), 1u) << ::testing::PrintToString(log.warnings());
  ASSERT_EQ(log.warnings().size(), 1u);
  const std::string w = log.warnings()[0];
  EXPECT_TRUE(w.find("ermission denied") != std::string::npos || w.find("ot a directory") != std::string::npos) << w;

  int calls = 0;
  bool produced = false;
  const Entry got = store.get_or_create(key_of("u"), "u", [&] { ++calls; return make_entry("u"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_TRUE(same(got, make_entry("u")));
  EXPECT_FALSE(store.load(key_of("u"), "u").has_value());
  EXPECT_NO_THROW(store.clear());
  EXPECT_NO_THROW(store.prune(0));
  EXPECT_TRUE(store.list().empty());
}

// ---- maintenance ----

TEST(CacheStore, ListAndVerifyReportBadFiles) {
  ScratchDir scratch;
  const fs::path layer = scratch / "layer", dir = scratch / "rw";
  DiskStore(options_for(layer)).store(key_of("L"), "L", make_entry("L"));
  auto o = options_for(dir);
  o.layers = {layer};
  DiskStore store(o);
  ASSERT_TRUE(store.store(key_of("a"), "a", make_entry("a")));
  ASSERT_TRUE(store.store(key_of("b"), "b", make_entry("b")));
  flip(store.entry_path(dir, key_of("b"), "b"), fs::file_size(store.entry_path(dir, key_of("b"), "b")) - 1);
  write_bytes(dir / "junk.fjc", "not an entry");

  // A listing reads headers and manifests: the flipped last byte of b's binary is not seen.
  const auto all = store.list();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE(all[0].read_only);
  EXPECT_TRUE(all[0].valid);
  EXPECT_EQ(all[0].name, "L");
  EXPECT_EQ(all[0].manifest, make_entry("L").manifest);
  int valid = 0;
  for (const auto& i : all) {
    valid += i.valid;
    EXPECT_GT(i.bytes, 0u);
    if (i.valid) {
      EXPECT_GT(i.last_used, 0);
    }
    if (i.path.filename() == "junk.fjc") {
      EXPECT_NE(i.problem.find("file name"), std::string::npos);
    }
  }
  EXPECT_EQ(valid, 3);
  const auto b_listed = std::find_if(all.begin(), all.end(), [](const EntryInfo& i) { return i.name == "b"; });
  ASSERT_NE(b_listed, all.end());
  const EntryInfo b_checked = store.inspect(*b_listed);
  EXPECT_FALSE(b_checked.valid);
  EXPECT_EQ(b_checked.key, key_of("b").hex);
  EXPECT_NE(b_checked.problem.find("checksum"), std::string::npos) << b_checked.problem;

  auto report = store.verify(false);
  EXPECT_EQ(report.checked, 4u);
  EXPECT_EQ(report.bad.size(), 2u);
  EXPECT_EQ(fjc_files(dir).size(), 3u);
  report = store.verify(true);
  EXPECT_EQ(report.bad.size(), 2u);
  for (const auto& b : report.bad) EXPECT_TRUE(b.removed) << b.path << ": " << b.remove_error;
  EXPECT_EQ(fjc_files(dir), std::vector<std::string>{"a." + key_of("a").hex + ".fjc"});
  EXPECT_TRUE(store.verify(false).bad.empty());
}

TEST(CacheStore, ClearRemovesEntriesStaleTempsAndUnheldLocks) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  for (const char* k : {"x", "y", "z"}) ASSERT_TRUE(store.store(key_of(k), k, make_entry(k)));
  write_bytes(scratch / ".fjc-tmp.1.2.3.4", "stale");
  set_mtime(scratch / ".fjc-tmp.1.2.3.4", std::time(nullptr) - 7200);
  write_bytes(scratch / ".fjc-tmp.5.6.7.8", "in flight");
  fs::create_directories(scratch / ".locks");
  write_bytes(scratch / ".locks" / (key_of("x").hex + ".lock"), "");
  write_bytes(scratch / "unrelated.txt", "keep");

  const Cleanup cleared = store.clear();
  EXPECT_EQ(cleared.entries, 3u);
  EXPECT_TRUE(cleared.failures.empty());
  EXPECT_TRUE(fjc_files(scratch.path()).empty());
  EXPECT_FALSE(fs::exists(scratch / ".fjc-tmp.1.2.3.4"));
  EXPECT_TRUE(fs::exists(scratch / ".fjc-tmp.5.6.7.8"));  // may belong to a live writer
  EXPECT_FALSE(fs::exists(scratch / ".locks" / (key_of("x").hex + ".lock")));
  EXPECT_TRUE(fs::exists(scratch / "unrelated.txt"));
  EXPECT_FALSE(store.load(key_of("x"), "x").has_value());
}

TEST(CacheStore, ExportImportRoundTrip) {
  ScratchDir scratch;
  const fs::path src_dir = scratch / "src", exported = scratch / "export", layer = scratch / "layer";
  auto so = options_for(src_dir);
  DiskStore(options_for(layer)).store(key_of("from-layer"), "fl", make_entry("fl"));
  DiskStore(options_for(layer)).store(key_of("both"), "both", make_entry("layer-copy"));
  so.layers = {layer};
  DiskStore src(so);
  for (const char* k : {"p", "q", "r"}) ASSERT_TRUE(src.store(key_of(k), k, make_entry(k)));
  ASSERT_TRUE(src.store(key_of("both"), "both", make_entry("dir-copy")));
  flip(src.entry_path(src_dir, key_of("r"), "r"), kHeaderSize);  // not exported

  LogCapture quiet;
  EXPECT_EQ(src.export_to(exported), 4u);  // fl, both, p, q -- r is corrupt
  EXPECT_EQ(fjc_files(exported).size(), 4u);
  EXPECT_FALSE(fs::exists(src.entry_path(exported, key_of("r"), "r")));
  for (const auto& f : fs::directory_iterator(exported))
    EXPECT_FALSE(f.path().filename().string().starts_with(".")) << "temp file left: " << f.path();

  // the export is usable as a read-only layer as it is
  ASSERT_EQ(::chmod(exported.c_str(), 0555), 0);
  auto lo = options_for(scratch / "fresh");
  lo.layers = {exported};
  lo.offline = true;
  DiskStore layered(lo);
  EXPECT_TRUE(same(*layered.load(key_of("both"), "both"), make_entry("layer-copy")));  // lookup order kept
  for (const char* k : {"p", "q"}) EXPECT_TRUE(same(*layered.load(key_of(k), k), make_entry(k)));
  EXPECT_TRUE(same(*layered.load(key_of("from-layer"), "fl"), make_entry("fl")));

  // and importable into another cache
  DiskStore dst(options_for(scratch / "dst"));
  EXPECT_EQ(dst.import_from(exported).imported, 4u);
  EXPECT_EQ(fjc_files(scratch / "dst").size(), 4u);
  for (const char* k : {"p", "q"}) EXPECT_TRUE(same(*dst.load(key_of(k), k), make_entry(k)));
  EXPECT_TRUE(dst.verify(false).bad.empty());
}

TEST(CacheStore, ImportSkipsInvalidEntriesWithAWarning) {
  ScratchDir scratch;
  const fs::path from = scratch / "from";
  DiskStore src(options_for(from));
  for (const char* k : {"good1", "good2", "bad"}) ASSERT_TRUE(src.store(key_of(k), k, make_entry(k)));
  const fs::path bad = src.entry_path(from, key_of("bad"), "bad");
  fs::resize_file(bad, fs::file_size(bad) - 1);
  const fs::path renamed = src.entry_path(from, key_of("renamed"), "renamed");
  fs::copy_file(src.entry_path(from, key_of("good1"), "good1"), renamed);  // content of another key

  DiskStore dst(options_for(scratch / "dst"));
  LogCapture log;
  const ImportReport r = dst.import_from(from);
  EXPECT_EQ(r.imported, 2u);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find(bad.string()), std::string::npos) << r.skipped[0];
  EXPECT_EQ(log.count_warnings({bad.string(), "not importing"}), 1u);
  // the copy under another key's name is good1's entry: imported once, under good1's name
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find(renamed.string()), std::string::npos) << r.notes[0];
  EXPECT_EQ(fjc_files(scratch / "dst").size(), 2u);
  EXPECT_TRUE(dst.load(key_of("good1"), "good1").has_value());
  EXPECT_TRUE(dst.load(key_of("good2"), "good2").has_value());
  EXPECT_FALSE(dst.load(key_of("bad"), "bad").has_value());
  EXPECT_FALSE(dst.load(key_of("renamed"), "renamed").has_value());
  EXPECT_THROW(dst.import_from(scratch / "no-such-dir"), std::runtime_error);
}

TEST(CacheStore, ExportToAnUnwritablePlaceThrows) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch / "c"));
  ASSERT_TRUE(store.store(key_of("e"), "e", make_entry("e")));
  EXPECT_THROW(store.export_to(unwritable_dir(scratch)), std::runtime_error);
}

}  // namespace
}  // namespace flashjit::cache::test
