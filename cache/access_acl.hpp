// Who besides a file's owner, owning group and everyone its POSIX access ACL lets write it.
// With an ACL, the group bits of st_mode are the ACL's mask: a mode of 0770 may mean "user bob
// may write", which the mode alone does not tell.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace flashjit::cache {

struct AclWriters {
  std::string error;          // why the ACL could not be read or understood; "" when it was
  bool has_acl = false;       // the file has an extended access ACL
  bool owning_group = false;  // with an ACL: its owning group may write (without one: see the mode)
  std::vector<uid_t> users;   // named users who may write (the mask allowing it)
  std::vector<gid_t> groups;  // named groups who may write
};

// The writers of the open file fd, or of path when fd < 0 (links followed). A file without an
// ACL, or on a file system without ACLs, has none.
AclWriters acl_writers(int fd, const char* path);

}  // namespace flashjit::cache
