// Trust: a cache directory, layer, lock directory or import source that someone else can write
// is never used; what flashjit creates is private whatever the umask; and no file it creates is
// written through a link planted in its way. "Someone else" is simulated with modes (the suite
// runs as one user, perhaps root, who ignores permissions: these are checks of the modes).
#include "cache/entry_file.hpp"
#include "cache/env_options.hpp"
#include "cache/file_lock.hpp"
#include "cache/store.hpp"
#include "cache/trusted_dir.hpp"
#include "cache_test_support.hpp"

#include <gtest/gtest.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>

namespace flashjit::cache::test {
namespace {

// A group other than the user's own, that the directory can be given to (nullopt: none here).
std::optional<gid_t> foreign_group() {
  if (::geteuid() == 0) return gid_t{1};  // root can give a directory any group
  const int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(n > 0 ? n : 0);
  if (n > 0 && ::getgroups(n, groups.data()) == n)
    for (gid_t g : groups)
      if (g != ::getegid()) return g;
  return std::nullopt;
}

// A valid entry planted by hand into dir (as a user who can write dir would).
fs::path plant(const fs::path& dir, const std::string& tag) {
  fs::create_directories(dir);
  const fs::path file = dir / entry_file_name(key_of(tag), tag);
  write_bytes(file, encode_entry(key_of(tag).hex, tag, make_entry("planted-" + tag)));
  return file;
}

TEST(CacheTrust, AWritableDirectoryOthersCanWriteIsNeverUsed) {
  ScratchDir scratch;
  const fs::path dir = scratch / "cache";
  plant(dir, "k");
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  DiskStore store(options_for(dir));
  LogCapture log;
  EXPECT_FALSE(store.load(key_of("k"), "k").has_value()) << "a planted entry in a world-writable directory loaded";
  std::string error;
  EXPECT_FALSE(store.store(key_of("x"), "x", make_entry("x"), &error));
  EXPECT_NE(error.find("writable by every user (mode 0777)"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(store.entry_path(dir, key_of("x"), "x")));
  Provenance where;
  const Entry e = store.get_or_create(key_of("k"), "k", [] { return make_entry("compiled"); }, {}, &where);
  EXPECT_TRUE(same(e, make_entry("compiled")));
  EXPECT_TRUE(where.produced);
  EXPECT_TRUE(where.file.empty());
  EXPECT_NE(where.store_error.find(dir.string()), std::string::npos) << where.store_error;
  EXPECT_GE(log.count_warnings({dir.string(), "writable by every user"}), 1u) << ::testing::PrintToString(log.warnings());
  EXPECT_FALSE(fs::exists(dir / ".locks")) << "a lock directory was made inside it";
  EXPECT_TRUE(store.list().empty());
  EXPECT_EQ(store.verify(false).skipped_dirs.size(), 1u);
  EXPECT_THROW(store.clear(), std::runtime_error);
  EXPECT_THROW(store.prune(0), std::runtime_error);
}

TEST(CacheTrust, GroupWritableIsUntrustedUnlessTheGroupIsSharedOnPurpose) {
  const auto group = foreign_group();
  if (!group) GTEST_SKIP() << "no second group to give the directory to";
  ScratchDir scratch;
  const fs::path dir = scratch / "cache";
  plant(dir, "g");
  ASSERT_EQ(::chown(dir.c_str(), static_cast<uid_t>(-1), *group), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  LogCapture log;
  EXPECT_FALSE(DiskStore(options_for(dir)).load(key_of("g"), "g").has_value());
  EXPECT_EQ(log.count_warnings({dir.string(), "writable by group", "FLASHJIT_CACHE_GROUP="}), 1u)
      << ::testing::PrintToString(log.warnings());
  // the same directory, shared with that group on purpose
  auto o = options_for(dir);
  o.sharing.group = *group;
  ASSERT_EQ(::chown(plant(dir, "g").c_str(), static_cast<uid_t>(-1), *group), 0);
  EXPECT_TRUE(DiskStore(o).load(key_of("g"), "g").has_value());
}

// Runs `check` in a child process that acts as uid/gid and sees `passwd` and `group` as the user
// database (bind-mounted in a mount namespace of its own; needs root). Returns the child's exit
// status; 77 when no such namespace can be made here.
int in_user_database(const ScratchDir& scratch, const std::string& passwd, const std::string& group, uid_t uid,
                     gid_t gid, const std::function<int()>& check) {
  write_bytes(scratch / "passwd", passwd);
  write_bytes(scratch / "group", group);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount((scratch / "passwd").c_str(), "/etc/passwd", nullptr, MS_BIND, nullptr) != 0 ||
        ::mount((scratch / "group").c_str(), "/etc/group", nullptr, MS_BIND, nullptr) != 0)
      ::_exit(77);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(78);
    ::_exit(check());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(CacheTrust, APrivateGroupIsOneNoOtherUserHasAsPrimaryGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "a user database of its own needs root";
  ScratchDir scratch;
  ASSERT_EQ(::chmod(scratch.path().c_str(), 0755), 0);
  const uid_t alice = 64101, bob = 64102;
  const fs::path dir = scratch / "cache";
  plant(dir, "u");
  ASSERT_EQ(::chown(dir.c_str(), alice, alice), 0);
  ASSERT_EQ(::chown((dir / entry_file_name(key_of("u"), "u")).c_str(), alice, alice), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  const std::string passwd = read_bytes("/etc/passwd") + "fjalice:x:64101:64101::/:/bin/sh\n";
  const std::string group = read_bytes("/etc/group") + "fjalice:x:64101:\n";
  auto trusted = [&](const std::string& users) {
    return in_user_database(scratch, users, group, alice, alice, [&] {
      const TrustedDir d = TrustedDir::open(dir, {}, Create::no);
      if (d.ok()) return 0;
      return d.problem().find("is writable by group fjalice") != std::string::npos ? 1 : 2;
    });
  };
  const int alone = trusted(passwd);
  if (alone == 77) GTEST_SKIP() << "no mount namespace of its own here";
  EXPECT_EQ(alone, 0) << "the user's private group (user-private-group systems, umask 002)";
  // Bob's primary group is alice's: /etc/group does not list him, yet he can write her directory.
  EXPECT_EQ(trusted(passwd + "fjbob:x:" + std::to_string(bob) + ":64101::/:/bin/sh\n"), 1);
}

TEST(CacheTrust, ASharedGroupCacheIsCreatedSetgidForThatGroup) {
  ScratchDir scratch;
  ScopedUmask open_umask(0);
  auto o = options_for(scratch / "team" / "cache");
  o.sharing.group = foreign_group().value_or(::getegid());
  DiskStore store(o);
  bool produced = false;
  store.get_or_create(key_of("s"), "s", [] { return make_entry("s"); }, &produced);
  ASSERT_TRUE(produced);
  for (const fs::path& d : {scratch / "team", o.dir, o.dir / ".locks"}) {
    EXPECT_EQ(mode_of(d), 02770) << d;
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_gid, *o.sharing.group) << d;
  }
  EXPECT_EQ(mode_of(store.entry_path(o.dir, key_of("s"), "s")), 0660);
  EXPECT_TRUE(store.load(key_of("s"), "s").has_value());
}

TEST(CacheTrust, WhatFlashjitCreatesIsPrivateWhateverTheUmask) {
  ScratchDir scratch;
  ScopedUmask open_umask(0);
  const fs::path dir = scratch / "a" / "b" / "cache";
  DiskStore store(options_for(dir));
  store.get_or_create(key_of("u"), "u", [] { return make_entry("u"); });
  for (const fs::path& d : {scratch / "a", scratch / "a" / "b", dir, dir / ".locks"}) EXPECT_EQ(mode_of(d), 0700) << d;
  EXPECT_EQ(mode_of(store.entry_path(dir, key_of("u"), "u")), 0644);
  // the fallback directory too
  ScopedEnv env({{"FLASHJIT_CACHE_DIR", std::nullopt}, {"XDG_CACHE_HOME", std::nullopt},
                 {"HOME", unwritable_dir(scratch).string()}, {"TMPDIR", scratch.path().string()}});
  const fs::path fallback = StoreOptions::from_env().dir;
  EXPECT_EQ(mode_of(fallback), 0700) << fallback;
}

TEST(CacheTrust, ADirectoryAboveOthersCanWriteMakesItUntrustedUnlessSticky) {
  ScratchDir scratch;
  const fs::path open = scratch / "open", dir = open / "cache";
  plant(dir, "a");
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);  // anyone could rename cache/ and put their own there
  const TrustedDir d = TrustedDir::open(dir, {}, Create::no);
  EXPECT_EQ(d.status(), TrustedDir::Status::untrusted);
  EXPECT_NE(d.problem().find(open.string() + " above it is writable by every user"), std::string::npos) << d.problem();
  LogCapture quiet;
  EXPECT_FALSE(DiskStore(options_for(dir)).load(key_of("a"), "a").has_value());
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);  // as /tmp: nobody can move what is not theirs
  EXPECT_TRUE(TrustedDir::open(dir, {}, Create::no).ok()) << TrustedDir::open(dir, {}, Create::no).problem();
  EXPECT_TRUE(DiskStore(options_for(dir)).load(key_of("a"), "a").has_value());
  // a sticky directory others can write is fine above, never as the cache itself
  EXPECT_EQ(TrustedDir::open(open, {}, Create::no).status(), TrustedDir::Status::untrusted);
  // and nothing is created inside a directory others can write
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  const TrustedDir made = TrustedDir::open(open / "new" / "cache", {}, Create::private_dir);
  EXPECT_EQ(made.status(), TrustedDir::Status::untrusted);
  EXPECT_NE(made.problem().find(open.string() + " above it is writable by every user"), std::string::npos)
      << made.problem();
  EXPECT_FALSE(fs::exists(open / "new"));
}

// ---- access control lists ----

// One entry of a POSIX access ACL, as setfacl would write it: tag, permission bits, id.
struct AclEntry {
  std::uint16_t tag, perm;
  std::uint32_t id = UINT32_MAX;  // for the owner, owning group, mask and everyone: no id
};
constexpr std::uint16_t kAclUserObj = 0x01, kAclUser = 0x02, kAclGroupObj = 0x04, kAclGroup = 0x08,
                        kAclMask = 0x10, kAclOther = 0x20;

// Gives path this access ACL (entries in the kernel's order), written in the kernel's xattr format
// (linux/posix_acl_xattr.h); the error number when that fails, 0 when it worked.
int set_access_acl(const fs::path& path, const std::vector<AclEntry>& entries) {
  std::string bytes(4 + 8 * entries.size(), '\0');
  const std::uint32_t version = 2;
  std::memcpy(bytes.data(), &version, 4);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(bytes.data() + 4 + 8 * i, &entries[i].tag, 2);
    std::memcpy(bytes.data() + 6 + 8 * i, &entries[i].perm, 2);
    std::memcpy(bytes.data() + 8 + 8 * i, &entries[i].id, 4);
  }
  return ::setxattr(path.c_str(), "system.posix_acl_access", bytes.data(), bytes.size(), 0) == 0 ? 0 : errno;
}

// rwx for the owner, r-x for the owning group, nothing for everyone, the named users and groups,
// and a mask of `mask` (which becomes the mode's group bits).
std::vector<AclEntry> acl_with(std::vector<AclEntry> users, std::vector<AclEntry> groups, std::uint16_t mask) {
  std::vector<AclEntry> acl{{kAclUserObj, 7}};
  acl.insert(acl.end(), users.begin(), users.end());
  acl.push_back({kAclGroupObj, 5});
  acl.insert(acl.end(), groups.begin(), groups.end());
  acl.push_back({kAclMask, mask});
  acl.push_back({kAclOther, 0});
  return acl;
}

bool no_acls_here(int set_error) { return set_error == ENOTSUP || set_error == EOPNOTSUPP; }

// Neither a user nor a group on any machine the suite runs on.
constexpr std::uint32_t kStranger = 64103;

TEST(CacheTrust, AnAccessControlListThatLetsAnotherUserOrGroupWriteIsUntrusted) {
  ScratchDir scratch;
  const fs::path dir = scratch / "cache";
  plant(dir, "a");
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  const int err = set_access_acl(dir, acl_with({{kAclUser, 7, kStranger}}, {}, 7));
  if (no_acls_here(err)) GTEST_SKIP() << "no access control lists on the file system under " << scratch.path();
  ASSERT_EQ(err, 0) << std::strerror(err);
  EXPECT_EQ(mode_of(dir), 0770) << "the group bits are the list's mask";
  TrustedDir d = TrustedDir::open(dir, {}, Create::no);
  EXPECT_EQ(d.status(), TrustedDir::Status::untrusted);
  EXPECT_NE(d.problem().find("is writable by user uid 64103 through its access control list (mode 0770+)"),
            std::string::npos)
      << d.problem();
  {
    LogCapture log;
    EXPECT_FALSE(DiskStore(options_for(dir)).load(key_of("a"), "a").has_value()) << "a planted entry loaded";
    EXPECT_GE(log.count_warnings({dir.string(), "through its access control list"}), 1u)
        << ::testing::PrintToString(log.warnings());
  }
  // a named group other than the user's private one
  ASSERT_EQ(set_access_acl(dir, acl_with({}, {{kAclGroup, 7, kStranger}}, 7)), 0);
  d = TrustedDir::open(dir, {}, Create::no);
  EXPECT_NE(d.problem().find("is writable by group gid 64103 through its access control list"), std::string::npos)
      << d.problem();
  // unless that group is the one the cache is shared with on purpose, as with the mode bits
  auto shared = options_for(dir);
  shared.sharing.group = kStranger;
  EXPECT_TRUE(TrustedDir::open(dir, shared.sharing, Create::no).ok());
  // a mask without write lets no named entry write: such entries are then harmless
  ASSERT_EQ(set_access_acl(dir, acl_with({{kAclUser, 7, kStranger}}, {{kAclGroup, 7, kStranger}}, 5)), 0);
  EXPECT_EQ(mode_of(dir), 0750);
  EXPECT_TRUE(TrustedDir::open(dir, {}, Create::no).ok()) << TrustedDir::open(dir, {}, Create::no).problem();
  // and so is one that names only the user, or lets the stranger read
  ASSERT_EQ(set_access_acl(dir, acl_with({{kAclUser, 7, ::geteuid()}, {kAclUser, 5, kStranger}}, {}, 7)), 0);
  EXPECT_TRUE(TrustedDir::open(dir, {}, Create::no).ok()) << TrustedDir::open(dir, {}, Create::no).problem();
  EXPECT_TRUE(DiskStore(options_for(dir)).load(key_of("a"), "a").has_value());
}

TEST(CacheTrust, AnAccessControlListAboveOrOnAnEntryIsCheckedToo) {
  ScratchDir scratch;
  const fs::path open = scratch / "open", dir = open / "cache";
  plant(dir, "e");
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0700), 0);
  const int err = set_access_acl(open, acl_with({{kAclUser, 7, kStranger}}, {}, 7));
  if (no_acls_here(err)) GTEST_SKIP() << "no access control lists on the file system under " << scratch.path();
  ASSERT_EQ(err, 0) << std::strerror(err);
  const TrustedDir d = TrustedDir::open(dir, {}, Create::no);
  EXPECT_EQ(d.status(), TrustedDir::Status::untrusted);
  EXPECT_NE(d.problem().find(open.string() + " above it is writable by user uid 64103"), std::string::npos)
      << d.problem();
  EXPECT_FALSE(TrustedDir::open(open / "new", {}, Create::private_dir).ok());
  EXPECT_FALSE(fs::exists(open / "new")) << "a directory was made inside one another user can write";
  // an entry file another user can write through its list is replaced like one with mode 0666
  ASSERT_EQ(set_access_acl(open, acl_with({}, {}, 5)), 0);
  const fs::path file = dir / entry_file_name(key_of("e"), "e");
  ASSERT_EQ(set_access_acl(file, acl_with({{kAclUser, 6, kStranger}}, {}, 6)), 0);
  DiskStore store(options_for(dir));
  LogCapture log;
  EXPECT_FALSE(store.load(key_of("e"), "e").has_value());
  EXPECT_EQ(log.count_warnings({file.string(), "writable by user uid 64103 through its access control list",
                                "removed"}),
            1u)
      << ::testing::PrintToString(log.warnings());
  EXPECT_FALSE(fs::exists(file));
}

