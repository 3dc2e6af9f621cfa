#include "cache/trusted_dir.hpp"

#include "cache/access_acl.hpp"
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
#include <deque>
#include <memory>
#include <mutex>
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

// Whether a user other than `name` has gid as primary group: a member the group file does not
// list. True also when the user database cannot be read to the end.
bool primary_group_of_another(gid_t gid, const std::string& name) {
  static std::mutex m;  // setpwent/getpwent_r/endpwent share one position
  std::lock_guard<std::mutex> g(m);
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  bool other = false;
  int rc = 0;
  ::setpwent();
  while (!other && (rc = ::getpwent_r(&pw, buf.data(), buf.size(), &found)) == 0 && found)
    other = found->pw_gid == gid && name != found->pw_name;
  ::endpwent();
  return other || (rc != 0 && rc != ENOENT);
}

// The user's private group (user-private-group systems, umask 002): the user's primary group,
// named like the user, with no other members, listed or by their own primary group. Writable by
// it means writable by the user alone.
bool is_private_group(gid_t gid, uid_t uid) {
  std::vector<char> pbuf(16384), gbuf(16384);
  passwd pw{}, *user = nullptr;
  group gr{}, *grp = nullptr;
  if (::getpwuid_r(uid, &pw, pbuf.data(), pbuf.size(), &user) != 0 || !user || user->pw_gid != gid) return false;
  if (::getgrgid_r(gid, &gr, gbuf.data(), gbuf.size(), &grp) != 0 || !grp) return false;
  const std::string name = user->pw_name;
  if (grp->gr_name != name) return false;
  for (char** m = grp->gr_mem; m && *m; ++m)
    if (*m != name) return false;
  return !primary_group_of_another(gid, name);
}

// Why a user other than the owner (or root, or the sharing group) could change what is in a
// directory or file with this status; "" when nobody could. Its access ACL, if any, is read from
// fd, or path when fd < 0.
std::string write_problem(const struct stat& st, const Sharing& sharing, bool above, int fd, const char* path) {
  const uid_t me = ::geteuid();
  const bool shared_group = sharing.group && st.st_gid == *sharing.group;
  if (st.st_uid != me && st.st_uid != 0 && !shared_group)
    return "is owned by " + user_name(st.st_uid) + ", not by " + (me == 0 ? "root" : user_name(me) + " or root");
  // Above the directory, a sticky one others can write is fine: nobody can move what is ours.
  if (above && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)) return "";
  if (st.st_mode & S_IWOTH) return "is writable by every user (mode " + mode_text(st.st_mode) + ")";
  if (!(st.st_mode & S_IWGRP)) return "";
  // With an ACL the group bits are its mask: who may write is in the ACL.
  const AclWriters acl = acl_writers(fd, path);
  if (!acl.error.empty()) return "has an access control list that " + acl.error;
  auto through_acl = [&](const std::string& who) {
    return "is writable by " + who + " through its access control list (mode " + mode_text(st.st_mode) +
           "+); remove that entry (setfacl -x), or write permission from the list's mask (chmod g-w)";
  };
  for (const uid_t u : acl.users)
    if (u != me && u != 0 && u != st.st_uid) return through_acl("user " + user_name(u));
  for (const gid_t g : acl.groups)
    if (!(sharing.group && g == *sharing.group) && !is_private_group(g, st.st_uid))
      return through_acl("group " + group_name(g));
  if ((!acl.has_acl || acl.owning_group) && !shared_group && !is_private_group(st.st_gid, st.st_uid))
    return "is writable by group " + group_name(st.st_gid) + " (mode " + mode_text(st.st_mode) +
           "); remove the group's write permission (chmod g-w), or share the cache with that group on "
           "purpose: FLASHJIT_CACHE_GROUP=" + group_name(st.st_gid);
  return "";
}

// Why a symbolic link met on the way down could lead elsewhere: it lies in a directory someone
// else can change, or it is another user's in a shared sticky one (/tmp), where its owner can
// replace it at any time. "" when only the user or root could have made it.
std::string link_problem(int dir_fd, const struct stat& link, const Sharing& sharing) {
  struct stat dir {};
  if (::fstat(dir_fd, &dir) != 0) return "cannot be checked: " + errno_text(errno);
  if (std::string why = write_problem(dir, sharing, true, dir_fd, nullptr); !why.empty())
    return "lies in a directory that " + why;
  if (link.st_uid != ::geteuid() && link.st_uid != 0 && !write_problem(dir, sharing, false, dir_fd, nullptr).empty())
    return "belongs to " + user_name(link.st_uid) + " and lies in a directory others can write";
  return "";
}

