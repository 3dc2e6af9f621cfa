#include "cache/trusted_dir.hpp"

#include "cache/file_io.hpp"
#include "cache/printable.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace flashjit::cache {

namespace fs = std::filesystem;

namespace {

std::string mode_text(mode_t mode) {
  char b[16];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(mode & 07777));
  return b;
}

std::string user_name(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return found->pw_name;
  return "uid " + std::to_string(uid);
}

std::string group_name(gid_t gid) {
  std::vector<char> buf(16384);
  group gr{}, *found = nullptr;
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found) return found->gr_name;
  return "gid " + std::to_string(gid);
}

// The user's private group (user-private-group systems, umask 002): the user's primary group,
// named like the user, with no other members. Writable by it means writable by the user alone.
bool is_private_group(gid_t gid, uid_t uid) {
  std::vector<char> pbuf(16384), gbuf(16384);
  passwd pw{}, *user = nullptr;
  group gr{}, *grp = nullptr;
  if (::getpwuid_r(uid, &pw, pbuf.data(), pbuf.size(), &user) != 0 || !user || user->pw_gid != gid) return false;
  if (::getgrgid_r(gid, &gr, gbuf.data(), gbuf.size(), &grp) != 0 || !grp) return false;
  if (std::string(grp->gr_name) != user->pw_name) return false;
  for (char** m = grp->gr_mem; m && *m; ++m)
    if (std::string(*m) != user->pw_name) return false;
  return true;
}

// Why a user other than the owner (or root, or the sharing group) could change what is in a
// directory or file with this status; "" when nobody could.
std::string write_problem(const struct stat& st, const Sharing& sharing, bool above) {
  const uid_t me = ::geteuid();
  const bool shared_group = sharing.group && st.st_gid == *sharing.group;
  if (st.st_uid != me && st.st_uid != 0 && !shared_group)
    return "is owned by " + user_name(st.st_uid) + ", not by " + (me == 0 ? "root" : user_name(me) + " or root");
  // Above the directory, a sticky one others can write is fine: nobody can move what is ours.
  if (above && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)) return "";
  if (st.st_mode & S_IWOTH) return "is writable by every user (mode " + mode_text(st.st_mode) + ")";
  if ((st.st_mode & S_IWGRP) && !shared_group && !is_private_group(st.st_gid, st.st_uid))
    return "is writable by group " + group_name(st.st_gid) + " (mode " + mode_text(st.st_mode) +
           "); remove the group's write permission (chmod g-w), or share the cache with that group on "
           "purpose: FLASHJIT_CACHE_GROUP=" + group_name(st.st_gid);
  return "";
}

mode_t dir_mode(const Sharing& sharing, Create create) {
  if (create == Create::shipped) return 0755;
  return sharing.group ? 02770 : 0700;
}

// Gives a directory this call created its exact mode (whatever the umask) and group.
std::string finish_created(int fd, const fs::path& path, const Sharing& sharing, Create create) {
  if (sharing.group && create == Create::private_dir && ::fchown(fd, static_cast<uid_t>(-1), *sharing.group) != 0)
    return "cannot give " + printable(path.string()) + " the group " + group_name(*sharing.group) + ": " +
           errno_text(errno);
  if (::fchmod(fd, dir_mode(sharing, create)) != 0)
    return "cannot set the mode of " + printable(path.string()) + ": " + errno_text(errno);
  return "";
}

}  // namespace

mode_t entry_file_mode(const Sharing& sharing) { return sharing.group ? 0660 : 0644; }
mode_t lock_file_mode(const Sharing& sharing) { return sharing.group ? 0660 : 0600; }

std::string file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

std::string file_trust_problem(const struct stat& st, const Sharing& sharing) {
  if (!S_ISREG(st.st_mode)) return "is " + file_type_name(st.st_mode) + ", not a regular file";
  return write_problem(st, sharing, false);
}

fs::path private_place(const fs::path& dir, std::string_view name, const Sharing& sharing) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !(st.st_mode & S_ISVTX) ||
      !(st.st_mode & (S_IWOTH | S_IWGRP)))
    return dir;
  std::string sub(name);
  sub += sharing.group ? "-group-" : "-";
  sub += std::to_string(sharing.group ? *sharing.group : ::geteuid());
  return dir / sub;
}

TrustedDir::~TrustedDir() {
  if (fd_ >= 0) ::close(fd_);
}

TrustedDir::TrustedDir(TrustedDir&& o) noexcept
    : path_(std::move(o.path_)), sharing_(o.sharing_), fd_(o.fd_), status_(o.status_), problem_(std::move(o.problem_)) {
  o.fd_ = -1;
}

