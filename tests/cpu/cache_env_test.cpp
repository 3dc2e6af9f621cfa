// StoreOptions::from_env and the parsers behind it.
#include "cache/env_options.hpp"
#include "cache/store.hpp"
#include "cache_test_support.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>

namespace flashjit::cache::test {
namespace {

const std::initializer_list<std::pair<const char*, std::optional<std::string>>> kClean = {
    {"FLASHJIT_CACHE_DIR", std::nullopt},     {"FLASHJIT_CACHE_PATH", std::nullopt},
    {"FLASHJIT_OFFLINE", std::nullopt},       {"FLASHJIT_CACHE_MAX_BYTES", std::nullopt},
    {"FLASHJIT_LOCK_TIMEOUT", std::nullopt},  {"FLASHJIT_LOCK_DIR", std::nullopt},
    {"XDG_CACHE_HOME", std::nullopt}};

std::string invalid_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}

TEST(CacheEnv, Defaults) {
  ScratchDir scratch;
  ScopedEnv clean(kClean);
  ScopedEnv home({{"HOME", scratch.path().string()}});
  const StoreOptions o = StoreOptions::from_env();
  EXPECT_EQ(o.dir, scratch / ".cache" / "flashjit");
  EXPECT_TRUE(o.layers.empty());
  EXPECT_FALSE(o.offline);
  EXPECT_EQ(o.max_bytes, 0u);
  EXPECT_EQ(o.lock_timeout_s, 300);
  EXPECT_TRUE(o.lock_dir.empty());
}

TEST(CacheEnv, CacheDirPrecedence) {
  ScratchDir scratch;
  ScopedEnv clean(kClean);
  ScopedEnv vars({{"HOME", (scratch / "home").string()},
                  {"XDG_CACHE_HOME", (scratch / "xdg").string()},
                  {"FLASHJIT_CACHE_DIR", (scratch / "explicit").string()}});
  EXPECT_EQ(StoreOptions::from_env().dir, scratch / "explicit");
  ::unsetenv("FLASHJIT_CACHE_DIR");
  EXPECT_EQ(StoreOptions::from_env().dir, scratch / "xdg" / "flashjit");
  ::setenv("XDG_CACHE_HOME", "relative/ignored", 1);  // the XDG spec: relative paths are invalid
  EXPECT_EQ(StoreOptions::from_env().dir, scratch / "home" / ".cache" / "flashjit");
}

TEST(CacheEnv, UnusableHomeFallsBackToAPrivateTempDir) {
  ScratchDir scratch;
  ScopedEnv clean(kClean);
  ScopedEnv home({{"HOME", unwritable_dir(scratch).string()}, {"TMPDIR", scratch.path().string()}});
  LogCapture log;
  const fs::path dir = StoreOptions::from_env().dir;
  EXPECT_EQ(dir, scratch / ("flashjit-" + std::to_string(::geteuid())));
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_mode & 077, 0u);

  // a temp dir someone else could write is not used
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  const fs::path other = StoreOptions::from_env().dir;
  EXPECT_NE(other, dir);
  EXPECT_EQ(other.parent_path(), scratch.path());
  EXPECT_EQ(log.count_warnings({dir.string(), "not a private directory"}), 1u);
}

TEST(CacheEnv, LayersOfflineLockOptions) {
  ScopedEnv clean(kClean);
  ScopedEnv vars({{"FLASHJIT_CACHE_DIR", "/tmp/x"},
                  {"FLASHJIT_CACHE_PATH", "/opt/flashjit/cache::/srv/shared:"},
                  {"FLASHJIT_OFFLINE", "1"},
                  {"FLASHJIT_LOCK_TIMEOUT", "2.5"},
                  {"FLASHJIT_LOCK_DIR", "/dev/shm/fj-locks"},
                  {"FLASHJIT_CACHE_MAX_BYTES", "512M"}});
  const StoreOptions o = StoreOptions::from_env();
  EXPECT_EQ(o.layers, (std::vector<fs::path>{"/opt/flashjit/cache", "/srv/shared"}));
  EXPECT_TRUE(o.offline);
  EXPECT_EQ(o.lock_timeout_s, 2.5);
  EXPECT_EQ(o.lock_dir, "/dev/shm/fj-locks");
  EXPECT_EQ(o.max_bytes, 512ull << 20);
  ::setenv("FLASHJIT_OFFLINE", "true", 1);
  EXPECT_TRUE(StoreOptions::from_env().offline);
  ::setenv("FLASHJIT_OFFLINE", "0", 1);
  EXPECT_FALSE(StoreOptions::from_env().offline);
}