// The target of dir_fd/name, or "" with *why set.
std::string link_target(int dir_fd, const std::string& name, std::string* why) {
  std::vector<char> buf(PATH_MAX + 1);
  const ssize_t n = ::readlinkat(dir_fd, name.c_str(), buf.data(), buf.size());
  if (n < 0 || static_cast<std::size_t>(n) >= buf.size() || n == 0) {
    *why = n < 0 ? "cannot be read: " + errno_text(errno) : "has an unusable target";
    return "";
  }
  return std::string(buf.data(), static_cast<std::size_t>(n));
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

std::string file_trust_problem(int fd, const struct stat& st, const Sharing& sharing) {
  if (!S_ISREG(st.st_mode)) return "is " + file_type_name(st.st_mode) + ", not a regular file";
  return write_problem(st, sharing, false, fd, nullptr);
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

  // Walk down from the root: links on the way are followed where only the user or root could
  // have made them, the last component must not be one. Missing directories are made
  // restrictive first, then given their mode.
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail(Status::error, "cannot open /: " + errno_text(errno));
  fs::path walked = "/";
  std::deque<std::string> parts;
  auto prepend = [&](const fs::path& p) {
    std::vector<std::string> v;
    for (const auto& c : p.relative_path())
      if (!c.empty() && c != ".") v.push_back(c.string());
    parts.insert(parts.begin(), v.begin(), v.end());
  };
  prepend(abs);
  int links = 0;
  while (!parts.empty()) {
    const std::string part = std::move(parts.front());
    parts.pop_front();
    const bool last = parts.empty();
    // A link on the way is followed here, one step at a time, and only if nobody else could
    // have planted it (else whoever did decides where directories are made and files written).
    struct stat link {};
    if (!last && ::fstatat(fd, part.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(link.st_mode)) {
      std::string why = link_problem(fd, link, sharing);
      if (why.empty() && ++links > 40) why = "leads through more than 40 symbolic links";
      const std::string target = why.empty() ? link_target(fd, part, &why) : "";
      if (!why.empty()) {
        ::close(fd);
        return fail(Status::untrusted,
                    shown + " is not trusted: the symbolic link " + printable((walked / part).string()) + " " + why);
      }
      if (fs::path(target).is_absolute()) {
        ::close(fd);
        fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return fail(Status::error, "cannot open /: " + errno_text(errno));
        walked = "/";
      }
      prepend(target);
      continue;
    }
    walked = part == ".." ? walked.parent_path() : walked / part;
    bool made = false;
    std::string untrusted_parent;  // nothing is created inside a directory someone else could write
    if (create != Create::no) {
      struct stat parent {};
      untrusted_parent = ::fstat(fd, &parent) == 0 ? write_problem(parent, sharing, true, fd, nullptr) : errno_text(errno);
    }
    if (create != Create::no && untrusted_parent.empty()) {
      made = part != ".." && ::mkdirat(fd, part.c_str(), 0700) == 0;
      if (!made && errno != EEXIST) {
        const int err = errno;
        ::close(fd);
        return fail(err == ENOENT ? Status::missing : Status::error,
                    "cannot create directory " + printable(walked.string()) + ": " + errno_text(err));
      }
    }
    const int next = ::openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (last ? O_NOFOLLOW : 0));
    const int err = errno;
    // O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR or ELOOP: say which it was
    const bool is_link = next < 0 && last && ::fstatat(fd, part.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
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
  if (std::string why = write_problem(st, sharing, false, fd, nullptr); !why.empty())
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
    if (std::string why = write_problem(a, sharing, true, -1, above.c_str()); !why.empty())
      return fail(Status::untrusted, shown + " is not trusted: " + printable(above.string()) + " above it " + why);
    if (above == above.parent_path()) break;
  }
  d.status_ = Status::ok;
  d.problem_.clear();
  return d;
}

}  // namespace flashjit::cache
