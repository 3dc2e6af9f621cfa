// Per-key locking: timeouts that name the lock, lock-dir override and fallback, and races between
// threads and between processes that must end in exactly one produce().
#include "cache/entry_file.hpp"
#include "cache/file_lock.hpp"
#include "cache/store.hpp"
#include "cache_test_support.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <set>
#include <thread>

extern char** environ;

namespace flashjit::cache::test {
namespace {

// Holds an flock on path through its own open file description, as another process would.
class HeldFlock {
 public:
  explicit HeldFlock(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) != 0) throw std::runtime_error("cannot take " + path.string());
  }
  ~HeldFlock() { ::close(fd_); }

 private:
  int fd_ = -1;
};

std::string lock_timeout_message(DiskStore& store, const Key& key, bool* produced_flag) {
  try {
    store.get_or_create(key, "fwd_locked", [&] {
      *produced_flag = true;
      return make_entry("never");
    });
  } catch (const LockTimeout& e) {
    return e.what();
  }
  return "(no LockTimeout)";
}

TEST(CacheLock, TimeoutNamesTheLockFile) {
  ScratchDir scratch;
  auto o = options_for(scratch.path());
  o.lock_timeout_s = 0.2;
  DiskStore store(o);
  const Key key = key_of("locked");
  const fs::path lock = scratch / ".locks" / (key.hex + ".lock");
  HeldFlock held(lock);
  bool produced = false;
  const std::string m = lock_timeout_message(store, key, &produced);
  EXPECT_NE(m.find(lock.string()), std::string::npos) << m;
  EXPECT_NE(m.find("0.2 s"), std::string::npos) << m;
  EXPECT_NE(m.find("FLASHJIT_LOCK_TIMEOUT"), std::string::npos) << m;
  EXPECT_FALSE(produced);
  // a hit needs no lock
  ASSERT_TRUE(store.store(key, "fwd_locked", make_entry("k")));
  EXPECT_TRUE(same(store.get_or_create(key, "fwd_locked", [] { return make_entry("never"); }), make_entry("k")));
}

