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
