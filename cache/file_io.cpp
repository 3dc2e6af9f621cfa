#include "cache/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

namespace flashjit::cache {

namespace {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

std::string describe(const char* what, const std::filesystem::path& p, int err) {
  return std::string(what) + " " + p.string() + ": " + errno_text(err);
}

bool write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string temp_name() {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint32_t salt = std::random_device{}();
  return std::string(kTempPrefix) + std::to_string(::getpid()) + "." +
         std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) & 0xffffffffu) + "." +
         std::to_string(counter.fetch_add(1)) + "." + std::to_string(salt);
}

}  // namespace

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf)
  return ::strerror_r(err, buf, sizeof buf);
}

FileRead read_whole_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  FileRead r;
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      r.status = FileRead::Status::missing;
    } else {
      r.error = describe("cannot open", path, errno);
    }
    return r;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    r.error = describe("cannot stat", path, errno);
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.error = path.string() + " is not a regular file";
    return r;
  }
  r.dev = st.st_dev;
  r.ino = st.st_ino;
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    r.error = path.string() + " is " + std::to_string(st.st_size) + " bytes, larger than any cache entry (" +
              std::to_string(max_bytes) + ")";
    return r;
  }
  r.bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < r.bytes.size()) {
    const ssize_t n = ::pread(f.fd, r.bytes.data() + got, r.bytes.size() - got, static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      r.error = describe("cannot read", path, errno);
      r.bytes.clear();
      return r;
    }
    if (n == 0) break;  // shrank under us: the decoder reports it as truncated
    got += static_cast<std::size_t>(n);
  }
  r.bytes.resize(got);
  r.status = FileRead::Status::ok;
  return r;
}

std::string publish_atomically(const std::filesystem::path& dir, const std::string& file_name,
                               std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create directory " + dir.string() + ": " + ec.message();

  std::filesystem::path tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = dir / temp_name();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return describe("cannot create", tmp, errno);
  }
  if (fd < 0) return "cannot create a unique temporary file in " + dir.string();
  Fd f(fd);
  auto fail = [&](const char* what, int err) {
    ::unlink(tmp.c_str());
    return describe(what, tmp, err);
  };
  if (!write_all(f.fd, bytes)) return fail("cannot write", errno);
  if (::fsync(f.fd) != 0) return fail("cannot fsync", errno);
  if (::close(f.release()) != 0) return fail("cannot close", errno);
  const std::filesystem::path final_path = dir / file_name;
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) return fail("cannot rename into place", errno);
  // Make the rename durable. Some file systems cannot fsync a directory; the entry is already
  // visible and valid, so that is not an error.
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd >= 0) ::fsync(d.fd);
  return {};
}

bool touch(const std::filesystem::path& path) {
  // times == nullptr: needs write access or ownership, so a shared cache dir keeps working
  return ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) == 0;
}

bool remove_if_same(const std::filesystem::path& path, std::uint64_t dev, std::uint64_t ino) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  if (st.st_dev != dev || st.st_ino != ino) return false;
  return ::unlink(path.c_str()) == 0;
}

}  // namespace flashjit::cache