TEST(CacheTrust, ACacheDirectoryThatIsALinkIsNotFollowed) {
  ScratchDir scratch;
  const fs::path real = scratch / "real", link = scratch / "link";
  plant(real, "l");
  fs::create_directory_symlink(real, link);
  const TrustedDir d = TrustedDir::open(link, {}, Create::private_dir);
  EXPECT_EQ(d.status(), TrustedDir::Status::untrusted);
  EXPECT_NE(d.problem().find("symbolic link"), std::string::npos) << d.problem();
  LogCapture quiet;
  DiskStore store(options_for(link));
  EXPECT_FALSE(store.load(key_of("l"), "l").has_value());
  EXPECT_FALSE(store.store(key_of("n"), "n", make_entry("n")));
  EXPECT_FALSE(fs::exists(real / entry_file_name(key_of("n"), "n")));
  // links above the directory are resolved as usual (a home directory on another disk)
  fs::create_directory_symlink(scratch.path(), scratch / "alias");
  EXPECT_TRUE(DiskStore(options_for(scratch / "alias" / "real")).load(key_of("l"), "l").has_value());
}

TEST(CacheTrust, AnotherUsersLinkOnTheWayIsNotFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a link to another user needs root";
  ScratchDir scratch;
  const fs::path victim = scratch / "victim", shared = scratch / "shared", theirs = scratch / "theirs";
  fs::create_directory(victim);
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  // What another user can do in /tmp: a link named like a path someone will use, to a
  // directory of root's.
  const fs::path planted = shared / "planted";
  fs::create_directory_symlink(victim, planted);
  ASSERT_EQ(::lchown(planted.c_str(), 65534, 65534), 0);
  LogCapture log;
  for (const Create create : {Create::private_dir, Create::shipped, Create::no}) {
    const TrustedDir d = TrustedDir::open(planted / "cache" / "dir", {}, create);
    EXPECT_EQ(d.status(), TrustedDir::Status::untrusted) << d.problem();
    EXPECT_NE(d.problem().find("the symbolic link " + planted.string() + " belongs to nobody"), std::string::npos)
        << d.problem();
  }
  DiskStore store(options_for(planted / "cache"));
  store.get_or_create(key_of("p"), "p", [] { return make_entry("p"); });
  EXPECT_TRUE(fs::is_empty(victim)) << "a directory was made through the planted link";
  // A link of another user's in a directory that user owns (not sticky) can be swapped too.
  fs::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  fs::create_directory_symlink(victim, theirs / "link");
  const TrustedDir via_theirs = TrustedDir::open(theirs / "link" / "cache", {}, Create::private_dir);
  EXPECT_EQ(via_theirs.status(), TrustedDir::Status::untrusted);
  EXPECT_NE(via_theirs.problem().find("lies in a directory that is owned by nobody"), std::string::npos)
      << via_theirs.problem();
  // The user's own link that leads through the planted one is no way around it.
  fs::create_directory_symlink(planted, scratch / "mine");
  EXPECT_EQ(TrustedDir::open(scratch / "mine" / "cache", {}, Create::private_dir).status(),
            TrustedDir::Status::untrusted);
  EXPECT_TRUE(fs::is_empty(victim));
  // Root's own link in the shared directory, relative and through "..", is followed.
  fs::create_directory_symlink("../victim", shared / "own");
  const TrustedDir own = TrustedDir::open(shared / "own" / "cache", {}, Create::private_dir);
  EXPECT_TRUE(own.ok()) << own.problem();
  EXPECT_TRUE(fs::is_directory(victim / "cache"));
}

