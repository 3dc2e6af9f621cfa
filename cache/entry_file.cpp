#include "cache/entry_file.hpp"

#include <cstring>
#include <stdexcept>

namespace flashjit::cache {

namespace {

constexpr std::size_t kMaxNameChars = 100;
constexpr std::size_t kKeyChars = 64;
constexpr std::size_t kKeyAt = 64, kNameLengthAt = 128, kNameAt = 129;

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::uint64_t get_le(std::string_view b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool is_sanitized(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameChars && sanitize_name(name) == name;
}

std::string short_key(std::string_view hex) { return std::string(hex.substr(0, 16)) + "..."; }

}  // namespace

bool is_key_hex(std::string_view hex) {
  if (hex.size() != kKeyChars) return false;
  for (char c : hex)
    if (hex_value(c) < 0) return false;
  return true;
}

void check_key(const Key& key) {
  if (!is_key_hex(key.hex))
    throw std::invalid_argument("flashjit cache: a key must be 64 lowercase hex digits (SHA-256), got '" +
                                key.hex.substr(0, 80) + "'");
}

std::string sanitize_name(std::string_view name) {
  std::string s;
  for (char c : name.substr(0, kMaxNameChars)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-' || c == '+' || c == '=';
    s.push_back(ok ? c : '_');
  }
  if (s.empty()) return "entry";
  if (s[0] == '.') s[0] = '_';
  return s;
}

std::string entry_file_name(const Key& key, std::string_view name) {
  check_key(key);
  return sanitize_name(name) + "." + key.hex + std::string(kEntrySuffix);
}

std::optional<ParsedFileName> parse_entry_file_name(std::string_view f) {
  // <name> '.' <64 hex> ".fjc", with a non-empty, sanitized name
  const std::size_t tail = 1 + kKeyChars + kEntrySuffix.size();
  if (f.size() <= tail || f.substr(f.size() - kEntrySuffix.size()) != kEntrySuffix) return std::nullopt;
  const std::string_view key = f.substr(f.size() - kEntrySuffix.size() - kKeyChars, kKeyChars);
  const std::string_view name = f.substr(0, f.size() - tail);
  if (f[f.size() - tail] != '.' || !is_key_hex(key) || !is_sanitized(name)) return std::nullopt;
  return ParsedFileName{std::string(name), std::string(key)};
}

void hash_header(Sha256& sha, std::string_view head) {
  sha.update(head.substr(0, 32)).update(head.substr(64, kHeaderSize - 64));
}

std::string encode_entry_raw(const std::string& key_hex, std::string_view name, std::string_view manifest,
                             std::string_view binary) {
  check_key(Key{key_hex});
  const std::string shown = sanitize_name(name);
  std::string out;
  out.reserve(kHeaderSize + manifest.size() + binary.size());
  out.append(kMagic, sizeof kMagic);
  put_u32(out, kFormatVersion);
  put_u32(out, kHeaderSize);
  put_u64(out, manifest.size());
  put_u64(out, binary.size());
  out.append(32, '\0');  // the checksum, below
  out.append(key_hex);
  out.push_back(static_cast<char>(shown.size()));
  out.append(shown);
  out.resize(kHeaderSize, '\0');
  Sha256 sha;
  hash_header(sha, out);
  out.replace(32, 32, sha.update(manifest).update(binary).finish_raw());
  out.append(manifest).append(binary);
  return out;
}

std::string encode_entry(const std::string& key_hex, std::string_view name, const Entry& entry) {
  // replace, not throw, on invalid UTF-8: a manifest must never make a publish fail
  const std::string manifest = entry.manifest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return encode_entry_raw(key_hex, name, manifest, entry.binary);
}

HeaderCheck parse_header(std::string_view b, std::uint64_t file_size) {
  auto fail = [](std::string p) { return HeaderCheck{std::nullopt, std::move(p)}; };
  if (file_size == 0) return fail("file is empty");
  if (file_size < kHeaderSize || b.size() < kHeaderSize)
    return fail("truncated: " + std::to_string(file_size) + " bytes, shorter than the " +
                std::to_string(kHeaderSize) + "-byte header");
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return fail("bad magic (not a flashjit cache file)");
  const auto version = get_le(b, 8, 4);
  if (version != kFormatVersion)
    return fail("format version " + std::to_string(version) + ", expected " + std::to_string(kFormatVersion));
  const auto header = get_le(b, 12, 4);
  if (header != kHeaderSize)
    return fail("header size " + std::to_string(header) + ", expected " + std::to_string(kHeaderSize));
  Header h;
  h.manifest_bytes = get_le(b, 16, 8);
  h.binary_bytes = get_le(b, 24, 8);
  const std::uint64_t body = file_size - kHeaderSize;
  if (h.manifest_bytes > body || h.binary_bytes != body - h.manifest_bytes)
    return fail("sizes in the header (manifest " + std::to_string(h.manifest_bytes) + " + binary " +
                std::to_string(h.binary_bytes) + " + header " + std::to_string(kHeaderSize) +
                ") do not match the file size " + std::to_string(file_size) + " (truncated or corrupt)");
  if (h.manifest_bytes > kMaxManifestBytes)
    return fail("manifest of " + std::to_string(h.manifest_bytes) + " bytes, over the limit of " +
                std::to_string(kMaxManifestBytes));
  h.key = std::string(b.substr(kKeyAt, kKeyChars));
  if (!is_key_hex(h.key)) return fail("the key in the header is not 64 lowercase hex digits");
  const std::size_t n = static_cast<unsigned char>(b[kNameLengthAt]);
  h.name = std::string(b.substr(kNameAt, std::min(n, kHeaderSize - kNameAt)));
  if (n == 0 || n > kMaxNameChars || !is_sanitized(h.name))
    return fail("the name in the header is not 1-100 characters of [A-Za-z0-9._+=-]");
  for (std::size_t i = kNameAt + n; i < kHeaderSize; ++i)
    if (b[i] != '\0') return fail("the header's padding after the name is not zero");
  h.checksum = std::string(b.substr(32, 32));
  return HeaderCheck{std::move(h), {}};
}

ManifestParse parse_manifest(std::string_view text) {
  if (text.size() > kMaxManifestBytes)
    return {std::nullopt, "manifest of " + std::to_string(text.size()) + " bytes, over the limit of " +
                              std::to_string(kMaxManifestBytes)};
  // Deeper values are dropped as they are parsed (the parser itself does not recurse), so a
  // hostile nesting never reaches the recursive copy, compare and dump of nlohmann::json.
  bool too_deep = false;
  using event = nlohmann::json::parse_event_t;
  const nlohmann::json::parser_callback_t bound = [&](int depth, event e, nlohmann::json&) {
    if ((e != event::object_start && e != event::array_start) || depth < kMaxManifestDepth) return true;
    too_deep = true;
    return false;
  };
  nlohmann::json parsed = nlohmann::json::parse(text, bound, /*allow_exceptions=*/false);
  if (too_deep)
    return {std::nullopt, "manifest nests deeper than " + std::to_string(kMaxManifestDepth) + " levels"};
  if (parsed.is_discarded()) return {std::nullopt, "manifest is not valid JSON"};
  return {std::move(parsed), {}};
}

std::string file_name_problem(std::string_view file_name, const Header& h) {
  const std::string expected = h.name + "." + h.key + std::string(kEntrySuffix);
  if (file_name == expected) return "";
  return "misnamed: it holds the entry " + expected + " (a copy under another name, which lookups never find)";
}

Decoded decode_entry(std::string_view b, const std::string& key_hex) {
  HeaderCheck hc = parse_header(b, b.size());
  if (!hc.header) return Decoded{std::nullopt, std::nullopt, std::move(hc.problem)};
  const Header& h = *hc.header;
  auto fail = [&](std::string p) { return Decoded{std::nullopt, h, std::move(p)}; };
  if (h.key != key_hex)
    return fail("it holds the entry of key " + short_key(h.key) + ", not of " + short_key(key_hex) +
                " (copied or renamed from another entry)");
  const std::string_view manifest = b.substr(kHeaderSize, h.manifest_bytes);
  const std::string_view binary = b.substr(kHeaderSize + h.manifest_bytes);
  Sha256 sha;
  hash_header(sha, b);
  if (sha.update(manifest).update(binary).finish_raw() != h.checksum) return fail("checksum mismatch (corrupt)");
  ManifestParse m = parse_manifest(manifest);
  if (!m.manifest) return fail(std::move(m.problem));
  return Decoded{Entry{std::move(*m.manifest), std::string(binary)}, h, {}};
}

}  // namespace flashjit::cache
