// An exclusive lock on a lock file, between processes (flock) and between threads of this
// process (a mutex per lock path, in front of the flock).
//
// Acquire polls flock(LOCK_EX | LOCK_NB) with a short, growing sleep until the timeout. After
// taking the flock it checks that the path still names the locked inode (a releasing holder
// unlinks the file), so lock files do not pile up and a stuck lock can be broken by deleting it.
//
// The lock file's directory is opened as a TrustedDir (created private if missing) and the file
// is opened inside it without following a link or blocking, so nobody else can make a lock
// create or truncate a file elsewhere.
#pragma once

#include "cache/trusted_dir.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace flashjit::cache {

namespace detail {
struct LocalLock;  // the in-process lock, shared by every FileLock on one path
}

class FileLock {
 public:
  enum class Status {
    locked,       // both the in-process and the file lock are held
    timed_out,    // nothing is held
    unavailable,  // only the in-process lock is held; the lock file could not be used (error())
  };

  FileLock(const std::filesystem::path& path, double timeout_s, const Sharing& sharing = {});
  ~FileLock();  // releases: unlinks the lock file (while still holding it), closes, unlocks
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  Status status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  void release_local();

  std::filesystem::path path_;
  std::string name_;  // the file's name in dir_
  TrustedDir dir_;
  std::shared_ptr<detail::LocalLock> local_;
  int fd_ = -1;
  Status status_ = Status::timed_out;
  std::string error_;
};

}  // namespace flashjit::cache
