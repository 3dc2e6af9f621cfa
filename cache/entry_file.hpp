// The .fjc entry file: its name and its bytes. Pure encoding/decoding; no directory policy.
//
// Layout (all integers little-endian):
//    0  char[8]   magic "FJITCACH"
//    8  u32       format version (kFormatVersion)
//   12  u32       header size (kHeaderSize)
//   16  u64       manifest size M
//   24  u64       binary size B
//   32  u8[32]    SHA-256 over bytes 0-31, bytes 64-255, the manifest and the binary
//   64  char[64]  the key: 64 lowercase hex digits
//  128  u8        length N of the readable name (1-100)
//  129  char[127] the readable name: N characters of [A-Za-z0-9._+=-], not starting with '.',
//                 then zero bytes
//  256  M bytes   manifest (JSON text)
//  256+M B bytes  binary
// The file says which key and name it belongs to, so a copy under another name is recognised as
// one, and an entry can be named from its own verified contents.
#pragma once

#include "cache/key.hpp"
#include "cache/store.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flashjit::cache {

inline constexpr char kMagic[8] = {'F', 'J', 'I', 'T', 'C', 'A', 'C', 'H'};
inline constexpr std::uint32_t kHeaderSize = 256;
inline constexpr std::string_view kEntrySuffix = ".fjc";
// Bounds on what is read and parsed: a cubin and its manifest are well under a few MiB; these
// keep a hostile or broken file from costing more memory and time than that.
inline constexpr std::uint64_t kMaxFileBytes = std::uint64_t(256) << 20;     // larger files are not entries
inline constexpr std::uint64_t kMaxManifestBytes = std::uint64_t(16) << 20;
inline constexpr int kMaxManifestDepth = 64;  // arrays and objects nested in each other

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
// Splits "<name>.<64 hex>.fjc" whose name part is already sanitized; nullopt for any other name.
std::optional<ParsedFileName> parse_entry_file_name(std::string_view file_name);

// The complete file contents for an entry.
std::string encode_entry(const std::string& key_hex, std::string_view name, const Entry& entry);
// Same, from raw manifest bytes (lets tests and tools build files with arbitrary manifests).
std::string encode_entry_raw(const std::string& key_hex, std::string_view name, std::string_view manifest,
                             std::string_view binary);

struct Header {
  std::string key;   // hex
  std::string name;  // sanitized
  std::uint64_t manifest_bytes = 0, binary_bytes = 0;
  std::string checksum;  // 32 raw bytes
};
struct HeaderCheck {
  std::optional<Header> header;  // set when every check passed
  std::string problem;           // otherwise: what failed, in words
};
// Checks the first bytes of a file of file_size bytes (head: its first kHeaderSize bytes, or all
// of a shorter file): magic, version, header size, key, name, and that header + manifest +
// binary sizes add up to file_size with the manifest within kMaxManifestBytes.
HeaderCheck parse_header(std::string_view head, std::uint64_t file_size);

// Feeds the header bytes the checksum covers (all but the checksum itself); the manifest and
// the binary follow.
void hash_header(Sha256& sha, std::string_view head);

struct ManifestParse {
  std::optional<nlohmann::json> manifest;
  std::string problem;
};
// JSON text within kMaxManifestBytes and kMaxManifestDepth.
ManifestParse parse_manifest(std::string_view text);

// "" when file_name is the name the header gives its entry, else why not (a misnamed copy).
std::string file_name_problem(std::string_view file_name, const Header& header);

struct Decoded {
  std::optional<Entry> entry;  // set when every check passed
  std::optional<Header> header;  // set when the header passed its checks
  std::string problem;         // otherwise: what failed, in words
};
// A whole file: the header checks, that it holds the entry of key_hex, the checksum and the
// manifest's limits.
Decoded decode_entry(std::string_view bytes, const std::string& key_hex);

}  // namespace flashjit::cache
