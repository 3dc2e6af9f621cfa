#include "cli/output_file.hpp"

#include "cache/trusted_dir.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

namespace flashjit::cli {

namespace {

std::string owner_name(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return found->pw_name;
  return "uid " + std::to_string(uid);
}

// Why what sits at the name (lstat'ed as `st`) must not be written: it is another user's, in a
// sticky directory others can write. "" when it may be.
std::string planted_problem(const std::string& path, const struct stat& st) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0 || !(d.st_mode & S_ISVTX) || !(d.st_mode & (S_IWGRP | S_IWOTH))) return "";
  if (st.st_uid == ::geteuid() || st.st_uid == d.st_uid || st.st_uid == 0) return "";
  return "it is " + cache::file_type_name(st.st_mode) + " of " + owner_name(st.st_uid) +
         " in a directory others can write, not used (remove it, or name another file)";
}

}  // namespace

std::string open_output_file(const std::string& path, cache::Fd& fd) {
  constexpr int kFlags = O_WRONLY | O_NOCTTY | O_CLOEXEC;
  // A new file: nothing there to follow.
  fd = cache::Fd(::open(path.c_str(), kFlags | O_CREAT | O_EXCL | O_NOFOLLOW, 0666));
  if (fd.get() >= 0) return "";
  if (errno != EEXIST) return cache::errno_text(errno);
  struct stat there {};
  if (::lstat(path.c_str(), &there) != 0) return cache::errno_text(errno);
  if (std::string why = planted_problem(path, there); !why.empty()) return why;
  // What was checked is what is opened: in a sticky directory nobody else can replace it.
  fd = cache::Fd(::open(path.c_str(), kFlags | O_TRUNC | (S_ISLNK(there.st_mode) ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0) return cache::errno_text(errno);
  struct stat opened {};
  if (!S_ISLNK(there.st_mode) &&
      (::fstat(fd.get(), &opened) != 0 || opened.st_dev != there.st_dev || opened.st_ino != there.st_ino)) {
    fd.close();
    return "it was replaced while being opened";
  }
  return "";
}

std::string write_and_close(cache::Fd& fd, std::string_view bytes) {
  if (!cache::write_all(fd.get(), bytes)) {
    const int err = errno;
    fd.close();
    return cache::errno_text(err);
  }
  if (fd.close() != 0) return cache::errno_text(errno);
  return "";
}

}  // namespace flashjit::cli