TEST(CacheTrust, OwnedByAnotherUserIsNotTrusted) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  ScratchDir scratch;
  const fs::path layer = scratch / "layer";
  plant(layer, "o");
  ASSERT_EQ(::chown(layer.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(layer.c_str(), 0755), 0);
  auto o = options_for(scratch / "rw");
  o.layers = {layer};
  LogCapture log;
  DiskStore store(o);
  EXPECT_FALSE(store.load(key_of("o"), "o").has_value());
  EXPECT_EQ(log.count_warnings({layer.string(), "is owned by", "not by root"}), 1u) << ::testing::PrintToString(log.warnings());
  // an entry file owned by another user in a directory of ours is not trusted either
  ASSERT_EQ(::chown(layer.c_str(), 0, 0), 0);
  const fs::path file = layer / entry_file_name(key_of("o"), "o");
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(store.load(key_of("o"), "o").has_value());
  EXPECT_EQ(log.count_warnings({file.string(), "is owned by"}), 1u) << ::testing::PrintToString(log.warnings());
}

TEST(CacheTrust, LayersAndImportSourcesOthersCanWriteAreSkipped) {
  ScratchDir scratch;
  const fs::path layer = scratch / "layer";
  plant(layer, "t");
  ASSERT_EQ(::chmod(layer.c_str(), 0757), 0);
  auto o = options_for(scratch / "rw");
  o.layers = {layer};
  DiskStore store(o);
  LogCapture log;
  bool produced = false;
  EXPECT_TRUE(same(store.get_or_create(key_of("t"), "t", [] { return make_entry("rebuilt"); }, &produced),
                   make_entry("rebuilt")));
  EXPECT_TRUE(produced) << "the planted layer entry was used";
  EXPECT_EQ(log.count_warnings({"skipping the read-only layer", layer.string(), "writable by every user"}), 1u)
      << ::testing::PrintToString(log.warnings());
  const auto dirs = store.directories();
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0].status, TrustedDir::Status::untrusted);
  EXPECT_EQ(dirs[1].status, TrustedDir::Status::ok);
  try {
    store.import_from(layer);
    FAIL() << "imported from a directory others can write";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not importing from " + layer.string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(same(*store.load(key_of("t"), "t"), make_entry("rebuilt")));
}

