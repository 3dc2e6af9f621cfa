// The built `flashjit` binary as a subprocess: exit codes, stderr, environment variables.
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "cli_test_support.hpp"
#include "runtime/driver.hpp"

namespace flashjit::cli::test {
namespace {

const std::string kDefault = example("configs/default.json");

Outcome flashjit_cmd(const Scratch& s, const std::vector<std::string>& args,
                     std::map<std::string, std::string> env = {}) {
  env.emplace("FLASHJIT_CACHE_DIR", (s / "cache").string());
  env.emplace("FLASHJIT_CACHE_PATH", "");
  env.emplace("FLASHJIT_OFFLINE", "0");
  return run_binary(args, env, s.path());
}

void expect_no_type_names(const std::string& err) {
  for (const char* t : {"ConfigError", "std::", "UsageError", "NpyError", "terminate called", "what():"})
    EXPECT_FALSE(contains(err, t)) << t << " in:\n" << err;
}

TEST(CliProcess, VersionAndHelp) {
  Scratch s;
  Outcome o = flashjit_cmd(s, {"--version"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "flashjit ")) << o.out;
  EXPECT_TRUE(contains(o.out, "NVRTC ")) << o.out;
  o = flashjit_cmd(s, {"--help"});
  EXPECT_EQ(o.code, 0);
  for (const char* cmd : {"generate", "compile", "precompile", "run", "bench", "cache", "config"})
    EXPECT_TRUE(contains(o.out, cmd)) << cmd;
  o = flashjit_cmd(s, {"cache", "list", "--help"});
  EXPECT_EQ(o.code, 0);
  EXPECT_TRUE(contains(o.out, "--json"));
}

TEST(CliProcess, ErrorsGoToStderrWithExitCodes) {
  Scratch s;
  Outcome o = flashjit_cmd(s, {});
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(o.out.empty());
  EXPECT_TRUE(contains(o.err, "error: ")) << o.err;

  o = flashjit_cmd(s, {"generate", kDefault, "--bogus"});
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(contains(o.err, "--bogus")) << o.err;

  const std::string bad = s.write("bad.json", R"({"head_dim": {"qk": 100}, "group": 0})");
  o = flashjit_cmd(s, {"compile", bad});
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(contains(o.err, "error: ")) << o.err;
  EXPECT_TRUE(contains(o.err, "head_dim.qk = 100: must be a multiple of 16")) << o.err;
  EXPECT_TRUE(contains(o.err, "group = 0")) << o.err;
  expect_no_type_names(o.err);

  o = flashjit_cmd(s, {"generate", bad});
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(contains(o.err, "\nerror: group = 0") || o.err.rfind("error: group = 0", 0) == 0) << o.err;
  expect_no_type_names(o.err);
}

TEST(CliProcess, EnvironmentSelectsTheCache) {
  Scratch s;
  Outcome o = flashjit_cmd(s, {"cache", "path"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, (s / "cache").string() + "\n");

  // Offline with an empty cache: a miss is an error that names the kernel (exit 1).
  o = flashjit_cmd(s, {"compile", kDefault}, {{"FLASHJIT_OFFLINE", "1"}});
  EXPECT_EQ(o.code, 1);
  EXPECT_TRUE(contains(o.err, "offline")) << o.err;
  EXPECT_TRUE(contains(o.err, "fwd_sm90a")) << o.err;
  expect_no_type_names(o.err);

  o = flashjit_cmd(s, {"cache", "list"}, {{"FLASHJIT_CACHE_MAX_BYTES", "12 parsecs"}});
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(contains(o.err, "FLASHJIT_CACHE_MAX_BYTES")) << o.err;
}

TEST(CliProcess, RunWithoutAGpuSaysSo) {
  if (gpu_available()) GTEST_SKIP() << "a GPU is present; the no-GPU message is not reachable";
  Scratch s;
  for (const char* cmd : {"run", "bench"}) {
    const Outcome o = flashjit_cmd(s, {cmd, kDefault, "--batch", "1", "--seqlen-q", "64"});
    EXPECT_EQ(o.code, 1) << cmd;
    EXPECT_TRUE(contains(o.err, "error: no GPU")) << o.err;
    expect_no_type_names(o.err);
  }
  const Outcome native = flashjit_cmd(s, {"generate", kDefault, "--arch", "native"});
  EXPECT_EQ(native.code, 1);
  EXPECT_TRUE(contains(native.err, "no GPU")) << native.err;
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
