// The on-disk kernel cache. Knows nothing of attention: it stores an opaque binary plus a JSON
// manifest under a content-addressed key, one file per entry.
//
// Lookup order: read-only layers ($FLASHJIT_CACHE_PATH, ':'-separated), then the writable
// directory ($FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit).
// A directory is used only if nobody but its owner (the current user or root, or a sharing
// group asked for with FLASHJIT_CACHE_GROUP) can write it: trusted_dir.hpp. Every load checks
// the file (regular, trusted), magic, format version, sizes, the key and a SHA-256 checksum,
// then the caller's EntryCheck; a file that fails is a miss (warned about, and replaced when it
// lives in the writable directory). Publication is atomic (unique temp file in the same
// directory, fsync, rename). A per-key file lock (<dir>/.locks/<key>.lock, or
// $FLASHJIT_LOCK_DIR/<key>.lock) with a re-check after acquiring makes racing processes -- and
// threads -- compile once. File format: entry_file.hpp.
// Every member function is safe to call from several threads at once.
#pragma once

#include "cache/key.hpp"
#include "cache/trusted_dir.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit::cache {

inline constexpr std::uint32_t kFormatVersion = 5;

struct Entry {
  nlohmann::json manifest;  // free-form JSON the caller stores beside the binary
  std::string binary;       // e.g. a cubin
};

// What the caller needs of a manifest beyond what the cache checks (e.g. the fields the runtime
// reads): "" when the manifest is usable, else what is wrong. An entry it rejects is treated as
// a corrupt file: warned about, removed from the writable directory, a miss.
using EntryCheck = std::function<std::string(const std::string& key_hex, const nlohmann::json& manifest)>;

struct StoreOptions {
  std::filesystem::path dir;                  // writable directory
  std::vector<std::filesystem::path> layers;  // read-only layers, searched first
  bool offline = false;                       // FLASHJIT_OFFLINE=1: a miss is an error
  std::uint64_t max_bytes = 0;                // FLASHJIT_CACHE_MAX_BYTES (k/M/G suffixes); 0: no cap
  double lock_timeout_s = 300;                // FLASHJIT_LOCK_TIMEOUT (seconds)
  std::filesystem::path lock_dir;             // FLASHJIT_LOCK_DIR; empty: <dir>/.locks
  Sharing sharing;                            // FLASHJIT_CACHE_GROUP; default: private
  static StoreOptions from_env();
};

// Offline mode and the key is in no layer.
class MissError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The per-key lock could not be taken in time; the message names the lock file.
class LockTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where get_or_create()'s entry came from.
struct Provenance {
  bool produced = false;       // this call ran produce()
  std::filesystem::path file;  // the file it was loaded from or stored to; empty: not stored
  bool read_only = false;      // file lies in a read-only layer
  std::string store_error;     // produced but not stored: why (the path and the system's reason)
};

struct EntryInfo {
  std::filesystem::path path;
  std::string key;        // hex (from the header when it could be read, else the file name)
  std::string name;       // readable name, sanitized
  std::uint64_t bytes = 0;
  std::int64_t last_used = 0;  // seconds since the epoch (the entry file's mtime, touched on hits)
  bool read_only = false;      // lives in a read-only layer
  bool valid = false;          // passed every check made (list: no checksum; verify: all)
  std::string problem;         // why not, when !valid
  nlohmann::json manifest;     // when valid
  bool removed = false;        // verify(true): the invalid file is gone
  std::string remove_error;    // verify(true): why it could not be removed
};

struct DirInfo {
  std::filesystem::path path;
  bool read_only = false;
  TrustedDir::Status status = TrustedDir::Status::ok;  // missing: skipped quietly
  std::string problem;  // when neither ok nor missing: why the directory is not used
};

struct VerifyReport {
  std::size_t checked = 0;
  std::vector<EntryInfo> bad;               // invalid entries (with removed / remove_error)
  std::vector<std::string> skipped_dirs;    // directories not checked, and why
};

