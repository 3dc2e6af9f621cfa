// POSIX file primitives for the cache, all relative to a TrustedDir: read a file without
// following a link or blocking on a FIFO, create one that did not exist, publish one atomically,
// touch and remove one. Errors come back as values (never exceptions): a cache fault must not
// take the caller down.
#pragma once

#include "cache/trusted_dir.hpp"

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace flashjit::cache {

// An owned file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release();
  int close();  // 0, or -1 with errno set

 private:
  int fd_;
};

struct OpenedFile {
  enum class Status { ok, missing, error } status = Status::error;
  Fd fd;                       // when ok
  struct stat st {};           // when ok
  std::string error;           // when error: what is wrong, with the path
  std::uint64_t dev = 0, ino = 0;  // whatever sits at the name, also when it was refused (0: none)
};
// Opens dir/name for reading: never follows a symbolic link, never blocks (on a FIFO or a
// device), and refuses anything but a regular file that file_trust_problem() accepts.
OpenedFile open_for_reading(const TrustedDir& dir, const std::string& name);

struct FileRead {
  enum class Status { ok, missing, error } status = Status::error;
  std::string bytes;
  std::string error;
  std::uint64_t dev = 0, ino = 0;  // as OpenedFile
};
// The whole file; one larger than max_bytes is an error, not an allocation of its size.
FileRead read_whole_file(const TrustedDir& dir, const std::string& name, std::uint64_t max_bytes);

// Reads exactly size bytes at offset into *out. "" on success, else the error (with the path).
std::string read_exactly(int fd, std::uint64_t offset, std::size_t size, std::string* out,
                         const std::string& shown_path);

// Temp files are "<dir>/.fjc-tmp.<pid>.<counter>.<random>": hidden, never *.fjc.
inline constexpr std::string_view kTempPrefix = ".fjc-tmp.";

struct CreatedFile {
  Fd fd;
  std::string name;   // the file's name in the directory
  std::string error;  // set when no file was created
};
// Creates a file that did not exist, "<prefix><pid>.<counter>.<random><suffix>", with O_EXCL
// and O_NOFOLLOW, with exactly `mode` (whatever the umask).
CreatedFile create_unique_file(const TrustedDir& dir, std::string_view prefix, std::string_view suffix, mode_t mode);

// Writes all of bytes to fd (retrying EINTR). False, with errno set, on failure.
bool write_all(int fd, std::string_view bytes);

// Writes bytes to a new unique temp file in dir, fsyncs it, gives it `mode`, renames it over
// dir/file_name and fsyncs dir. Returns "" on success, else the error text (the temp file is
// removed), as the system says it ("No space left on device", "Read-only file system", ...).
std::string publish_atomically(const TrustedDir& dir, const std::string& file_name, std::string_view bytes,
                               mode_t mode);

// Sets the file's mtime (and atime) to now: the cache's last-used stamp. False on failure.
bool touch(const TrustedDir& dir, const std::string& name);

struct Removal {
  enum class Status { removed, gone, failed } status = Status::failed;
  std::string error;  // when failed: the path and the system's reason
};
// Removes dir/name (the name itself, never what a link points to).
Removal remove_file(const TrustedDir& dir, const std::string& name);
// Same, only if it is still the file (dev, ino) that was read, so a good file another process
// has just renamed into place is not removed by mistake (then: gone).
Removal remove_if_same(const TrustedDir& dir, const std::string& name, std::uint64_t dev, std::uint64_t ino);

// strerror for errno values, thread-safe.
std::string errno_text(int err);

// Test seam: from now on every write (err != 0) or unlink of the cache fails with err, as on a
// full or read-only file system, whoever runs the test (root ignores permissions). 0 clears it.
enum class IoFault { write, unlink };
void inject_io_fault(IoFault op, int err);

}  // namespace flashjit::cache