TrustedDir& TrustedDir::operator=(TrustedDir&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    sharing_ = o.sharing_;
    fd_ = o.fd_;
    status_ = o.status_;
    problem_ = std::move(o.problem_);
    o.fd_ = -1;
  }
  return *this;
}

TrustedDir TrustedDir::open(const fs::path& dir, const Sharing& sharing, Create create) {
  TrustedDir d;
  d.path_ = dir;
  d.sharing_ = sharing;
  const std::string shown = printable(dir.string());
  auto fail = [&](Status s, std::string why) {
    if (d.fd_ >= 0) ::close(d.fd_);
    d.fd_ = -1;
    d.status_ = s;
    d.problem_ = std::move(why);
    return std::move(d);
  };
  if (dir.empty()) return fail(Status::error, "no directory given");
  std::error_code ec;
  fs::path abs = fs::absolute(dir, ec).lexically_normal();
  if (ec) return fail(Status::error, "cannot resolve " + shown + ": " + ec.message());
  if (!abs.has_filename() && abs != abs.root_path()) abs = abs.parent_path();  // "a/b/" -> "a/b"

  // Walk down from the root: intermediate components resolve symbolic links as usual, the last
  // one must not be one. Missing directories are made restrictive first, then given their mode.
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail(Status::error, "cannot open /: " + errno_text(errno));
  fs::path walked = "/";
  std::vector<std::string> parts;
  for (const auto& p : abs.relative_path()) parts.push_back(p.string());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    walked /= parts[i];
    bool made = false;
    std::string untrusted_parent;  // nothing is created inside a directory someone else could write
    if (create != Create::no) {
      struct stat parent {};
      untrusted_parent = ::fstat(fd, &parent) == 0 ? write_problem(parent, sharing, true) : errno_text(errno);
    }
    if (create != Create::no && untrusted_parent.empty()) {
      made = ::mkdirat(fd, parts[i].c_str(), 0700) == 0;
      if (!made && errno != EEXIST) {
        const int err = errno;
        ::close(fd);
        return fail(err == ENOENT ? Status::missing : Status::error,
                    "cannot create directory " + printable(walked.string()) + ": " + errno_text(err));
      }
    }
    const int next = ::openat(fd, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (last ? O_NOFOLLOW : 0));
    const int err = errno;
    struct stat link {};
    // O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR or ELOOP: say which it was
    const bool is_link = next < 0 && last && ::fstatat(fd, parts[i].c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
                         S_ISLNK(link.st_mode);
    ::close(fd);
    fd = next;
    if (fd < 0) {
      if (err == ENOENT && !untrusted_parent.empty())
        return fail(Status::untrusted, shown + " is not trusted: " + printable(walked.parent_path().string()) +
                                           " above it " + untrusted_parent);
      if (is_link)
        return fail(Status::untrusted, shown + " is not trusted: it is a symbolic link (name the directory itself)");
      // A file where a directory above should be: nothing can exist below it.
      if (err == ENOENT || (err == ENOTDIR && !last && create == Create::no))
        return fail(Status::missing, shown + " does not exist");
      if (err == ENOTDIR) return fail(Status::error, printable(walked.string()) + " is not a directory");
      return fail(Status::error, "cannot open " + printable(walked.string()) + ": " + errno_text(err));
    }
    if (made) {
      const std::string why = finish_created(fd, walked, sharing, create);
      if (!why.empty()) {
        ::close(fd);
        return fail(Status::error, why);
      }
    }
  }
  d.fd_ = fd;

  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(Status::error, "cannot stat " + shown + ": " + errno_text(errno));
  if (std::string why = write_problem(st, sharing, false); !why.empty())
    return fail(Status::untrusted, shown + " is not trusted: it " + why);

  // Everything above it, symbolic links resolved: whoever can rename a directory above can
  // put another directory in its place.
  std::unique_ptr<char, void (*)(void*)> real(::realpath(abs.c_str(), nullptr), std::free);
  if (!real) return fail(Status::error, "cannot resolve " + shown + ": " + errno_text(errno));
  const fs::path resolved(real.get());
  struct stat now {};
  if (::stat(resolved.c_str(), &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino)
    return fail(Status::error, shown + " changed while it was being opened");
  for (fs::path above = resolved.parent_path();; above = above.parent_path()) {
    struct stat a {};
    if (::stat(above.c_str(), &a) != 0)
      return fail(Status::error, "cannot stat " + printable(above.string()) + ": " + errno_text(errno));
    if (std::string why = write_problem(a, sharing, true); !why.empty())
      return fail(Status::untrusted, shown + " is not trusted: " + printable(above.string()) + " above it " + why);
    if (above == above.parent_path()) break;
  }
  d.status_ = Status::ok;
  d.problem_.clear();
  return d;
}

}  // namespace flashjit::cache
