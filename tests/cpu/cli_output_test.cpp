// Output that cannot be written (a full disk, /dev/full) makes every command fail, saying where
// the output was going.
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cli_test_support.hpp"

#include <streambuf>

namespace flashjit::cli::test {
namespace {

const std::string kDefault = example("configs/default.json");

// A stream whose every write fails, as std::cout does on a full disk.
class FullBuffer : public std::streambuf {
 protected:
  int overflow(int) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

// Runs the flashjit binary through sh with its standard output on /dev/full.
Outcome to_dev_full(const Scratch& s, const std::string& args) {
  const std::string command = "exec '" + std::string(FLASHJIT_CLI_PATH) + "' " + args + " > /dev/full";
  return run_program("/bin/sh", {"-c", command},
                     {{"FLASHJIT_CACHE_DIR", (s / "cache").string()}, {"FLASHJIT_CACHE_PATH", ""}}, s.path());
}

TEST(CliOutput, EveryCommandFailsWhenStandardOutputCannotBeWritten) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  Scratch s;
  for (const std::string& args : std::vector<std::string>{"generate " + kDefault, "generate --flat " + kDefault, "config schema",
                                 "config resolve " + kDefault, "config validate " + kDefault, "cache list",
                                 "cache list --json", "cache path", "--help", "--version"}) {
    const Outcome o = to_dev_full(s, args);
    EXPECT_EQ(o.code, 1) << args << "\n" << o.err;
    EXPECT_TRUE(contains(o.err, "error: cannot write to standard output")) << args << "\n" << o.err;
  }
}

TEST(CliOutput, GenerateIntoAFileThatCannotBeWrittenFails) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const Outcome o = cli(nullptr, {"generate", kDefault, "-o", "/dev/full"});
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_TRUE(contains(o.err, "/dev/full: cannot write the generated source: No space left on device")) << o.err;
  EXPECT_FALSE(contains(o.err, "wrote ")) << o.err;

  Scratch s;
  const Outcome missing = cli(nullptr, {"generate", kDefault, "-o", (s / "no/such/dir/a.cu").string()});
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_TRUE(contains(missing.err, "cannot create the output file: No such file or directory")) << missing.err;
}

TEST(CliOutput, NamedOutputsAreNeverWrittenThroughAnotherUsersLinkOrFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a link to another user needs root";
  Scratch s;
  const fs::path shared = s / "tmp", victim = s / "victim";
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  std::ofstream(victim) << "precious";
  // What another user can do in /tmp before root names the file.
  auto plant_link = [&](const std::string& name) {
    const fs::path link = shared / name;
    fs::create_symlink(victim, link);
    EXPECT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
    return link.string();
  };
  const Outcome gen = cli(nullptr, {"generate", kDefault, "-o", plant_link("attn.cu")});
  EXPECT_EQ(gen.code, 2) << gen.err;
  EXPECT_TRUE(contains(gen.err, "cannot create the output file: it is a symbolic link of nobody")) << gen.err;
  const std::string manifest = s.write("m.json", R"({"schema": "flashjit.manifest.v1", "configs": []})");
  auto store = private_store(s / "cache");
  const Outcome pre = cli(store.get(), {"precompile", manifest, "--json-summary", plant_link("summary.json")});
  EXPECT_EQ(pre.code, 1) << pre.err;
  EXPECT_TRUE(contains(pre.err, "cannot write the JSON summary: it is a symbolic link of nobody")) << pre.err;
  EXPECT_EQ(read_file(victim), "precious");
  // A file another user made there first is not theirs to read what root writes.
  const fs::path theirs = shared / "theirs.cu";
  std::ofstream(theirs) << "";
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  const Outcome into_theirs = cli(nullptr, {"generate", kDefault, "-o", theirs.string()});
  EXPECT_EQ(into_theirs.code, 2);
  EXPECT_TRUE(contains(into_theirs.err, "it is a regular file of nobody")) << into_theirs.err;
  EXPECT_EQ(fs::file_size(theirs), 0u);
  // The user's own link, a device and a file of the user's are written as named.
  fs::create_symlink(victim, shared / "mine.cu");
  EXPECT_EQ(cli(nullptr, {"generate", kDefault, "-o", (shared / "mine.cu").string()}).code, 0);
  EXPECT_TRUE(read_file(victim).starts_with("// flashjit generated kernel")) << read_file(victim);
  EXPECT_EQ(cli(nullptr, {"generate", kDefault, "-o", "/dev/null"}).code, 0);
  EXPECT_EQ(cli(nullptr, {"generate", kDefault, "-o", theirs.string() + ".new"}).code, 0);
  EXPECT_EQ(cli(nullptr, {"generate", kDefault, "-o", theirs.string() + ".new"}).code, 0) << "overwriting its own file";
}

// The check is generic: run_cli looks at the stream after any command, however it ended.
TEST(CliOutput, RunCliChecksItsOutputStreamAfterTheCommand) {
  FullBuffer full;
  std::ostream out(&full);
  std::ostringstream err;
  Context ctx{out, err};
  ctx.out_name = "the test's stream";
  EXPECT_EQ(run_cli({"config", "schema"}, ctx), 1);
  EXPECT_TRUE(contains(err.str(), "error: cannot write to the test's stream")) << err.str();

  // A command that failed keeps its own exit status.
  std::ostream out2(&full);
  std::ostringstream err2;
  Context ctx2{out2, err2};
  EXPECT_EQ(run_cli({"config", "validate", "/nonexistent.json"}, ctx2), 2);

  // Nothing written to it, nothing lost.
  Scratch s;
  std::ostream out3(&full);
  std::ostringstream err3;
  Context ctx3{out3, err3};
  EXPECT_EQ(run_cli({"generate", kDefault, "-o", (s / "a.cu").string()}, ctx3), 0) << err3.str();
  EXPECT_FALSE(contains(err3.str(), "cannot write")) << err3.str();
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
