#include "cache/file_lock.hpp"

#include "cache/file_io.hpp"
#include "cache/printable.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace flashjit::cache {

struct detail::LocalLock {
  std::mutex mutex;
  std::condition_variable freed;
  bool held = false;
};

namespace {

using Clock = std::chrono::steady_clock;

std::mutex& locals_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, std::weak_ptr<detail::LocalLock>>& locals() {
  static std::unordered_map<std::string, std::weak_ptr<detail::LocalLock>> s;
  return s;
}

bool same_file(int fd, const TrustedDir& dir, const std::string& name) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::fstatat(dir.fd(), name.c_str(), &b, AT_SYMLINK_NOFOLLOW) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

FileLock::FileLock(const std::filesystem::path& path, double timeout_s, const Sharing& sharing)
    : path_(path), name_(path.filename().string()) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                         std::clamp(timeout_s, 0.0, 1e9)));
  {
    std::lock_guard<std::mutex> g(locals_mutex());
    auto& weak = locals()[path_.string()];
    local_ = weak.lock();
    if (!local_) weak = local_ = std::make_shared<detail::LocalLock>();
  }
  {
    std::unique_lock<std::mutex> g(local_->mutex);
    if (!local_->freed.wait_until(g, deadline, [&] { return !local_->held; })) return;  // timed_out
    local_->held = true;
  }

  dir_ = TrustedDir::open(path_.parent_path(), sharing, Create::private_dir);
  if (!dir_.ok()) {
    status_ = Status::unavailable;
    error_ = "cannot use the lock directory " + printable(path_.parent_path().string()) + ": " + dir_.problem();
    return;
  }
  auto sleep = std::chrono::milliseconds(1);
  for (;;) {
    if (fd_ < 0) {
      // read-only is enough for flock, and works on a lock file a group member created
      fd_ = ::openat(dir_.fd(), name_.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                     lock_file_mode(sharing));
      struct stat st {};
      if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int err = errno;
        status_ = Status::unavailable;
        error_ = fd_ < 0 ? "cannot open lock file " + printable(path_.string()) + ": " + errno_text(err)
                         : "lock file " + printable(path_.string()) + " is " + file_type_name(st.st_mode) +
                               ", not a regular file";
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        return;
      }
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      if (same_file(fd_, dir_, name_)) {
        status_ = Status::locked;
        return;
      }
      // The holder we waited for unlinked it on release: lock the current file instead.
      ::close(fd_);
      fd_ = -1;
      continue;
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {
      ::close(fd_);
      fd_ = -1;
      status_ = Status::unavailable;
      error_ = "cannot lock " + path_.string() + ": " + errno_text(err);
      return;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      ::close(fd_);
      fd_ = -1;
      release_local();
      return;  // timed_out
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(sleep, deadline - now));
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
}

void FileLock::release_local() {
  {
    std::lock_guard<std::mutex> g(local_->mutex);
    local_->held = false;
  }
  local_->freed.notify_one();
}

FileLock::~FileLock() {
  if (status_ == Status::locked) {
    ::unlinkat(dir_.fd(), name_.c_str(), 0);  // still holding it: waiters notice the inode change and retry
    ::close(fd_);
  }
  if (status_ != Status::timed_out) release_local();
  std::lock_guard<std::mutex> g(locals_mutex());
  local_.reset();
  auto it = locals().find(path_.string());
  if (it != locals().end() && it->second.expired()) locals().erase(it);
}

}  // namespace flashjit::cache
