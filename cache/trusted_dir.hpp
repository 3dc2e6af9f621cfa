// Who may write the directories flashjit loads code from, and how they are opened and created.
//
// An entry's checksum detects corruption, not tampering: whoever can write a cache directory can
// plant an entry with a matching checksum. Trust therefore comes from who can write. A directory
// is trusted when
//   - it is a real directory, not a symbolic link; a link on the way to it is followed only if
//     it lies in a directory nobody else can change, and, in a shared sticky one (/tmp), only if
//     it is the user's or root's;
//   - it is owned by the current user or root (with a sharing group: or it has that group);
//   - nobody else can write it, by its mode or its access ACL: not every user, no user named in
//     the ACL, and not its group (or a group named in the ACL) unless that group is the sharing
//     group or the user's private group (named like the user, no other members, listed or by
//     their own primary group);
//   - every directory above it (symbolic links resolved) passes the same checks, except that one
//     others can write is accepted above it when its sticky bit is set (/tmp, /dev/shm): there
//     nobody can rename or remove what is not theirs.
// Files in a trusted directory are trusted under the same owner and write rules, and must be
// regular files.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace flashjit::cache {

// Whom to trust besides the current user and root.
struct Sharing {
  std::optional<gid_t> group;  // FLASHJIT_CACHE_GROUP: the members of this group share the cache
};

// How a directory that does not exist yet is made (with every missing directory above it).
enum class Create {
  no,           // it must exist: read-only layers, import sources
  private_dir,  // 0700, or 02770 with a sharing group: cache, lock and source-dump directories
  shipped,      // 0755: an exported layer, readable by everyone, writable by its owner only
};

// Mode of the entry files flashjit writes: 0644, or 0660 with a sharing group (whose members
// stamp each other's entries as used).
mode_t entry_file_mode(const Sharing& sharing);
// Mode of lock files: 0600, or 0660 with a sharing group.
mode_t lock_file_mode(const Sharing& sharing);

// A directory opened (O_DIRECTORY, the last component not followed) and checked. Files inside
// are reached through fd() with openat() and friends, so a path swapped after the check changes
// nothing.
class TrustedDir {
 public:
  enum class Status { ok, missing, untrusted, error };

  // Never throws; status() and problem() say what went wrong.
  static TrustedDir open(const std::filesystem::path& dir, const Sharing& sharing, Create create);

  TrustedDir() = default;
  ~TrustedDir();
  TrustedDir(TrustedDir&& other) noexcept;
  TrustedDir& operator=(TrustedDir&& other) noexcept;
  TrustedDir(const TrustedDir&) = delete;
  TrustedDir& operator=(const TrustedDir&) = delete;

  Status status() const { return status_; }
  bool ok() const { return status_ == Status::ok; }
  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  const Sharing& sharing() const { return sharing_; }
  // When !ok(): what is wrong, naming the directory and the rule ("... is writable by every user
  // (mode 0777)").
  const std::string& problem() const { return problem_; }

 private:
  std::filesystem::path path_;
  Sharing sharing_;
  int fd_ = -1;
  Status status_ = Status::error;
  std::string problem_ = "not opened";
};

// "" when the open file fd, with this status, may be trusted inside a trusted directory, else
// why not ("is a FIFO, not a regular file", "is writable by every user (mode 0666)").
std::string file_trust_problem(int fd, const struct stat& st, const Sharing& sharing);

// "a regular file", "a FIFO", "a symbolic link", ...
std::string file_type_name(mode_t mode);

// Where per-user files go in dir: dir itself, or <dir>/<name>-<uid> (<name>-group-<gid> with a
// sharing group) when dir is a sticky directory others can write (/tmp, /dev/shm), in which
// anybody could have created dir's files first.
std::filesystem::path private_place(const std::filesystem::path& dir, std::string_view name,
                                    const Sharing& sharing);

}  // namespace flashjit::cache
