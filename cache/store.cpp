#include "cache/store.hpp"

#include "cache/entry_file.hpp"
#include "cache/file_io.hpp"
#include "cache/file_lock.hpp"
#include "cache/log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <set>
#include <sstream>

namespace flashjit::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kStaleTempSeconds = 3600;  // a temp file this old belongs to a dead writer

struct DirFile {
  fs::path path;
  std::string file_name;
  std::uint64_t bytes = 0;
  std::int64_t mtime_ns = 0;
};

struct DirScan {
  std::vector<DirFile> entries;  // regular *.fjc files, sorted by name
  std::vector<DirFile> temps;    // our temp files
  std::string error;             // set when the directory exists but cannot be read
};

DirScan scan(const fs::path& dir) {
  DirScan s;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory) s.error = "cannot read " + dir.string() + ": " + ec.message();
    return s;
  }
  for (; it != end; it.increment(ec)) {
    if (ec) {
      s.error = "cannot read " + dir.string() + ": " + ec.message();
      break;
    }
    const std::string name = it->path().filename().string();
    const bool is_entry = name.size() > kEntrySuffix.size() && name.ends_with(kEntrySuffix) && name[0] != '.';
    const bool is_temp = name.starts_with(kTempPrefix);
    if (!is_entry && !is_temp) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // gone, or not a file
    DirFile f{it->path(), name, static_cast<std::uint64_t>(st.st_size),
              std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    (is_entry ? s.entries : s.temps).push_back(std::move(f));
  }
  std::sort(s.entries.begin(), s.entries.end(),
            [](const DirFile& a, const DirFile& b) { return a.file_name < b.file_name; });
  return s;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Removes temp files left by writers that died between create and rename.
std::uint64_t remove_stale_temps(const DirScan& s) {
  std::uint64_t freed = 0;
  const std::int64_t cutoff = now_ns() - kStaleTempSeconds * 1'000'000'000;
  for (const auto& t : s.temps)
    if (t.mtime_ns < cutoff && ::unlink(t.path.c_str()) == 0) freed += t.bytes;
  return freed;
}

// Evicts the least recently used entries (oldest mtime first) until the directory holds at
// most max_bytes of entries; never `keep`. Returns the bytes freed.
std::uint64_t evict(const fs::path& dir, std::uint64_t max_bytes, const fs::path& keep) {
  DirScan s = scan(dir);
  std::uint64_t total = 0;
  for (const auto& e : s.entries) total += e.bytes;
  if (total <= max_bytes) return 0;
  std::sort(s.entries.begin(), s.entries.end(), [](const DirFile& a, const DirFile& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.file_name < b.file_name;
  });
  std::uint64_t freed = 0;
  std::size_t count = 0;
  for (const auto& e : s.entries) {
    if (total <= max_bytes) break;
    if (e.path == keep) continue;
    if (::unlink(e.path.c_str()) == 0) {
      freed += e.bytes;
      ++count;
    } else if (errno != ENOENT) {
      continue;  // still there
    }
    total -= e.bytes;  // ENOENT: another process evicted it first
  }
  if (count)
    log(LogLevel::info, "flashjit cache: evicted " + std::to_string(count) + " least recently used entries (" +
                            std::to_string(freed) + " bytes) from " + dir.string() + " to stay under " +
                            std::to_string(max_bytes) + " bytes");
  return freed;
}

bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec1, ec2;
  return fs::absolute(a, ec1).lexically_normal() == fs::absolute(b, ec2).lexically_normal();
}

// Reads and checks every entry file of dir; calls visit(info, bytes) for each (bytes empty
// unless valid). Returns the scan error, if any.
template <class Visit>
std::string for_each_file(const fs::path& dir, bool read_only, Visit&& visit) {
  const DirScan s = scan(dir);
  for (const auto& f : s.entries) {
    EntryInfo info;
    info.path = f.path;
    info.bytes = f.bytes;
    info.last_used = f.mtime_ns / 1'000'000'000;
    info.read_only = read_only;
    const auto parsed = parse_entry_file_name(f.file_name);
    if (!parsed) {
      info.problem = "file name is not <name>.<64 hex digit key>.fjc";
      visit(info, std::string());
      continue;
    }
    info.name = parsed->name;
    info.key = parsed->key;
    FileRead r = read_whole_file(f.path, kMaxFileBytes);
    if (r.status == FileRead::Status::missing) continue;  // removed since the scan
    if (r.status == FileRead::Status::error) {
      info.problem = r.error;
      visit(info, std::string());
      continue;
    }
    Decoded d = decode_entry(r.bytes, info.key);
    if (d.entry) {
      info.valid = true;
      info.manifest = std::move(d.entry->manifest);
      visit(info, r.bytes);
    } else {
      info.problem = std::move(d.problem);
      visit(info, std::string());
    }
  }
  return s.error;
}

}  // namespace

