// The on-disk kernel cache. Knows nothing of attention: it stores an opaque binary plus a JSON
// manifest under a content-addressed key, one file per entry.
//
// Lookup order: read-only layers ($FLASHJIT_CACHE_PATH, ':'-separated), then the writable
// directory ($FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit).
// Every load checks magic, format version, sizes, the key and a SHA-256 checksum; a file that
// fails is a miss (warned about, and replaced when it lives in the writable directory).
// Publication is atomic (unique temp file in the same directory, fsync, rename). A per-key file
// lock (<dir>/.locks/<key>.lock, or $FLASHJIT_LOCK_DIR/<key>.lock) with a re-check after
// acquiring makes racing processes -- and threads -- compile once. File format: entry_file.hpp.
// Every member function is safe to call from several threads at once.
#pragma once

#include "cache/key.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit::cache {

inline constexpr std::uint32_t kFormatVersion = 4;

struct Entry {
  nlohmann::json manifest;  // free-form JSON the caller stores beside the binary
  std::string binary;       // e.g. a cubin
};

struct StoreOptions {
  std::filesystem::path dir;                  // writable directory
  std::vector<std::filesystem::path> layers;  // read-only layers, searched first
  bool offline = false;                       // FLASHJIT_OFFLINE=1: a miss is an error
  std::uint64_t max_bytes = 0;                // FLASHJIT_CACHE_MAX_BYTES (k/M/G suffixes); 0: no cap
  double lock_timeout_s = 300;                // FLASHJIT_LOCK_TIMEOUT (seconds)
  std::filesystem::path lock_dir;             // FLASHJIT_LOCK_DIR; empty: <dir>/.locks
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

struct EntryInfo {
  std::filesystem::path path;
  std::string key;        // hex
  std::string name;       // readable name
  std::uint64_t bytes = 0;
  std::int64_t last_used = 0;  // seconds since the epoch (the entry file's mtime, touched on hits)
  bool read_only = false;      // lives in a read-only layer
  bool valid = false;          // passed every check
  std::string problem;         // why not, when !valid
  nlohmann::json manifest;     // when valid
};

class DiskStore {
 public:
  explicit DiskStore(StoreOptions options = StoreOptions::from_env());

  const StoreOptions& options() const { return options_; }
  std::filesystem::path entry_path(const std::filesystem::path& dir, const Key& key,
                                   const std::string& name) const;

  // The entry, or nullopt on a miss (including a corrupt file, which is warned about).
  std::optional<Entry> load(const Key& key, const std::string& name);

  // Publishes atomically, then evicts least recently used entries above max_bytes. Returns false
  // if the writable directory cannot be used (warned about once per DiskStore).
  bool store(const Key& key, const std::string& name, const Entry& entry);

  // load(); on a miss: MissError when offline, else lock, load again, produce(), store().
  // *produced tells whether this call ran produce(). LockTimeout when the lock is not had within
  // lock_timeout_s; produce()'s exceptions propagate (the lock is released). A failed store() or
  // an unusable lock directory is warned about, never an error.
  Entry get_or_create(const Key& key, const std::string& name,
                      const std::function<Entry()>& produce, bool* produced = nullptr);

  // Maintenance (the `flashjit cache` commands).
  std::vector<EntryInfo> list() const;                 // every layer, checked
  std::vector<EntryInfo> verify(bool remove_bad);      // the invalid ones; removes them if asked
  std::uint64_t prune(std::uint64_t max_bytes);        // evicts LRU until under; returns bytes freed
  std::uint64_t clear();                               // writable directory only; returns entries removed
  // Valid entries (first copy of each key in lookup order) -> dir, atomically; dir is then usable
  // as a read-only layer. Returns the number of entries; throws std::runtime_error if dir cannot
  // be written.
  std::size_t export_to(const std::filesystem::path& dir) const;
  // Valid entries of dir -> the writable directory (invalid ones are warned about and skipped).
  // Returns the number imported; throws std::runtime_error if dir cannot be read or the cache
  // directory cannot be written.
  std::size_t import_from(const std::filesystem::path& dir);

 private:
  // rejected: appends "; rejected <file>: <problem>" per bad file; recheck: the lookup after
  // taking the lock (faults in layers were already warned about).
  std::optional<Entry> load_impl(const Key& key, const std::string& name, std::string* rejected, bool recheck);
  std::filesystem::path lock_path(const Key& key) const;

  StoreOptions options_;
  bool warned_unwritable_ = false;  // accessed through std::atomic_ref
  bool warned_lock_dir_ = false;    // accessed through std::atomic_ref
};

}  // namespace flashjit::cache
