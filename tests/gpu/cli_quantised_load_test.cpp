// `flashjit run` on quantised inputs from .npy files: float32 values that the command quantises
// itself (it reports the scales it chose), and fp8 values with their scale files, each checked
// against the reference kernel; a scaled input without its scale file, or a scale file of the
// wrong shape, is refused by name. A shared K/V (latent) config loads whole K rows and refuses
// a V file.
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "gpu_test_support.hpp"

#include "../cpu/cli_test_support.hpp"
#include "cli/npy.hpp"
#include "generator/element_types.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>

namespace flashjit::testing {
namespace {

using cli::test::contains;
using cli::test::Outcome;
using cli::test::Scratch;

// e4m3 Q per token (fp32 scales), K per head, V per tensor; one sequence of 64 queries and 128
// keys, 2 heads of 64 columns.
const char* kConfig = R"({"schema": "flashjit.attention.v1", "dtype": {"qkv": "e4m3", "out": "bf16", "scale": "fp32"},
  "head_dim": {"qk": 64, "v": 64}, "mask": "causal",
  "scales": {"q": "per_token", "k": "per_head", "v": "per_tensor"}, "tuning": {"family": "sm80"}})";
constexpr int kSq = 64, kSk = 128, kHeads = 2, kD = 64;

std::vector<float> values(size_t n, float phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 3.f * std::sin(phase + 0.61f * float(i)) * float(1 + (i / kD) % 5);
  return v;
}

void save_floats(const std::string& file, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  cli::write_npy(file, "<f4", shape, v.data(), v.size() * 4);
}

// e4m3 bit patterns of values already within its range.
void save_e4m3(const std::string& file, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  const ElementType& e4m3 = element_type(DType::e4m3);
  std::vector<unsigned char> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) store_element(e4m3, v[i], &bits[i]);
  cli::write_npy(file, "|u1", shape, bits.data(), bits.size());
}

// The config and Q, K, V (bshd, one sequence) in `s`, written by `save`.
void save_inputs(const Scratch& s, void (*save)(const std::string&, const std::vector<int64_t>&,
                                                 const std::vector<float>&)) {
  s.write("cfg.json", kConfig);
  save((s / "q.npy").string(), {1, kSq, kHeads, kD}, values(size_t(kSq) * kHeads * kD, 0.1f));
  save((s / "k.npy").string(), {1, kSk, kHeads, kD}, values(size_t(kSk) * kHeads * kD, 0.7f));
  save((s / "v.npy").string(), {1, kSk, kHeads, kD}, values(size_t(kSk) * kHeads * kD, 1.3f));
}

