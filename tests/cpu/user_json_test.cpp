// Hostile config text: nesting, size, repeated keys, and the values error messages echo.
#include "generator/config.hpp"
#include "generator/excerpt.hpp"
#include "generator/resolve.hpp"
#include "generator/user_json.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace flashjit {
namespace {

using nlohmann::json;

// The issues parse_config_text reports for `text` (none when it parses).
std::vector<ConfigIssue> text_issues(const std::string& text) {
  try {
    parse_config_text(text, "input.json");
  } catch (const ConfigError& e) {
    return e.issues();
  }
  return {};
}

std::string joined(const std::vector<ConfigIssue>& issues) {
  std::string s;
  for (const auto& i : issues) s += i.path + " | " + i.value + " | " + i.rule + "\n";
  return s;
}

TEST(UserJson, DeepNestingIsRejectedNamingTheLimit) {
  const int n = 100000;  // 200 KB of text; walking it recursively overflows the stack
  const std::string arrays = std::string(n, '[') + std::string(n, ']');
  std::string objects;
  for (int i = 0; i < n; ++i) objects += "{\"a\":";
  objects += "1" + std::string(n, '}');
  const std::string inside = "{\"tuning\": " + arrays + "}";
  for (const std::string* text : std::vector<const std::string*>{&arrays, &objects, &inside}) {
    const auto issues = text_issues(*text);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_NE(issues[0].rule.find("deeper than 64 levels"), std::string::npos) << joined(issues);
    EXPECT_LT(issues[0].message().size(), 400u) << "the path is cut";
  }
  EXPECT_EQ(text_issues(inside)[0].path.rfind("tuning[0][0]", 0), 0u) << joined(text_issues(inside));

  // 64 levels are read (and rejected for what they hold, not for their depth).
  std::string ok = "{\"tuning\": " + std::string(63, '[') + std::string(63, ']') + "}";
  const auto fine = text_issues(ok);
  ASSERT_EQ(fine.size(), 1u);
  EXPECT_EQ(fine[0].path, "tuning");
  EXPECT_NE(fine[0].rule.find("must be an object"), std::string::npos) << joined(fine);
}

TEST(UserJson, RepeatedKeysAreRejectedWithTheirPath) {
  const auto top = text_issues(R"({"mask": "causal", "mask": "none"})");
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].path, "mask");
  EXPECT_NE(top[0].rule.find("duplicate key"), std::string::npos);

  const auto nested = text_issues(R"({"tuning": {"BN": 64, "BM": 128, "BN": 128}})");
  ASSERT_EQ(nested.size(), 1u);
  EXPECT_EQ(nested[0].path, "tuning.BN");

  std::string error;
  try {
    check_user_json(R"({"configs": [{}, {"a": [1, {"x": 1, "x": 2}]}]})", kMaxManifestBytes, "a manifest");
  } catch (const JsonInputError& e) {
    error = e.path();
  }
  EXPECT_EQ(error, "configs[1].a[1].x");
  // The same key in two objects is no repetition.
  EXPECT_NO_THROW(check_user_json(R"({"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 2}]})", 1000, "a test"));
}

TEST(UserJson, TextAndFilesAreBoundedInSize) {
  const std::string big = "{\"arch\": \"" + std::string(kMaxConfigBytes, 'x') + "\"}";
  const auto issues = text_issues(big);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_NE(issues[0].rule.find("larger than 1 MiB (1048576 bytes)"), std::string::npos) << joined(issues);

  // An endless file is recognised as too large after the limit, not read to its end.
  try {
    load_config_file("/dev/zero");
    ADD_FAILURE() << "read /dev/zero as a config";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("larger than 1 MiB"), std::string::npos) << e.what();
  }
}

TEST(UserJson, ParseErrorsAreCutAndEscaped) {
  // An unterminated string: nlohmann's message quotes all of it.
  const std::string text = "{\"arch\": \"" + std::string(1 << 20, 'y');
  const auto issues = text_issues(text.substr(0, kMaxConfigBytes - 10));
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_NE(issues[0].rule.find("not valid JSON"), std::string::npos);
  EXPECT_LT(issues[0].rule.size(), 400u);
  EXPECT_EQ(issues[0].rule.find("[json.exception"), std::string::npos) << issues[0].rule;
}

