#include "cache/entry_file.hpp"

#include <cstring>
#include <stdexcept>

namespace flashjit::cache {

namespace {

constexpr std::size_t kMaxNameChars = 100;
constexpr std::size_t kKeyChars = 64;

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

// The 32 raw bytes of SHA-256(header bytes 0-31 + key hex + manifest + binary): the sizes in the
// header are covered too, so no corruption can move the manifest/binary boundary unnoticed.
std::string checksum(std::string_view header, std::string_view key_hex, std::string_view manifest,
                     std::string_view binary) {
  std::string data;
  data.reserve(header.size() + key_hex.size() + manifest.size() + binary.size());
  data.append(header).append(key_hex).append(manifest).append(binary);
  const std::string hex = sha256_hex(data);
  std::string raw(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < raw.size(); ++i)
    raw[i] = static_cast<char>(hex_value(hex[2 * i]) * 16 + hex_value(hex[2 * i + 1]));
  return raw;
}

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
  // <name> '.' <64 hex> ".fjc", with a non-empty name
  const std::size_t tail = 1 + kKeyChars + kEntrySuffix.size();
  if (f.size() <= tail || f.substr(f.size() - kEntrySuffix.size()) != kEntrySuffix) return std::nullopt;
  const std::string_view key = f.substr(f.size() - kEntrySuffix.size() - kKeyChars, kKeyChars);
  if (f[f.size() - tail] != '.' || !is_key_hex(key)) return std::nullopt;
  return ParsedFileName{std::string(f.substr(0, f.size() - tail)), std::string(key)};
}

std::string encode_entry_raw(const std::string& key_hex, std::string_view manifest,
                             std::string_view binary) {
  std::string out;
  out.reserve(kHeaderSize + manifest.size() + binary.size());
  out.append(kMagic, sizeof kMagic);
  put_u32(out, kFormatVersion);
  put_u32(out, kHeaderSize);
  put_u64(out, manifest.size());
  put_u64(out, binary.size());
  out += checksum(std::string_view(out).substr(0, 32), key_hex, manifest, binary);
  out.append(manifest).append(binary);
  return out;
}

std::string encode_entry(const std::string& key_hex, const Entry& entry) {
  // replace, not throw, on invalid UTF-8: a manifest must never make a publish fail
  const std::string manifest = entry.manifest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return encode_entry_raw(key_hex, manifest, entry.binary);
}

Decoded decode_entry(std::string_view b, const std::string& key_hex) {
  auto fail = [](std::string p) { return Decoded{std::nullopt, std::move(p)}; };
  if (b.empty()) return fail("file is empty");
  if (b.size() < kHeaderSize)
    return fail("truncated: " + std::to_string(b.size()) + " bytes, shorter than the " +
                std::to_string(kHeaderSize) + "-byte header");
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return fail("bad magic (not a flashjit cache file)");
  const auto version = get_le(b, 8, 4);
  if (version != kFormatVersion)
    return fail("format version " + std::to_string(version) + ", expected " + std::to_string(kFormatVersion));
  const auto header = get_le(b, 12, 4);
  if (header != kHeaderSize)
    return fail("header size " + std::to_string(header) + ", expected " + std::to_string(kHeaderSize));
  const std::uint64_t msize = get_le(b, 16, 8), bsize = get_le(b, 24, 8);
  const std::uint64_t body = b.size() - kHeaderSize;
  if (msize > body || bsize != body - msize)
    return fail("sizes in the header (manifest " + std::to_string(msize) + " + binary " +
                std::to_string(bsize) + " + header " + std::to_string(kHeaderSize) +
                ") do not match the file size " + std::to_string(b.size()) + " (truncated or corrupt)");
  const std::string_view manifest = b.substr(kHeaderSize, msize), binary = b.substr(kHeaderSize + msize);
  if (checksum(b.substr(0, 32), key_hex, manifest, binary) != b.substr(32, 32))
    return fail("checksum mismatch (corrupt, or written for a different key than " + key_hex.substr(0, 16) +
                "...)");
  nlohmann::json parsed = nlohmann::json::parse(manifest, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return fail("manifest is not valid JSON");
  return Decoded{Entry{std::move(parsed), std::string(binary)}, {}};
}

}  // namespace flashjit::cache