Outcome run(const Scratch& s, std::vector<std::string> extra) {
  std::vector<std::string> args = {"run", (s / "cfg.json").string(), "--arch", "native", "--batch", "1",
                                   "--seqlen-q", std::to_string(kSq), "--seqlen-k", std::to_string(kSk),
                                   "--heads", std::to_string(kHeads), "--check", "--json", "--warmup", "0",
                                   "--iters", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return cli::test::run_binary(args, {{"FLASHJIT_CACHE_DIR", (s / "cache").string()}}, s.path());
}

TEST(CliQuantisedLoad, Float32InputsAreQuantisedAndReported) {
  FLASHJIT_REQUIRE_GPU();
  Scratch s;
  save_inputs(s, save_floats);
  const Outcome o = run(s, {"--load-q", (s / "q.npy").string(), "--load-k", (s / "k.npy").string(), "--load-v",
                            (s / "v.npy").string()});
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_TRUE(j["check"]["passed"].get<bool>()) << o.out;
  ASSERT_EQ(j["quantised"].size(), 3u) << o.out;
  EXPECT_TRUE(contains(j["quantised"][0].get<std::string>(), "per_token: 128 scales in [")) << o.out;
  EXPECT_TRUE(contains(j["quantised"][1].get<std::string>(), "per_head: 2 scales in [")) << o.out;
  EXPECT_TRUE(contains(j["quantised"][2].get<std::string>(), "per_tensor: scale ")) << o.out;
}

TEST(CliQuantisedLoad, Fp8InputsTakeTheirScaleFiles) {
  FLASHJIT_REQUIRE_GPU();
  Scratch s;
  save_inputs(s, save_e4m3);
  std::vector<float> q_scale(size_t(kHeads) * kSq);
  for (size_t i = 0; i < q_scale.size(); ++i) q_scale[i] = 0.01f * float(1 + i % 9);
  save_floats((s / "q_scale.npy").string(), {1, kHeads, kSq}, q_scale);
  save_floats((s / "k_scale.npy").string(), {kHeads}, {0.02f, 0.05f});
  save_floats((s / "v_scale.npy").string(), {1}, {0.1f});
  const std::vector<std::string> files = {"--load-q", (s / "q.npy").string(), "--load-k", (s / "k.npy").string(),
                                          "--load-v", (s / "v.npy").string(), "--load-k-scale",
                                          (s / "k_scale.npy").string(), "--load-v-scale", (s / "v_scale.npy").string()};
  std::vector<std::string> all = files;
  all.insert(all.end(), {"--load-q-scale", (s / "q_scale.npy").string()});
  const Outcome ok = run(s, all);
  ASSERT_EQ(ok.code, 0) << ok.err;
  const nlohmann::json j = nlohmann::json::parse(ok.out);
  EXPECT_TRUE(j["check"]["passed"].get<bool>()) << ok.out;
  EXPECT_FALSE(j.contains("quantised")) << ok.out;

  const Outcome missing = run(s, files);  // Q is scaled, its scale file not given
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(contains(missing.err, "--load-q-scale FILE")) << missing.err;

  save_floats((s / "wrong.npy").string(), {kHeads, kSq}, q_scale);
  std::vector<std::string> wrong = files;
  wrong.insert(wrong.end(), {"--load-q-scale", (s / "wrong.npy").string()});
  const Outcome bad = run(s, wrong);
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "needs (1, 2, 64)")) << bad.err;
}

// MLA's latent cache: K's rows (512 nope + 64 rope columns) from one file, V their first 512.
TEST(CliQuantisedLoad, LatentConfigsLoadKAndRefuseV) {
  FLASHJIT_REQUIRE_GPU();
  Scratch s;
  s.write("mla.json", R"({"schema": "flashjit.attention.v1", "dtype": {"qkv": "bf16", "out": "bf16"},
    "head_dim": {"qk": 576, "v": 512, "rope": 64}, "group": 16, "kv_layout": {"shared_kv": true}})");
  constexpr int kKeys = 300;
  save_floats((s / "k.npy").string(), {1, kKeys, 1, 576}, values(size_t(kKeys) * 576, 0.3f));
  std::vector<std::string> args = {"run", (s / "mla.json").string(), "--arch", "native", "--batch", "1",
                                   "--seqlen-q", "1", "--seqlen-k", std::to_string(kKeys), "--heads", "16",
                                   "--kv-heads", "1", "--check", "--json", "--warmup", "0", "--iters", "1",
                                   "--load-k", (s / "k.npy").string()};
  const std::map<std::string, std::string> env = {{"FLASHJIT_CACHE_DIR", (s / "cache").string()}};
  const Outcome ok = cli::test::run_binary(args, env, s.path());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(nlohmann::json::parse(ok.out)["check"]["passed"].get<bool>()) << ok.out;
  args.insert(args.end(), {"--load-v", (s / "k.npy").string()});
  const Outcome refused = cli::test::run_binary(args, env, s.path());
  EXPECT_EQ(refused.code, 2);
  EXPECT_TRUE(contains(refused.err, "kv_layout.shared_kv = true, so V is the first head_dim.v columns of K")) << refused.err;
}

}  // namespace
}  // namespace flashjit::testing

#endif  // FLASHJIT_CLI_PATH
