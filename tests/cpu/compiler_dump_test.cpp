// The source of a failed compile goes into a directory of the user's own, under a name nobody
// could guess, never through a link someone planted; the CompileError names the file.
#include "cache_test_support.hpp"
#include "runtime/compiler.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flashjit {
namespace {

namespace fs = std::filesystem;
using cache::test::mode_of;
using cache::test::ScopedEnv;
using cache::test::ScratchDir;

KernelSource broken_source() {
  KernelSource src;
  src.name = "fwd_broken";
  src.arch = "sm_80";
  src.unit = "this is not C++;\n";
  src.launch.family = "sm80";
  return src;
}

std::string dumped_path() {
  try {
    compile(broken_source());
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find(e.source_path()), std::string::npos) << e.what();
    return e.source_path();
  }
  ADD_FAILURE() << "expected a CompileError";
  return "";
}

TEST(CompilerDump, GoesToAPrivateDirectoryPastAPlantedLink) {
  ScratchDir scratch;
  const fs::path victim = scratch / "victim";
  fs::create_directory(victim);
  // What another user could do first in a shared /tmp: the per-user name is a link to elsewhere.
  fs::create_directory_symlink(victim, scratch / ("flashjit-sources-" + std::to_string(::geteuid())));
  ScopedEnv env({{"TMPDIR", scratch.path().string()}, {"FLASHJIT_DUMP_DIR", std::nullopt}});
  cache::test::ScopedUmask open_umask(0);
  const fs::path dumped = dumped_path();
  ASSERT_TRUE(fs::is_regular_file(dumped)) << dumped;
  EXPECT_TRUE(fs::is_empty(victim));
  EXPECT_EQ(dumped.parent_path().parent_path(), scratch.path());
  EXPECT_EQ(mode_of(dumped.parent_path()), 0700);
  EXPECT_EQ(mode_of(dumped), 0600);
  EXPECT_EQ(cache::test::read_bytes(dumped), "this is not C++;\n");
  EXPECT_TRUE(dumped.filename().string().starts_with("fwd_broken.")) << dumped;
  EXPECT_NE(dumped_path(), dumped) << "two failures, two files";
}

TEST(CompilerDump, ASharedDumpDirectoryGetsAPrivateSubdirectory) {
  ScratchDir scratch;
  const fs::path shared = scratch / "shared";
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  ScopedEnv env({{"FLASHJIT_DUMP_DIR", shared.string()}});
  const fs::path dumped = dumped_path();
  EXPECT_EQ(dumped.parent_path(), shared / ("flashjit-sources-" + std::to_string(::geteuid())));
  EXPECT_TRUE(fs::is_regular_file(dumped));

  // a dump directory others can write without the sticky bit is not written at all
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  const std::string refused = dumped_path();
  EXPECT_NE(refused.find("not written"), std::string::npos) << refused;
  EXPECT_NE(refused.find("writable by every user"), std::string::npos) << refused;
}

}  // namespace
}  // namespace flashjit