DiskStore::DiskStore(StoreOptions options) : options_(std::move(options)) {
  // The writable directory is searched last anyway; listing it as a layer too would only make
  // every fault in it reported twice.
  std::erase_if(options_.layers, [&](const fs::path& l) { return same_dir(l, options_.dir); });
}

fs::path DiskStore::entry_path(const fs::path& dir, const Key& key, const std::string& name) const {
  return dir / entry_file_name(key, name);
}

fs::path DiskStore::lock_path(const Key& key) const {
  const fs::path dir = options_.lock_dir.empty() ? options_.dir / ".locks" : options_.lock_dir;
  return dir / (key.hex + ".lock");
}

std::optional<Entry> DiskStore::load_impl(const Key& key, const std::string& name, std::string* rejected,
                                          bool recheck) {
  const std::string file = entry_file_name(key, name);  // validates the key
  auto try_dir = [&](const fs::path& dir, bool writable) -> std::optional<Entry> {
    const fs::path path = dir / file;
    FileRead r = read_whole_file(path, kMaxFileBytes);
    if (r.status == FileRead::Status::missing) return std::nullopt;
    std::string problem = r.error;
    if (r.status == FileRead::Status::ok) {
      Decoded d = decode_entry(r.bytes, key.hex);
      if (d.entry) {
        if (writable) touch(path);  // last-used stamp for LRU eviction
        log(LogLevel::debug, "flashjit cache: hit " + path.string());
        return std::move(d.entry);
      }
      problem = path.string() + ": " + d.problem;
    }
    if (writable && r.ino != 0) {  // a regular file we opened: ours to replace
      const bool removed = remove_if_same(path, r.dev, r.ino);
      problem += removed ? "; removed, it will be rebuilt" : "";
    } else if (!writable) {
      problem += " (read-only layer, left in place)";
    }
    // a bad file in a layer stays, so the re-check after locking would only repeat the warning
    log(recheck && !writable ? LogLevel::debug : LogLevel::warn, "flashjit cache: ignoring a bad entry: " + problem);
    if (rejected) *rejected += "; rejected " + problem;
    return std::nullopt;
  };
  for (const auto& layer : options_.layers)
    if (auto e = try_dir(layer, false)) return e;
  return try_dir(options_.dir, true);
}

std::optional<Entry> DiskStore::load(const Key& key, const std::string& name) {
  return load_impl(key, name, nullptr, false);
}

bool DiskStore::store(const Key& key, const std::string& name, const Entry& entry) {
  const std::string file = entry_file_name(key, name);
  const std::string bytes = encode_entry(key.hex, entry);
  if (bytes.size() > kMaxFileBytes) {
    log(LogLevel::warn, "flashjit cache: not storing " + file + ": " + std::to_string(bytes.size()) +
                            " bytes is over the entry size limit (" + std::to_string(kMaxFileBytes) + ")");
    return false;
  }
  const std::string error = publish_atomically(options_.dir, file, bytes);
  if (!error.empty()) {
    const bool first = !std::atomic_ref<bool>(warned_unwritable_).exchange(true);
    log(first ? LogLevel::warn : LogLevel::debug,
        "flashjit cache: cannot write to the cache directory " + options_.dir.string() + " (" + error +
            "); kernels stay in memory only (set FLASHJIT_CACHE_DIR to a writable directory)");
    return false;
  }
  if (options_.max_bytes > 0) evict(options_.dir, options_.max_bytes, options_.dir / file);
  return true;
}