TEST(CacheTrust, AnEntryFileOthersCanWriteIsReplaced) {
  ScratchDir scratch;
  DiskStore store(options_for(scratch.path()));
  ASSERT_TRUE(store.store(key_of("w"), "w", make_entry("w")));
  const fs::path file = store.entry_path(scratch.path(), key_of("w"), "w");
  ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
  LogCapture log;
  EXPECT_FALSE(store.load(key_of("w"), "w").has_value());
  EXPECT_EQ(log.count_warnings({file.string(), "writable by every user", "removed"}), 1u)
      << ::testing::PrintToString(log.warnings());
  EXPECT_FALSE(fs::exists(file));
}

// ---- files created without following links ----

TEST(CacheTrust, APlantedLinkAtAnEntryNameIsReplacedNotWrittenThrough) {
  ScratchDir scratch;
  const fs::path dir = scratch / "cache", victim = scratch / "victim";
  write_bytes(victim, "precious");
  DiskStore store(options_for(dir));
  ASSERT_TRUE(store.store(key_of("other"), "other", make_entry("other")));  // creates dir
  const fs::path entry = store.entry_path(dir, key_of("v"), "v");
  fs::create_symlink(victim, entry);
  LogCapture log;
  bool produced = false;
  store.get_or_create(key_of("v"), "v", [] { return make_entry("v"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_EQ(read_bytes(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(entry));
  EXPECT_TRUE(same(*store.load(key_of("v"), "v"), make_entry("v")));
  EXPECT_EQ(log.count_warnings({entry.string(), "symbolic link"}), 1u) << ::testing::PrintToString(log.warnings());
}

TEST(CacheTrust, LockFilesAreNeverCreatedThroughALink) {
  ScratchDir scratch;
  const fs::path locks = scratch / "locks", victim = scratch / "victim", absent = scratch / "created-by-us";
  fs::create_directories(locks);
  write_bytes(victim, "precious");
  fs::create_symlink(victim, locks / "a.lock");
  fs::create_symlink(absent, locks / "b.lock");  // a dangling link: O_CREAT would make its target
  for (const char* name : {"a.lock", "b.lock"}) {
    FileLock lock(locks / name, 1);
    EXPECT_EQ(lock.status(), FileLock::Status::unavailable) << name;
    EXPECT_NE(lock.error().find((locks / name).string()), std::string::npos) << lock.error();
  }
  EXPECT_EQ(read_bytes(victim), "precious");
  EXPECT_FALSE(fs::exists(absent));
  EXPECT_TRUE(fs::is_symlink(locks / "a.lock"));  // releasing unlinks only a lock it holds
  {
    ScopedUmask open_umask(0);
    FileLock lock(locks / "c.lock", 1);
    ASSERT_EQ(lock.status(), FileLock::Status::locked);
    EXPECT_EQ(mode_of(locks / "c.lock"), 0600);
  }
}

TEST(CacheTrust, ASharedStickyLockDirectoryGetsAPrivateSubdirectory) {
  ScratchDir scratch;
  const fs::path shm = scratch / "shm";  // as /dev/shm: sticky, everybody can write
  fs::create_directory(shm);
  ASSERT_EQ(::chmod(shm.c_str(), 01777), 0);
  auto o = options_for(scratch / "cache");
  o.lock_dir = shm;
  DiskStore store(o);
  const Key key = key_of("k");
  const fs::path mine = shm / ("flashjit-locks-" + std::to_string(::geteuid()));
  bool locked_there = false;
  store.get_or_create(key, "k", [&] {
    locked_there = fs::exists(mine / (key.hex + ".lock"));
    return make_entry("k");
  });
  EXPECT_TRUE(locked_there);
  EXPECT_EQ(mode_of(mine), 0700);
  for (const auto& f : fs::directory_iterator(shm)) EXPECT_EQ(f.path(), mine) << "a file in the shared directory";

  // a lock directory another user made first (here: one everybody can write) is not used
  ASSERT_EQ(::chmod(mine.c_str(), 0777), 0);
  LogCapture log;
  bool produced = false;
  store.get_or_create(key_of("k2"), "k2", [] { return make_entry("k2"); }, &produced);
  EXPECT_TRUE(produced);
  EXPECT_FALSE(fs::exists(mine / (key_of("k2").hex + ".lock")));
  EXPECT_EQ(log.count_warnings({mine.string(), "writable by every user", "without a cross-process lock"}), 1u)
      << ::testing::PrintToString(log.warnings());
}

TEST(CacheTrust, ExportsNeverWriteThroughALinkAndShipReadable) {
  ScratchDir scratch;
  ScopedUmask open_umask(0);
  DiskStore store(options_for(scratch / "cache"));
  ASSERT_TRUE(store.store(key_of("e"), "e", make_entry("e")));
  const fs::path out = scratch / "shipped", victim = scratch / "victim";
  write_bytes(victim, "precious");
  fs::create_directory(out);
  ASSERT_EQ(::chmod(out.c_str(), 0755), 0);
  fs::create_symlink(victim, out / entry_file_name(key_of("e"), "e"));
  EXPECT_EQ(store.export_to(out), 1u);
  EXPECT_EQ(read_bytes(victim), "precious");
  EXPECT_EQ(mode_of(out / entry_file_name(key_of("e"), "e")), 0644);
  // a new export directory is created readable by everyone, writable by its owner only
  EXPECT_EQ(store.export_to(scratch / "fresh" / "layer"), 1u);
  EXPECT_EQ(mode_of(scratch / "fresh" / "layer"), 0755);
  // an export directory others can write would be an untrusted layer: refused
  ASSERT_EQ(::chmod(out.c_str(), 0777), 0);
  EXPECT_THROW(store.export_to(out), std::runtime_error);
  fs::create_directory_symlink(out, scratch / "link-to-layer");
  EXPECT_THROW(store.export_to(scratch / "link-to-layer"), std::runtime_error);
}

TEST(CacheTrust, ImportsTakeNoLinks) {
  ScratchDir scratch;
  const fs::path elsewhere = scratch / "elsewhere", from = scratch / "from";
  const fs::path real = plant(elsewhere, "i");
  fs::create_directory(from);
  fs::create_symlink(real, from / real.filename());
  DiskStore store(options_for(scratch / "cache"));
  LogCapture quiet;
  const ImportReport r = store.import_from(from);
  EXPECT_EQ(r.imported, 0u);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("symbolic link"), std::string::npos) << r.skipped[0];
}

TEST(CacheTrust, TheSharingGroupMustBeOneOfTheUsers) {
  ScopedEnv env({{"FLASHJIT_CACHE_GROUP", "no-such-group-flashjit"}, {"FLASHJIT_CACHE_DIR", "/tmp/x"}});
  try {
    StoreOptions::from_env();
    FAIL() << "an unknown group was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("FLASHJIT_CACHE_GROUP='no-such-group-flashjit'"), std::string::npos) << e.what();
  }
  ::setenv("FLASHJIT_CACHE_GROUP", std::to_string(::getegid()).c_str(), 1);
  EXPECT_EQ(StoreOptions::from_env().sharing.group, ::getegid());
  if (::geteuid() != 0) {
    EXPECT_THROW(parse_group("FLASHJIT_CACHE_GROUP", "0"), std::invalid_argument) << "not a member of root's group";
  }
}

}  // namespace
}  // namespace flashjit::cache::test
