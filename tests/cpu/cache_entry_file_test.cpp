// The .fjc format: byte layout, file names, and the decoder's verdicts.
#include "cache/entry_file.hpp"
#include "cache_test_support.hpp"

#include <gtest/gtest.h>

namespace flashjit::cache::test {
namespace {

std::uint64_t le(const std::string& b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

std::string hex(std::string_view raw) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned char c : raw) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

TEST(CacheEntryFile, LayoutIsAsDocumented) {
  const Key key = key_of("layout");
  const std::string manifest = R"({"kernel":"k"})", binary = std::string("\x7f" "ELF\0\1", 6);
  const std::string b = encode_entry_raw(key.hex, "fwd_x", manifest, binary);
  ASSERT_EQ(b.size(), 256 + manifest.size() + binary.size());
  EXPECT_EQ(b.substr(0, 8), "FJITCACH");
  EXPECT_EQ(le(b, 8, 4), 5u);
  EXPECT_EQ(le(b, 8, 4), kFormatVersion);
  EXPECT_EQ(le(b, 12, 4), 256u);
  EXPECT_EQ(le(b, 16, 8), manifest.size());
  EXPECT_EQ(le(b, 24, 8), binary.size());
  EXPECT_EQ(b.substr(64, 64), key.hex);
  EXPECT_EQ(le(b, 128, 1), 5u);
  EXPECT_EQ(b.substr(129, 5), "fwd_x");
  EXPECT_EQ(b.substr(134, 256 - 134), std::string(256 - 134, '\0'));
  EXPECT_EQ(hex(b.substr(32, 32)), sha256_hex(b.substr(0, 32) + b.substr(64, 192) + manifest + binary));
  EXPECT_EQ(b.substr(256, manifest.size()), manifest);
  EXPECT_EQ(b.substr(256 + manifest.size()), binary);

  const Decoded d = decode_entry(b, key.hex);
  ASSERT_TRUE(d.entry.has_value()) << d.problem;
  EXPECT_EQ(d.entry->manifest, nlohmann::json::parse(manifest));
  EXPECT_EQ(d.entry->binary, binary);
  ASSERT_TRUE(d.header.has_value());
  EXPECT_EQ(d.header->name, "fwd_x");
  EXPECT_EQ(file_name_problem("fwd_x." + key.hex + ".fjc", *d.header), "");
  // the file says whose entry it is: another key's lookup, or another file name, is told so
  const Decoded other = decode_entry(b, key_of("other").hex);
  EXPECT_FALSE(other.entry.has_value());
  EXPECT_NE(other.problem.find("holds the entry of key " + key.hex.substr(0, 16)), std::string::npos) << other.problem;
  EXPECT_NE(file_name_problem("fwd_y." + key.hex + ".fjc", *d.header).find("misnamed"), std::string::npos);
  EXPECT_NE(file_name_problem("fwd_x." + key_of("other").hex + ".fjc", *d.header).find("misnamed"), std::string::npos);
}

TEST(CacheEntryFile, TheDocumentedLayoutIsTheOneWritten) {
  const std::string doc = read_bytes(fs::path(FLASHJIT_SOURCE_DIR) / "docs" / "cache.md");
  EXPECT_NE(doc.find("format version, u32 little-endian (currently " + std::to_string(kFormatVersion) + ")"),
            std::string::npos);
  EXPECT_NE(doc.find("header size, u32 (" + std::to_string(kHeaderSize) + ")"), std::string::npos);
}

TEST(CacheEntryFile, EncodeNeverThrowsOnBadUtf8) {
  Entry e;
  e.manifest = {{"s", std::string("\xff\xfe")}};
  std::string b;
  ASSERT_NO_THROW(b = encode_entry(key_of("u").hex, "u", e));
  EXPECT_TRUE(decode_entry(b, key_of("u").hex).entry.has_value());
}

TEST(CacheEntryFile, HeaderNamesAreSanitizedAndChecked) {
  const std::string k = key_of("h").hex;
  const std::string b = encode_entry_raw(k, "a\nb\x1b[31m", "{}", "");
  const auto h = parse_header(b, b.size());
  ASSERT_TRUE(h.header.has_value()) << h.problem;
  EXPECT_EQ(h.header->name, "a_b__31m");
  auto broken = [&](std::size_t at, char c) {
    std::string x = b;
    x[at] = c;
    return parse_header(x, x.size()).problem;
  };
  EXPECT_NE(broken(129, '\n').find("name in the header"), std::string::npos);
  EXPECT_NE(broken(128, 0).find("name in the header"), std::string::npos);
  EXPECT_NE(broken(128, 101).find("name in the header"), std::string::npos);
  EXPECT_NE(broken(200, 'x').find("padding"), std::string::npos);
  EXPECT_NE(broken(64, 'X').find("key in the header"), std::string::npos);
}

TEST(CacheEntryFile, ManifestNestingAndSizeAreBounded) {
  const std::string k = key_of("m").hex;
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  const Decoded d = decode_entry(encode_entry_raw(k, "m", deep, "bin"), k);
  EXPECT_FALSE(d.entry.has_value());
  EXPECT_NE(d.problem.find("nests deeper than 64 levels"), std::string::npos) << d.problem;
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  EXPECT_NE(parse_manifest(objects).problem.find("deeper than 64"), std::string::npos);
  const std::string deepest = std::string(63, '[') + "{\"a\": 1}" + std::string(63, ']');  // 64 levels
  EXPECT_TRUE(parse_manifest(deepest).manifest.has_value()) << parse_manifest(deepest).problem;
  EXPECT_FALSE(parse_manifest("[" + deepest + "]").manifest.has_value());

  const std::string big(kMaxManifestBytes + 1, ' ');
  EXPECT_NE(parse_manifest(big).problem.find("over the limit of " + std::to_string(kMaxManifestBytes)),
            std::string::npos);
  const std::string file = encode_entry_raw(k, "m", big, "");
  EXPECT_NE(parse_header(file, file.size()).problem.find("over the limit"), std::string::npos);
}

TEST(CacheEntryFile, FileNames) {
  const Key key = key_of("n");
  EXPECT_EQ(entry_file_name(key, "fwd_sm90a_bf16_d128_causal"), "fwd_sm90a_bf16_d128_causal." + key.hex + ".fjc");
  const auto p = parse_entry_file_name("a.b.c." + key.hex + ".fjc");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "a.b.c");
  EXPECT_EQ(p->key, key.hex);
  EXPECT_FALSE(parse_entry_file_name(key.hex + ".fjc"));  // no name
  EXPECT_FALSE(parse_entry_file_name("x." + key.hex + ".fjc.tmp"));
  EXPECT_FALSE(parse_entry_file_name("x_" + key.hex + ".fjc"));
  EXPECT_FALSE(parse_entry_file_name("x." + key.hex.substr(1) + "A.fjc"));  // uppercase hex
  EXPECT_FALSE(parse_entry_file_name("x.fjc"));
  EXPECT_FALSE(parse_entry_file_name("a\nb." + key.hex + ".fjc"));  // only names flashjit gives files
  EXPECT_FALSE(parse_entry_file_name("\x1b[2J." + key.hex + ".fjc"));
  EXPECT_THROW(entry_file_name(Key{"abc"}, "x"), std::invalid_argument);
}

TEST(CacheEntryFile, SanitizeName) {
  EXPECT_EQ(sanitize_name("fwd_sm90a-bf16+x=1.v2"), "fwd_sm90a-bf16+x=1.v2");
  EXPECT_EQ(sanitize_name("a/b c\n\xc3\xa9"), "a_b_c___");
  EXPECT_EQ(sanitize_name(".hidden"), "_hidden");
  EXPECT_EQ(sanitize_name(".."), "_.");
  EXPECT_EQ(sanitize_name(""), "entry");
  EXPECT_EQ(sanitize_name(std::string(300, 'x')).size(), 100u);
}

TEST(CacheEntryFile, DecoderProblems) {
  const std::string k = key_of("d").hex;
  const std::string good = encode_entry_raw(k, "d", "[1]", "bin");
  EXPECT_EQ(decode_entry("", k).problem, "file is empty");
  EXPECT_NE(decode_entry(good.substr(0, 255), k).problem.find("shorter than the 256-byte header"), std::string::npos);
  EXPECT_NE(decode_entry("NOTMAGIC" + good.substr(8), k).problem.find("bad magic"), std::string::npos);
  EXPECT_NE(decode_entry(good.substr(0, good.size() - 1), k).problem.find("do not match the file size"),
            std::string::npos);
  EXPECT_NE(decode_entry(encode_entry_raw(k, "d", "{oops", "bin"), k).problem.find("not valid JSON"), std::string::npos);
  // huge sizes in the header must not overflow into a "match"
  std::string huge = good;
  for (int i = 16; i < 32; ++i) huge[i] = '\xff';
  EXPECT_NE(decode_entry(huge, k).problem.find("do not match"), std::string::npos);
  std::string wrap = good;  // manifest size + binary size wraps around to the body size
  const std::uint64_t m = ~0ull, bsz = (good.size() - 256) + 1;
  for (int i = 0; i < 8; ++i) {
    wrap[16 + i] = static_cast<char>(m >> (8 * i));
    wrap[24 + i] = static_cast<char>(bsz >> (8 * i));
  }
  EXPECT_NE(decode_entry(wrap, k).problem.find("do not match"), std::string::npos);
}

}  // namespace
}  // namespace flashjit::cache::test
