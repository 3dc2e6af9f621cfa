// The .npy reader/writer of `flashjit run`, and the tensor shapes and conversions it applies.
#ifdef FLASHJIT_CLI_PATH  // built with the flashjit command (FLASHJIT_BUILD_CLI)

#include "generator/element_types.hpp"
#include "cli/npy.hpp"
#include "cli/tensor_io.hpp"
#include "cli_test_support.hpp"

#include <cstring>

namespace flashjit::cli::test {
namespace {

std::string header_bytes(const std::string& dict, int version = 1) {
  std::string h = std::string("\x93NUMPY", 6) + char(version) + '\0';
  std::string d = dict + "\n";
  if (version == 1) {
    h += char(d.size() & 0xff);
    h += char((d.size() >> 8) & 0xff);
  } else {
    for (int i = 0; i < 4; ++i) h += char((d.size() >> (8 * i)) & 0xff);
  }
  return h + d;
}

TEST(CliNpy, RoundTripsEveryElementType) {
  Scratch s;
  std::vector<uint16_t> h = {1, 2, 3, 0xffff, 0x7fc0, 0};
  std::vector<float> f = {1.5f, -2.f, 0.f, 3.25f};
  struct Case {
    std::string descr;
    std::vector<int64_t> shape;
    const void* data;
    size_t bytes;
  };
  const Case cases[] = {
      {"<f2", {2, 3}, h.data(), h.size() * 2},
      {"<u2", {1, 2, 1, 3}, h.data(), h.size() * 2},
      {"<f4", {4}, f.data(), f.size() * 4},
      {"<f4", {}, f.data(), 4},          // a scalar
      {"<u2", {0, 5}, h.data(), 0},     // empty
  };
  for (const auto& c : cases) {
    const std::string file = (s / "a.npy").string();
    write_npy(file, c.descr, c.shape, c.data, c.bytes);
    const std::string bytes = read_file(file);
    EXPECT_EQ((bytes.size() - c.bytes) % 64, 0u) << "data starts on a 64-byte boundary";
    const NpyArray a = read_npy(file);
    EXPECT_EQ(a.descr, c.descr);
    EXPECT_EQ(a.shape, c.shape);
    ASSERT_EQ(a.data.size(), c.bytes);
    EXPECT_EQ(std::memcmp(a.data.data(), c.data, c.bytes), 0);
  }
}

TEST(CliNpy, ReadsNumpyStyleHeadersAndVersion2) {
  const std::string data(12, '\x01');
  NpyArray a = parse_npy(header_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }   ") + data, "x.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  a = parse_npy(header_bytes("{\"shape\": (6,), \"descr\": \"<u2\", \"fortran_order\": False}", 2) + data, "x.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{6}));
  EXPECT_EQ(a.shape_string(), "(6,)");
  a = parse_npy(header_bytes("{'descr': '<V2', 'fortran_order': False, 'shape': (3, 2L), }") + data, "x.npy");
  EXPECT_EQ(a.item_size(), 2);
}

TEST(CliNpy, RejectsBadFilesNamingThem) {
  const std::string data(12, '\0');
  auto expect_error = [](const std::string& bytes, const std::string& part) {
    try {
      parse_npy(bytes, "inputs/q.npy");
      ADD_FAILURE() << "no error for " << part;
    } catch (const NpyError& e) {
      EXPECT_TRUE(contains(e.what(), "inputs/q.npy")) << e.what();
      EXPECT_TRUE(contains(e.what(), part)) << e.what();
    }
  };
  expect_error(header_bytes("{'descr': '<f2', 'fortran_order': True, 'shape': (2, 3), }") + data, "fortran_order");
  expect_error(header_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (2, 3), }") + data, "little-endian");
  expect_error(header_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 4), }") + data, "needs 16");
  expect_error(header_bytes("{'descr': '<f2', 'shape': (2, 3), }") + data, "lacks");
  expect_error("PK\x03\x04 not numpy", "magic");
  EXPECT_THROW(read_npy("/nonexistent/q.npy"), NpyError);
}

// Shapes whose sizes overflow 64 bits, headers that claim more than the file holds: errors that
// name the limit, never a wrap-around or a huge allocation.
TEST(CliNpy, HugeShapesAndHeadersAreRejectedNamingTheLimit) {
  auto error_of = [](const std::string& bytes) {
    try {
      parse_npy(bytes, "big.npy");
    } catch (const NpyError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto dict = [](const std::string& descr, const std::string& shape) {
    return header_bytes("{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }");
  };
  // 2^48 x 2^48 elements: the product is beyond 64 bits.
  EXPECT_TRUE(contains(error_of(dict("<f2", "(281474976710656, 281474976710656)")), "1 TiB")) << error_of(dict("<f2", "(281474976710656, 281474976710656)"));
  // 2^21 x 2^21 x 2^21 = 2^63 elements, x 2 bytes wraps to 0 without checks.
  EXPECT_TRUE(contains(error_of(dict("<f2", "(2097152, 2097152, 2097152)")), "1 TiB"));
  EXPECT_TRUE(contains(error_of(dict("<f2", "(2, 99999999999999999999999)")), "exceeds 2^48"));
  std::string many = "(";
  for (int i = 0; i < 40; ++i) many += "1, ";
  EXPECT_TRUE(contains(error_of(dict("<f2", many + ")")), "more than 32 dimensions"));
  EXPECT_TRUE(contains(error_of(dict("<f99999999999999999999", "(2,)")), "unsupported dtype"));
  // A version 2 header that claims 4 GiB.
  std::string v2 = std::string("\x93NUMPY", 6) + '\x02' + '\0' + std::string("\xff\xff\xff\xff", 4) + "{}";
  EXPECT_TRUE(contains(error_of(v2), "headers of up to 65536")) << error_of(v2);
  // A long descr is cut in the message.
  const std::string e = error_of(dict(">" + std::string(10000, 'x'), "(1,)"));
  EXPECT_LT(e.size(), 400u);
  EXPECT_TRUE(contains(e, "(10001 bytes)")) << e;

  // A file whose header declares more data than it holds is rejected before the data is read.
  Scratch s;
  const std::string file = s.write("lie.npy", dict("<f2", "(1048576, 262144)") + std::string(64, '\0'));
  try {
    read_npy(file);
    ADD_FAILURE() << "accepted a truncated file";
  } catch (const NpyError& err) {
    EXPECT_TRUE(contains(err.what(), "needs 549755813888")) << err.what();
  }
}

TEST(CliNpy, TensorShapesFollowTheLayout) {
  Config c;
  c.head_dim.qk = 192;
  c.head_dim.v = 128;
  c.group = 2;
  c.lse = true;
  ProblemShape s;
  s.batch = 2;
  s.seqlen_q = 5;
  s.seqlen_k = 7;
  s.heads_q = 4;
  s.heads_k = 2;
  EXPECT_EQ(npy_shape(TensorRole::q, c, s, 10, 14), (std::vector<int64_t>{2, 5, 4, 192}));
  EXPECT_EQ(npy_shape(TensorRole::v, c, s, 10, 14), (std::vector<int64_t>{2, 7, 2, 128}));
  EXPECT_EQ(npy_shape(TensorRole::lse, c, s, 10, 14), (std::vector<int64_t>{2, 4, 5}));
  s.layout = Layout::bhsd;
  EXPECT_EQ(npy_shape(TensorRole::k, c, s, 10, 14), (std::vector<int64_t>{2, 2, 7, 192}));
  EXPECT_EQ(npy_shape(TensorRole::o, c, s, 10, 14), (std::vector<int64_t>{2, 4, 5, 128}));
  c.varlen = true;
  EXPECT_EQ(npy_shape(TensorRole::q, c, s, 9, 11), (std::vector<int64_t>{9, 4, 192}));
  EXPECT_EQ(npy_shape(TensorRole::lse, c, s, 9, 11), (std::vector<int64_t>{4, 9}));
}

TEST(CliNpy, ConvertsInputsToTheConfigDtype) {
  NpyArray a;
  a.descr = "<f4";
  a.shape = {2};
  const float v[2] = {1.0f, -0.5f};
  a.data.assign(reinterpret_cast<const char*>(v), 8);
  const ElementType &bf16 = element_type(DType::bf16), &fp16 = element_type(DType::fp16),
                    &e4m3 = element_type(DType::e4m3);
  auto bf = to_elements(a, DType::bf16, {2}, "q.npy", TensorRole::q);
  ASSERT_EQ(bf.size(), 4u);
  EXPECT_EQ(load_element(bf16, &bf[0]), 1.0f);
  EXPECT_EQ(load_element(bf16, &bf[2]), -0.5f);
  auto hf = to_elements(a, DType::fp16, {2}, "q.npy", TensorRole::q);
  EXPECT_EQ(load_element(fp16, &hf[0]), 1.0f);
  EXPECT_EQ(load_element(fp16, &hf[2]), -0.5f);
  auto f8 = to_elements(a, DType::e4m3, {2}, "q.npy", TensorRole::q);
  ASSERT_EQ(f8.size(), 2u);
  EXPECT_EQ(f8[0], 0x38);  // 1.0: exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(f8[1], 0xb0);  // -0.5

  NpyArray h;
  h.descr = "<f2";
  h.shape = {1, 2};
  h.data = std::string(4, '\0');
  EXPECT_NO_THROW(to_elements(h, DType::fp16, {1, 2}, "k.npy", TensorRole::k));
  try {
    to_elements(h, DType::bf16, {1, 2}, "k.npy", TensorRole::k);
    ADD_FAILURE() << "fp16 data accepted for a bf16 config";
  } catch (const NpyError& e) {
    EXPECT_TRUE(contains(e.what(), "k.npy")) << e.what();
    EXPECT_TRUE(contains(e.what(), "'<u2'")) << e.what();
  }
  try {
    to_elements(h, DType::fp16, {2, 1}, "k.npy", TensorRole::k);
    ADD_FAILURE() << "shape mismatch accepted";
  } catch (const NpyError& e) {
    EXPECT_TRUE(contains(e.what(), "(1, 2)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "(2, 1)")) << e.what();
  }
}

TEST(CliNpy, Fp8FilesHoldRawBits) {
  NpyArray b;
  b.descr = "|u1";
  b.shape = {3};
  b.data = std::string("\x38\xb0\x7e", 3);
  auto f8 = to_elements(b, DType::e4m3, {3}, "v.npy", TensorRole::v);
  EXPECT_EQ(std::string(f8.begin(), f8.end()), b.data);
  b.descr = "|V1";
  EXPECT_NO_THROW(to_elements(b, DType::e5m2, {3}, "v.npy", TensorRole::v));
  b.descr = "<f2";
  b.data = std::string(6, '\0');
  try {
    to_elements(b, DType::e4m3, {3}, "v.npy", TensorRole::v);
    ADD_FAILURE() << "fp16 data accepted for an e4m3 config";
  } catch (const NpyError& e) {
    EXPECT_TRUE(contains(e.what(), "'|u1'")) << e.what();
  }
}

}  // namespace
}  // namespace flashjit::cli::test

#endif  // FLASHJIT_CLI_PATH
