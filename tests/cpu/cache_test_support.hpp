// Helpers shared by the cache test files: a scratch directory, captured log lines, file bytes.
#pragma once

#include "cache/key.hpp"
#include "cache/log.hpp"
#include "cache/store.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace flashjit::cache::test {

namespace fs = std::filesystem;

// A fresh directory under the GoogleTest temp dir, removed (permissions restored) at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = (fs::path(::testing::TempDir()) / "flashjit-cache-XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0700);
    ::chmod(path_.c_str(), 0700);
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

// Collects every log line while alive (the process-wide sink is restored afterwards).
class LogCapture {
 public:
  LogCapture() {
    set_log_sink([this](LogLevel level, const std::string& m) {
      std::lock_guard<std::mutex> g(mutex_);
      lines_.emplace_back(level, m);
    });
  }
  ~LogCapture() { set_log_sink(nullptr); }
  std::vector<std::string> warnings() const {
    std::lock_guard<std::mutex> g(mutex_);
    std::vector<std::string> w;
    for (const auto& [level, m] : lines_)
      if (level == LogLevel::warn) w.push_back(m);
    return w;
  }
  // Warnings containing every one of the given strings.
  std::size_t count_warnings(std::initializer_list<std::string> parts) const {
    std::size_t n = 0;
    for (const auto& w : warnings()) {
      bool all = true;
      for (const auto& p : parts) all = all && w.find(p) != std::string::npos;
      n += all;
    }
    return n;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<LogLevel, std::string>> lines_;
};

// Sets (or unsets) environment variables for one test; restores them afterwards.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      if (value) ::setenv(name, value->c_str(), 1);
      else ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// A umask for one test (000: whatever flashjit creates must still be private).
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

// Permission bits (with setgid and sticky) of a file, not following a link; -1 if absent.
inline int mode_of(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

inline Key key_of(const std::string& s) { return KeyBuilder().add("test", s).finish(); }

inline Entry make_entry(const std::string& tag, std::size_t binary_bytes = 256) {
  Entry e;
  e.manifest = {{"tag", tag}, {"kernel", "k_" + tag}, {"launch", {{"threads", 384}, {"smem", 1 << 17}}}};
  e.binary.resize(binary_bytes);
  for (std::size_t i = 0; i < binary_bytes; ++i) e.binary[i] = static_cast<char>((i * 131 + tag.size()) & 0xff);
  e.binary.replace(0, std::min(tag.size(), binary_bytes), tag.substr(0, binary_bytes));
  return e;
}

inline bool same(const Entry& a, const Entry& b) { return a.manifest == b.manifest && a.binary == b.binary; }

inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Sets a file's mtime to `seconds` since the epoch.
inline void set_mtime(const fs::path& p, std::int64_t seconds) {
  struct timespec t[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, 0), 0) << p;
}

inline std::int64_t mtime_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return -1;
  return st.st_mtim.tv_sec;
}

// A directory path that cannot be created or written even by root: it lies under a regular file.
inline fs::path unwritable_dir(const ScratchDir& scratch) {
  const fs::path file = scratch / "a-regular-file";
  write_bytes(file, "x");
  return file / "sub";
}

inline StoreOptions options_for(const fs::path& dir) {
  StoreOptions o;
  o.dir = dir;
  o.lock_timeout_s = 30;
  return o;
}

}  // namespace flashjit::cache::test
