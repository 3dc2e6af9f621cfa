#include "cache/file_io.hpp"

#include "cache/printable.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace flashjit::cache {

namespace {

std::atomic<int> write_fault{0}, unlink_fault{0};

std::string shown(const TrustedDir& dir, const std::string& name) { return printable((dir.path() / name).string()); }

std::string describe(const char* what, const std::string& shown_path, int err) {
  return std::string(what) + " " + shown_path + ": " + errno_text(err);
}

int unlink_at(const TrustedDir& dir, const std::string& name) {
  if (const int err = unlink_fault.load()) {
    errno = err;
    return -1;
  }
  return ::unlinkat(dir.fd(), name.c_str(), 0);
}

std::string unique_part() {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  return std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + "." +
         std::to_string(random() & 0xffffffffffffull);
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

int Fd::release() {
  const int f = fd_;
  fd_ = -1;
  return f;
}

int Fd::close() { return fd_ < 0 ? 0 : ::close(release()); }

bool write_all(int fd, std::string_view bytes) {
  if (const int err = write_fault.load()) {
    errno = err;
    return false;
  }
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

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf)
  return ::strerror_r(err, buf, sizeof buf);
}

void inject_io_fault(IoFault op, int err) { (op == IoFault::write ? write_fault : unlink_fault).store(err); }

OpenedFile open_for_reading(const TrustedDir& dir, const std::string& name) {
  OpenedFile f;
  const std::string path = shown(dir, name);
  // O_NONBLOCK: opening a FIFO or a device must not wait for a writer; cleared again below.
  f.fd = Fd(::openat(dir.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (f.fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      f.status = OpenedFile::Status::missing;
      return f;
    }
    struct stat st {};
    if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      f.dev = st.st_dev;
      f.ino = st.st_ino;
      if (!S_ISREG(st.st_mode)) {  // ELOOP: a symbolic link; ENXIO: a socket
        f.error = path + " is " + file_type_name(st.st_mode) + ", not a regular file";
        return f;
      }
    }
    f.error = describe("cannot open", path, err);
    return f;
  }
  if (::fstat(f.fd.get(), &f.st) != 0) {
    f.error = describe("cannot stat", path, errno);
    return f;
  }
  f.dev = f.st.st_dev;
  f.ino = f.st.st_ino;
  if (std::string why = file_trust_problem(f.fd.get(), f.st, dir.sharing()); !why.empty()) {
    f.error = path + " " + why;
    return f;
  }
  const int flags = ::fcntl(f.fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(f.fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    f.error = describe("cannot use", path, errno);
    return f;
  }
  f.status = OpenedFile::Status::ok;
  return f;
}

std::string read_exactly(int fd, std::uint64_t offset, std::size_t size, std::string* out,
                         const std::string& shown_path) {
  out->resize(size);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, out->data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      out->clear();
      return describe("cannot read", shown_path, errno);
    }
    if (n == 0) {
      out->resize(got);
      return shown_path + " is shorter than its header says (truncated while being read?)";
    }
    got += static_cast<std::size_t>(n);
  }
  return "";
}

FileRead read_whole_file(const TrustedDir& dir, const std::string& name, std::uint64_t max_bytes) {
  FileRead r;
  OpenedFile f = open_for_reading(dir, name);
  r.dev = f.dev;
  r.ino = f.ino;
  if (f.status != OpenedFile::Status::ok) {
    r.status = f.status == OpenedFile::Status::missing ? FileRead::Status::missing : FileRead::Status::error;
    r.error = std::move(f.error);
    return r;
  }
  const std::string path = shown(dir, name);
  if (static_cast<std::uint64_t>(f.st.st_size) > max_bytes) {
    r.error = path + " is " + std::to_string(f.st.st_size) + " bytes, larger than any cache entry (" +
              std::to_string(max_bytes) + ")";
    return r;
  }
  r.bytes.resize(static_cast<std::size_t>(f.st.st_size));
  std::size_t got = 0;
  while (got < r.bytes.size()) {
    const ssize_t n = ::pread(f.fd.get(), r.bytes.data() + got, r.bytes.size() - got, static_cast<off_t>(got));
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

CreatedFile create_unique_file(const TrustedDir& dir, std::string_view prefix, std::string_view suffix, mode_t mode) {
  CreatedFile c;
  for (int attempt = 0; attempt < 100; ++attempt) {
    c.name = std::string(prefix) + unique_part() + std::string(suffix);
    c.fd = Fd(::openat(dir.fd(), c.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (c.fd.get() >= 0) {
      if (::fchmod(c.fd.get(), mode) != 0) {
        c.error = describe("cannot set the mode of", shown(dir, c.name), errno);
        c.fd.close();
        ::unlinkat(dir.fd(), c.name.c_str(), 0);
      }
      return c;
    }
    if (errno != EEXIST) {
      c.error = describe("cannot create", shown(dir, c.name), errno);
      return c;
    }
  }
  c.error = "cannot create a unique file in " + printable(dir.path().string());
  return c;
}

std::string publish_atomically(const TrustedDir& dir, const std::string& file_name, std::string_view bytes,
                               mode_t mode) {
  CreatedFile tmp = create_unique_file(dir, kTempPrefix, "", mode);
  if (!tmp.error.empty()) return tmp.error;
  auto fail = [&](const char* what, int err) {
    tmp.fd.close();
    ::unlinkat(dir.fd(), tmp.name.c_str(), 0);
    return describe(what, shown(dir, tmp.name), err);
  };
  if (!write_all(tmp.fd.get(), bytes)) return fail("cannot write", errno);
  if (::fsync(tmp.fd.get()) != 0) return fail("cannot fsync", errno);
  if (tmp.fd.close() != 0) return fail("cannot close", errno);
  // rename replaces whatever has the final name (a link included) and never follows it
  if (::renameat(dir.fd(), tmp.name.c_str(), dir.fd(), file_name.c_str()) != 0)
    return fail("cannot rename into place", errno);
  // Make the rename durable. Some file systems cannot fsync a directory; the entry is already
  // visible and valid, so that is not an error.
  ::fsync(dir.fd());
  return {};
}

bool touch(const TrustedDir& dir, const std::string& name) {
  // times == nullptr: needs write access or ownership, so a shared cache dir keeps working
  return ::utimensat(dir.fd(), name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) == 0;
}

Removal remove_file(const TrustedDir& dir, const std::string& name) {
  Removal r;
  if (unlink_at(dir, name) == 0) {
    r.status = Removal::Status::removed;
  } else if (errno == ENOENT) {
    r.status = Removal::Status::gone;
  } else {
    r.error = describe("cannot remove", shown(dir, name), errno);
  }
  return r;
}

Removal remove_if_same(const TrustedDir& dir, const std::string& name, std::uint64_t dev, std::uint64_t ino) {
  struct stat st {};
  if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != dev || st.st_ino != ino)
    return Removal{Removal::Status::gone, {}};
  return remove_file(dir, name);
}

}  // namespace flashjit::cache