Entry DiskStore::get_or_create(const Key& key, const std::string& name, const std::function<Entry()>& produce,
                               bool* produced) {
  if (produced) *produced = false;
  std::string rejected;
  if (auto e = load_impl(key, name, &rejected, false)) return std::move(*e);
  if (options_.offline) {
    std::string searched;
    for (const auto& l : options_.layers) searched += l.string() + ", ";
    searched += options_.dir.string();
    throw MissError("flashjit: kernel not in cache (offline mode, FLASHJIT_OFFLINE=1): " + name + " key " +
                    key.hex + "; searched: " + searched + rejected);
  }
  const fs::path lock_file = lock_path(key);
  FileLock lock(lock_file, options_.lock_timeout_s);
  switch (lock.status()) {
    case FileLock::Status::timed_out: {
      std::ostringstream msg;
      msg << "flashjit cache: timed out after " << options_.lock_timeout_s << " s waiting for the lock "
          << lock_file.string() << " (another thread or process is producing " << name
          << "); raise FLASHJIT_LOCK_TIMEOUT to wait longer, or set FLASHJIT_LOCK_DIR to node-local storage "
             "if the cache is on a network file system";
      throw LockTimeout(msg.str());
    }
    case FileLock::Status::unavailable: {
      const bool first = !std::atomic_ref<bool>(warned_lock_dir_).exchange(true);
      log(first ? LogLevel::warn : LogLevel::debug,
          "flashjit cache: " + lock.error() + "; producing without a cross-process lock (set FLASHJIT_LOCK_DIR to "
          "a writable directory)");
      break;
    }
    case FileLock::Status::locked: break;
  }
  // Another thread or process may have published while we waited.
  if (auto e = load_impl(key, name, nullptr, true)) return std::move(*e);
  log(LogLevel::debug, "flashjit cache: miss " + name + " key " + key.hex);
  Entry entry = produce();
  if (produced) *produced = true;
  store(key, name, entry);
  return entry;
}

std::vector<EntryInfo> DiskStore::list() const {
  std::vector<EntryInfo> out;
  auto collect = [&](const fs::path& dir, bool read_only) {
    const std::string error =
        for_each_file(dir, read_only, [&](EntryInfo& info, const std::string&) { out.push_back(std::move(info)); });
    if (!error.empty()) log(LogLevel::warn, "flashjit cache: " + error);
  };
  for (const auto& layer : options_.layers) collect(layer, true);
  collect(options_.dir, false);
  return out;
}

std::vector<EntryInfo> DiskStore::verify(bool remove_bad) {
  std::vector<EntryInfo> bad;
  for (auto& info : list()) {
    if (info.valid) continue;
    if (remove_bad && !info.read_only) ::unlink(info.path.c_str());
    bad.push_back(std::move(info));
  }
  return bad;
}

std::uint64_t DiskStore::prune(std::uint64_t max_bytes) {
  return remove_stale_temps(scan(options_.dir)) + evict(options_.dir, max_bytes, {});
}

std::uint64_t DiskStore::clear() {
  const DirScan s = scan(options_.dir);
  std::uint64_t removed = 0;
  for (const auto& e : s.entries)
    if (::unlink(e.path.c_str()) == 0) ++removed;
  remove_stale_temps(s);
  // Lock files nobody holds (left by killed processes). Locking one first means a holder is
  // never disturbed; FileLock unlinks the file on release.
  const fs::path lock_dir = lock_path(Key{std::string(64, '0')}).parent_path();
  std::error_code ec;
  for (fs::directory_iterator it(lock_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f.size() == 64 + 5 && f.ends_with(".lock") && is_key_hex(f.substr(0, 64))) {
      FileLock stale(it->path(), 0);
    }
  }
  return removed;
}

std::size_t DiskStore::export_to(const fs::path& dir) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("flashjit cache: cannot create export directory " + dir.string() + ": " + ec.message());
  std::set<std::string> done;  // the first valid copy of a key, in lookup order
  auto copy = [&](const EntryInfo& info, const std::string& bytes) {
    if (!info.valid || !done.insert(info.key).second) return;
    const std::string error = publish_atomically(dir, info.path.filename().string(), bytes);
    if (!error.empty()) throw std::runtime_error("flashjit cache: cannot export " + info.path.string() + ": " + error);
  };
  for (const auto& layer : options_.layers) for_each_file(layer, true, copy);
  for_each_file(options_.dir, false, copy);
  return done.size();
}

std::size_t DiskStore::import_from(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("flashjit cache: cannot import from " + dir.string() + ": not a directory");
  std::size_t imported = 0;
  const std::string error = for_each_file(dir, true, [&](const EntryInfo& info, const std::string& bytes) {
    if (!info.valid) {
      log(LogLevel::warn, "flashjit cache: not importing " + info.path.string() + ": " + info.problem);
      return;
    }
    const std::string e = publish_atomically(options_.dir, info.path.filename().string(), bytes);
    if (!e.empty()) throw std::runtime_error("flashjit cache: cannot import " + info.path.string() + ": " + e);
    ++imported;
  });
  if (!error.empty()) throw std::runtime_error("flashjit cache: " + error);
  if (options_.max_bytes > 0) evict(options_.dir, options_.max_bytes, {});
  return imported;
}

}  // namespace flashjit::cache
