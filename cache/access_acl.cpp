#include "cache/access_acl.hpp"

#include "cache/file_io.hpp"

#include <linux/limits.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace flashjit::cache {

namespace {

// The kernel's posix_acl_xattr format (linux/posix_acl_xattr.h): a u32 version, then entries of
// (u16 tag, u16 perm, u32 id), little-endian as the host on every Linux flashjit builds for.
constexpr char kName[] = "system.posix_acl_access";
constexpr std::uint32_t kVersion = 2;
constexpr std::uint16_t kUser = 0x02, kGroupObj = 0x04, kGroup = 0x08, kMask = 0x10;
constexpr std::uint16_t kWrite = 0x02;
constexpr std::size_t kHeader = 4, kEntry = 8;

}  // namespace

AclWriters acl_writers(int fd, const char* path) {
  AclWriters w;
  std::vector<char> bytes(XATTR_SIZE_MAX);  // the most an extended attribute holds
  const char* buf = bytes.data();
  const ssize_t n = fd >= 0 ? ::fgetxattr(fd, kName, bytes.data(), bytes.size())
                            : ::getxattr(path, kName, bytes.data(), bytes.size());
  if (n < 0) {
    // No ACL, or a file system without them: the mode tells all. Anything else is not known.
    if (errno != ENODATA && errno != ENOTSUP && errno != EOPNOTSUPP) w.error = "cannot be read: " + errno_text(errno);
    return w;
  }
  std::uint32_t version = 0;
  if (static_cast<std::size_t>(n) >= kHeader) std::memcpy(&version, buf, kHeader);
  if (static_cast<std::size_t>(n) < kHeader || version != kVersion || (n - kHeader) % kEntry != 0) {
    w.error = "is in an unknown format (" + std::to_string(n) + " bytes, version " + std::to_string(version) + ")";
    return w;
  }
  w.has_acl = true;
  bool mask_writes = true;  // the kernel requires a mask wherever there are named entries
  std::uint16_t group_obj = 0;
  for (std::size_t at = kHeader; at < static_cast<std::size_t>(n); at += kEntry) {
    std::uint16_t tag = 0, perm = 0;
    std::uint32_t id = 0;
    std::memcpy(&tag, buf + at, 2);
    std::memcpy(&perm, buf + at + 2, 2);
    std::memcpy(&id, buf + at + 4, 4);
    if (tag == kMask) mask_writes = perm & kWrite;
    else if (tag == kGroupObj) group_obj = perm;
    else if (tag == kUser && (perm & kWrite)) w.users.push_back(static_cast<uid_t>(id));
    else if (tag == kGroup && (perm & kWrite)) w.groups.push_back(static_cast<gid_t>(id));
  }
  // The mask bounds every entry but the owner's and everyone's.
  if (!mask_writes) {
    w.users.clear();
    w.groups.clear();
  }
  w.owning_group = mask_writes && (group_obj & kWrite);
  return w;
}

}  // namespace flashjit::cache
