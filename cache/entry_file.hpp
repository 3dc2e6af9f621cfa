// The .fjc entry file: its name and its bytes. Pure encoding/decoding; no directory policy.
//
// Layout (all integers little-endian):
//   0  char[8]  magic "FJITCACH"
//   8  u32      format version (kFormatVersion)
//  12  u32      header size (kHeaderSize)
//  16  u64      manifest size M
//  24  u64      binary size B
//  32  u8[32]   SHA-256 over (key hex + manifest bytes + binary bytes)
//  64  M bytes  manifest (JSON text)
//  64+M B bytes binary
#pragma once

#include "cache/store.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace flashjit::cache {

inline constexpr char kMagic[8] = {'F', 'J', 'I', 'T', 'C', 'A', 'C', 'H'};
inline constexpr std::uint32_t kHeaderSize = 64;
inline constexpr std::string_view kEntrySuffix = ".fjc";
inline constexpr std::uint64_t kMaxFileBytes = std::uint64_t(1) << 30;  // larger files are not entries

// True for 64 lowercase hex digits.
bool is_key_hex(std::string_view hex);

// Throws std::invalid_argument unless key.hex is 64 lowercase hex digits (a key that is not a
// hash must never become part of a path).
void check_key(const Key& key);

// The readable part of a file name: characters outside [A-Za-z0-9._+=-] become '_', a leading
// '.' becomes '_', at most 100 characters, "entry" when empty.
std::string sanitize_name(std::string_view name);

// "<sanitized name>.<keyhex>.fjc"
std::string entry_file_name(const Key& key, std::string_view name);

struct ParsedFileName {
  std::string name;
  std::string key;  // hex
};
// Splits "<name>.<64 hex>.fjc"; nullopt for any other file name.
std::optional<ParsedFileName> parse_entry_file_name(std::string_view file_name);

// The complete file contents for an entry.
std::string encode_entry(const std::string& key_hex, const Entry& entry);
// Same, from raw manifest bytes (lets tests and tools build files with arbitrary manifests).
std::string encode_entry_raw(const std::string& key_hex, std::string_view manifest,
                             std::string_view binary);

struct Decoded {
  std::optional<Entry> entry;  // set when every check passed
  std::string problem;         // otherwise: what failed, in words
};
// Checks magic, version, header size, sizes against bytes.size(), the checksum (which binds the
// contents to key_hex) and that the manifest parses as JSON.
Decoded decode_entry(std::string_view bytes, const std::string& key_hex);

}  // namespace flashjit::cache