// What prune() or clear() removed, and every removal that failed (path and reason).
struct Cleanup {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> failures;
};

struct ImportReport {
  std::size_t imported = 0;
  std::vector<std::string> skipped;  // files not imported: "<path>: <why>"
  std::vector<std::string> notes;    // imported under their own name, duplicates of a key
};

class DiskStore {
 public:
  explicit DiskStore(StoreOptions options = StoreOptions::from_env());

  const StoreOptions& options() const { return options_; }
  std::filesystem::path entry_path(const std::filesystem::path& dir, const Key& key,
                                   const std::string& name) const;

  // The entry, or nullopt on a miss (including a corrupt or rejected file, which is warned
  // about). *where (if given) says which file it came from.
  std::optional<Entry> load(const Key& key, const std::string& name, const EntryCheck& check = {},
                            Provenance* where = nullptr);

  // Publishes atomically, then evicts least recently used entries above max_bytes. Returns false
  // if the entry could not be stored (warned about once per DiskStore); *error says why.
  bool store(const Key& key, const std::string& name, const Entry& entry, std::string* error = nullptr);

  // load(); on a miss: MissError when offline, else lock, load again, produce(), store().
  // LockTimeout when the lock is not had within lock_timeout_s; produce()'s exceptions propagate
  // (the lock is released). A failed store() or an unusable lock directory is warned about and
  // reported in *where, never an error. An entry produce() returns must pass `check`.
  Entry get_or_create(const Key& key, const std::string& name, const std::function<Entry()>& produce,
                      const EntryCheck& check, Provenance* where);
  Entry get_or_create(const Key& key, const std::string& name, const std::function<Entry()>& produce,
                      bool* produced = nullptr);

  // Maintenance (the `flashjit cache` commands).
  std::vector<DirInfo> directories() const;  // the layers, then the writable directory
  // Every entry of every usable directory, from its header and manifest only (no checksum: a
  // listing reads what it prints, whatever the size of the files).
  std::vector<EntryInfo> list(const EntryCheck& check = {}) const;
  // One listed entry checked in full (checksum included).
  EntryInfo inspect(const EntryInfo& listed, const EntryCheck& check = {}) const;
  // Every entry checked in full, in bounded memory; removes the invalid ones of the writable
  // directory if asked.
  VerifyReport verify(bool remove_bad, const EntryCheck& check = {});
  Cleanup prune(std::uint64_t max_bytes);  // evicts LRU until under (and stale temp files)
  Cleanup clear();                         // writable directory only
  // Valid entries (first copy of each key in lookup order) -> dir, atomically, named from their
  // contents; dir (created 0755 if missing) is then usable as a read-only layer. Returns the
  // number of entries; throws std::runtime_error if dir cannot be used or written.
  std::size_t export_to(const std::filesystem::path& dir, const EntryCheck& check = {}) const;
  // Valid entries of dir -> the writable directory, each named from its verified contents, one
  // per key. Throws std::runtime_error if dir is not trusted or cannot be read, or the cache
  // directory cannot be written.
  ImportReport import_from(const std::filesystem::path& dir, const EntryCheck& check = {});

 private:
  // rejected: appends "; rejected <file>: <problem>" per bad file; recheck: the lookup after
  // taking the lock (faults in layers were already warned about).
  std::optional<Entry> load_impl(const Key& key, const std::string& name, const EntryCheck& check,
                                 std::string* rejected, bool recheck, Provenance* where);
  std::filesystem::path lock_path(const Key& key) const;
  TrustedDir open_dir(const std::filesystem::path& dir, Create create) const;
  // True when d can be used; otherwise warns (once per directory) why it is skipped, unless it
  // does not exist.
  bool usable(const TrustedDir& d, bool read_only) const;
  // Logs a warning the first time per DiskStore for `what`, at debug level after that.
  void warn_once(const std::string& what, const std::string& message) const;

  StoreOptions options_;
  struct Warned;
  std::shared_ptr<Warned> warned_;
};

}  // namespace flashjit::cache