TEST(Excerpt, CutsLongValuesAndSaysHowLongTheyWere) {
  const std::string s(100 * 1000 * 1000, 'z');
  const std::string q = quoted_excerpt(s);
  EXPECT_LT(q.size(), 120u);
  EXPECT_NE(q.find("(100000000 bytes)"), std::string::npos) << q;
  EXPECT_EQ(quoted_excerpt("sm_90a"), "\"sm_90a\"");
  EXPECT_EQ(excerpt("plain"), "plain");
  EXPECT_LT(json_excerpt(json(s)).size(), 120u);
}

TEST(Excerpt, EscapesControlCharactersNulsAndBrokenUtf8) {
  EXPECT_EQ(quoted_excerpt(std::string("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(excerpt("line\n\x1b[31mred"), "line\\n\\u001b[31mred");
  EXPECT_EQ(excerpt("\xc2\x9b" "2J"), "\\u009b2J") << "C1 controls (CSI) are escaped";
  EXPECT_EQ(excerpt("caf\xc3\xa9"), "caf\xc3\xa9") << "printable UTF-8 stays";
  EXPECT_EQ(excerpt("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(quoted_excerpt("say \"hi\""), "\"say \\\"hi\\\"\"");
}

TEST(Excerpt, NumbersAreExactAndDeepValuesAreNotWalked) {
  EXPECT_EQ(json_excerpt(json::parse("18446744073709551615")), "18446744073709551615");
  EXPECT_EQ(json_excerpt(json::parse("-9223372036854775808")), "-9223372036854775808");
  EXPECT_EQ(json_excerpt(json::parse("[1, {\"a\": true}]")), "[1,{\"a\":true}]");
  // A value nested 100 000 deep, built without the parser (as a library caller might).
  json deep = json::array();
  for (int i = 0; i < 100000; ++i) deep = json::array({std::move(deep)});
  const std::string e = json_excerpt(deep);
  EXPECT_LT(e.size(), 120u);
  EXPECT_NE(e.find("an array of 1 values"), std::string::npos) << e;
  // ... and parse_config reports it as an unknown key without walking it.
  json config = {{"deep", std::move(deep)}};
  try {
    parse_config(config);
    ADD_FAILURE() << "accepted an unknown key";
  } catch (const ConfigError& err) {
    EXPECT_EQ(err.issues().at(0).path, "deep");
  }
}

TEST(Config, IntegersOutOfRangeAreReportedAsWritten) {
  for (const char* v : {"18446744073709551615", "9223372036854775808", "-9223372036854775808", "1073741825"}) {
    const auto issues = text_issues(std::string("{\"group\": ") + v + "}");
    ASSERT_EQ(issues.size(), 1u) << v;
    EXPECT_EQ(issues[0].path, "group");
    EXPECT_EQ(issues[0].value, v);
    EXPECT_NE(issues[0].rule.find("out of range"), std::string::npos) << issues[0].rule;
  }
}

TEST(Config, StringsInMessagesKeepTheirNulsAndControlCharacters) {
  json j = {{"arch", std::string("sm_90a\0x", 8)}};
  const auto issues = check_config(parse_config(j));
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].value, "\"sm_90a\\u0000x\"");
  const auto key = text_issues("{\"bo\\u001bgus\": 1}");
  ASSERT_EQ(key.size(), 1u);
  EXPECT_EQ(key[0].path, "bo\\u001bgus");
  EXPECT_EQ(key[0].rule, "unknown key");
  const auto long_arch = text_issues("{\"arch\": \"" + std::string(100000, 'a') + "\"}");
  ASSERT_EQ(long_arch.size(), 1u);
  EXPECT_LT(long_arch[0].message().size(), 200u);
  EXPECT_NE(long_arch[0].value.find("(100000 bytes)"), std::string::npos) << long_arch[0].value;
}

}  // namespace
}  // namespace flashjit