TEST(CacheLock, LockDirOverrideIsUsed) {
  ScratchDir scratch;
  auto o = options_for(scratch / "cache");
  o.lock_dir = scratch / "node-local-locks";
  o.lock_timeout_s = 0.05;
  DiskStore store(o);
  const Key key = key_of("k");
  const fs::path lock = o.lock_dir / (key.hex + ".lock");
  {
    HeldFlock held(lock);
    bool produced = false;
    const std::string m = lock_timeout_message(store, key, &produced);
    EXPECT_NE(m.find(lock.string()), std::string::npos) << m;
    EXPECT_FALSE(produced);
  }
  fs::remove(lock);
  bool produced = false;
  store.get_or_create(key, "k", [] { return make_entry("k"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_FALSE(fs::exists(scratch / "cache" / ".locks"));
}

TEST(CacheLock, AThreadHoldingTheKeyTimesOutAnotherThread) {
  ScratchDir scratch;
  const Key key = key_of("slow");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  std::thread holder([&] {
    DiskStore store(options_for(scratch.path()));
    store.get_or_create(key, "slow", [&] {
      entered.set_value();
      released.wait();
      return make_entry("slow");
    });
  });
  entered.get_future().wait();
  auto o = options_for(scratch.path());
  o.lock_timeout_s = 0.1;
  DiskStore impatient(o);
  bool produced = false;
  const std::string m = lock_timeout_message(impatient, key, &produced);
  EXPECT_NE(m.find(key.hex + ".lock"), std::string::npos) << m;
  EXPECT_FALSE(produced);
  release.set_value();
  holder.join();
  EXPECT_TRUE(same(impatient.get_or_create(key, "slow", [] { return make_entry("never"); }), make_entry("slow")));
}

TEST(CacheLock, UnusableLockDirFallsBackToProducingWithAWarning) {
  ScratchDir scratch;
  auto o = options_for(scratch / "cache");
  o.lock_dir = unwritable_dir(scratch);
  DiskStore store(o);
  LogCapture log;
  bool produced = false;
  EXPECT_TRUE(same(store.get_or_create(key_of("a"), "a", [] { return make_entry("a"); }, &produced), make_entry("a")));
  EXPECT_TRUE(produced);
  store.get_or_create(key_of("b"), "b", [] { return make_entry("b"); });
  EXPECT_EQ(log.count_warnings({o.lock_dir.string(), "without a cross-process lock"}), 1u)
      << ::testing::PrintToString(log.warnings());
  EXPECT_TRUE(store.load(key_of("a"), "a").has_value());
}

TEST(CacheLock, FileLockSerialisesThreadsAndRemovesItsFile) {
  ScratchDir scratch;
  const fs::path path = scratch / "locks" / "x.lock";
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        FileLock lock(path, 30);
        ASSERT_EQ(lock.status(), FileLock::Status::locked);
        const int now = ++inside;
        int seen = max_inside.load();
        while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {}
        std::this_thread::yield();
        --inside;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_FALSE(fs::exists(path));
  FileLock zero(path, 0);  // free: a zero timeout still gets it
  EXPECT_EQ(zero.status(), FileLock::Status::locked);
}

TEST(CacheLock, SixteenThreadsProduceOnce) {
  ScratchDir scratch;
  const Key key = key_of("race");
  DiskStore shared(options_for(scratch.path()));
  std::atomic<int> produces{0};
  std::latch start(16);
  std::vector<Entry> results(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      DiskStore own(options_for(scratch.path()));
      DiskStore& store = t % 2 ? shared : own;  // one store across threads, and one store each
      start.arrive_and_wait();
      results[t] = store.get_or_create(key, "race", [&] {
        ++produces;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return make_entry("race", 64 * 1024);
      });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(produces.load(), 1);
  for (const auto& r : results) EXPECT_TRUE(same(r, make_entry("race", 64 * 1024)));
}

TEST(CacheLock, SixteenProcessesProduceOnce) {
  ScratchDir scratch;
  const fs::path cache = scratch / "cache", markers = scratch / "markers", out = scratch / "out";
  fs::create_directories(markers);
  fs::create_directories(out);
  const std::string racer = std::string(FLASHJIT_TOOLS_DIR) + "/cache_racer";
  ASSERT_TRUE(fs::exists(racer)) << racer;

  constexpr int kProcs = 16;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcs; ++i) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string out_file = (out / (std::to_string(i) + ".out")).string();
    const std::string err_file = (out / (std::to_string(i) + ".err")).string();
    posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> args = {racer, cache.string(), "one-key", markers.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, racer.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ASSERT_EQ(rc, 0) << "posix_spawn: " << rc;
    pids.push_back(pid);
  }
  for (int i = 0; i < kProcs; ++i) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[i], &status, 0), pids[i]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "racer " << i << " failed: " << read_bytes(out / (std::to_string(i) + ".err"));
  }
  std::set<std::string> outputs;
  for (int i = 0; i < kProcs; ++i) outputs.insert(read_bytes(out / (std::to_string(i) + ".out")));
  EXPECT_EQ(outputs.size(), 1u) << ::testing::PrintToString(outputs);
  std::vector<std::string> marker_files;
  for (const auto& m : fs::directory_iterator(markers)) marker_files.push_back(m.path().filename().string());
  ASSERT_EQ(marker_files.size(), 1u) << "produce() ran more than once: " << ::testing::PrintToString(marker_files);
  // every racer printed "<sha256 of the binary> <pid of the producer>", and that producer left the marker
  const std::string& line = *outputs.begin();
  ASSERT_GT(line.size(), 66u) << line;
  EXPECT_TRUE(is_key_hex(line.substr(0, 64))) << line;
  EXPECT_EQ("produced-by-" + line.substr(65, line.size() - 66), marker_files[0]) << line;
  EXPECT_TRUE(fs::is_empty(cache / ".locks"));
}

}  // namespace
}  // namespace flashjit::cache::test