TEST(CacheEnv, GarbageIsRejectedNamingTheVariableAndValue) {
  ScopedEnv clean(kClean);
  ScopedEnv dir({{"FLASHJIT_CACHE_DIR", "/tmp/x"}});
  {
    ScopedEnv v({{"FLASHJIT_CACHE_MAX_BYTES", "12Q"}});
    const std::string m = invalid_message([] { StoreOptions::from_env(); });
    EXPECT_NE(m.find("FLASHJIT_CACHE_MAX_BYTES"), std::string::npos) << m;
    EXPECT_NE(m.find("12Q"), std::string::npos) << m;
  }
  {
    ScopedEnv v({{"FLASHJIT_OFFLINE", "maybe"}});
    const std::string m = invalid_message([] { StoreOptions::from_env(); });
    EXPECT_NE(m.find("FLASHJIT_OFFLINE='maybe'"), std::string::npos) << m;
  }
  {
    ScopedEnv v({{"FLASHJIT_LOCK_TIMEOUT", "soon"}});
    const std::string m = invalid_message([] { StoreOptions::from_env(); });
    EXPECT_NE(m.find("FLASHJIT_LOCK_TIMEOUT='soon'"), std::string::npos) << m;
  }
}

TEST(CacheEnv, ByteSizes) {
  EXPECT_EQ(parse_byte_size("V", ""), 0u);
  EXPECT_EQ(parse_byte_size("V", "0"), 0u);
  EXPECT_EQ(parse_byte_size("V", "123"), 123u);
  EXPECT_EQ(parse_byte_size("V", "10k"), 10u << 10);
  EXPECT_EQ(parse_byte_size("V", "10K"), 10u << 10);
  EXPECT_EQ(parse_byte_size("V", "3M"), 3u << 20);
  EXPECT_EQ(parse_byte_size("V", "2g"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("V", "18446744073709551615"), ~0ull);
  for (const char* bad : {"abc", "12Q", "-1", "1.5G", " 5", "5 ", "K", "10KB", "0x10", "18446744073709551616",
                          "17179869184G"}) {
    const std::string m = invalid_message([&] { parse_byte_size("FLASHJIT_CACHE_MAX_BYTES", bad); });
    EXPECT_NE(m.find(std::string("FLASHJIT_CACHE_MAX_BYTES='") + bad + "'"), std::string::npos) << bad << ": " << m;
  }
}

TEST(CacheEnv, BoolsAndSeconds) {
  for (const char* t : {"1", "true", "TRUE", "yes", "on"}) EXPECT_TRUE(parse_bool("V", t)) << t;
  for (const char* f : {"", "0", "false", "No", "off"}) EXPECT_FALSE(parse_bool("V", f)) << f;
  EXPECT_THROW(parse_bool("V", "2"), std::invalid_argument);
  EXPECT_EQ(parse_seconds("V", "0"), 0.0);
  EXPECT_EQ(parse_seconds("V", "0.25"), 0.25);
  EXPECT_EQ(parse_seconds("V", "300"), 300.0);
  for (const char* bad : {"", "-1", "inf", "nan", "5s", " 5", "1e999"})
    EXPECT_THROW(parse_seconds("V", bad), std::invalid_argument) << bad;
}

TEST(CacheEnv, PathLists) {
  EXPECT_TRUE(parse_path_list("").empty());
  EXPECT_TRUE(parse_path_list(":::").empty());
  EXPECT_EQ(parse_path_list("/a"), std::vector<fs::path>{"/a"});
  EXPECT_EQ(parse_path_list("/a:b/c::/d/"), (std::vector<fs::path>{"/a", "b/c", "/d/"}));
}

}  // namespace
}  // namespace flashjit::cache::test
