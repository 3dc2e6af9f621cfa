#include "cache/store.hpp"

#include "cache/entry_file.hpp"
#include "cache/file_io.hpp"
#include "cache/file_lock.hpp"
#include "cache/log.hpp"
#include "cache/printable.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <set>
#include <sstream>

namespace flashjit::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kStaleTempSeconds = 3600;  // a temp file this old belongs to a dead writer
constexpr std::size_t kHashChunk = std::size_t(1) << 20;

struct DirFile {
  std::string name;
  bool regular = false;
  std::uint64_t bytes = 0;
  std::int64_t mtime_ns = 0;
};

struct DirScan {
  std::vector<DirFile> entries;  // *.fjc names (of any file type), sorted by name
  std::vector<DirFile> temps;    // our temp files (regular ones)
  std::string error;             // set when the directory cannot be read
};

DirScan scan(const TrustedDir& d) {
  DirScan s;
  // A fresh open file description: readdir's position is not shared with d.fd().
  const int fd = ::openat(d.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (!dir) {
    s.error = "cannot read " + printable(d.path().string()) + ": " + errno_text(errno);
    if (fd >= 0) ::close(fd);
    return s;
  }
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir);
    if (!e) {
      if (errno != 0) s.error = "cannot read " + printable(d.path().string()) + ": " + errno_text(errno);
      break;
    }
    const std::string name = e->d_name;
    const bool is_entry = name.size() > kEntrySuffix.size() && name.ends_with(kEntrySuffix) && name[0] != '.';
    const bool is_temp = name.starts_with(kTempPrefix);
    if (!is_entry && !is_temp) continue;
    struct stat st {};
    if (::fstatat(d.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
    DirFile f{name, S_ISREG(st.st_mode), static_cast<std::uint64_t>(S_ISREG(st.st_mode) ? st.st_size : 0),
              std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    if (is_entry) s.entries.push_back(std::move(f));
    else if (f.regular) s.temps.push_back(std::move(f));
  }
  ::closedir(dir);
  std::sort(s.entries.begin(), s.entries.end(), [](const DirFile& a, const DirFile& b) { return a.name < b.name; });
  return s;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void add(Cleanup& total, const Cleanup& part) {
  total.entries += part.entries;
  total.bytes += part.bytes;
  total.failures.insert(total.failures.end(), part.failures.begin(), part.failures.end());
}

// Removes temp files left by writers that died between create and rename.
Cleanup remove_stale_temps(const TrustedDir& d, const DirScan& s) {
  Cleanup c;
  const std::int64_t cutoff = now_ns() - kStaleTempSeconds * 1'000'000'000;
  for (const auto& t : s.temps) {
    if (t.mtime_ns >= cutoff) continue;
    const Removal r = remove_file(d, t.name);
    if (r.status == Removal::Status::removed) c.bytes += t.bytes;
    else if (r.status == Removal::Status::failed) c.failures.push_back(r.error);
  }
  return c;
}

// Evicts the least recently used entries (oldest mtime first) until the directory holds at
// most max_bytes of entries; never `keep`.
Cleanup evict(const TrustedDir& d, std::uint64_t max_bytes, const std::string& keep) {
  Cleanup c;
  DirScan s = scan(d);
  if (!s.error.empty()) c.failures.push_back(s.error);
  std::uint64_t total = 0;
  for (const auto& e : s.entries) total += e.bytes;
  if (total <= max_bytes) return c;
  std::sort(s.entries.begin(), s.entries.end(), [](const DirFile& a, const DirFile& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
  });
  for (const auto& e : s.entries) {
    if (total <= max_bytes) break;
    if (e.name == keep || !e.regular) continue;
    const Removal r = remove_file(d, e.name);
    if (r.status == Removal::Status::failed) {
      c.failures.push_back(r.error);
      continue;  // still there
    }
    if (r.status == Removal::Status::removed) {
      c.bytes += e.bytes;
      ++c.entries;
    }
    total -= e.bytes;  // gone: another process evicted it first
  }
  if (c.entries)
    log(LogLevel::info, "flashjit cache: evicted " + std::to_string(c.entries) + " least recently used entries (" +
                            std::to_string(c.bytes) + " bytes) from " + printable(d.path().string()) +
                            " to stay under " + std::to_string(max_bytes) + " bytes");
  for (const auto& f : c.failures) log(LogLevel::warn, "flashjit cache: " + f);
  return c;
}

bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec1, ec2;
  return fs::absolute(a, ec1).lexically_normal() == fs::absolute(b, ec2).lexically_normal();
}

// An EntryInfo's problem stands beside its path: "is a FIFO, not a regular file", not the path
// again.
std::string beside_path(std::string problem, const std::string& shown_path) {
  if (problem.starts_with(shown_path + " ")) problem.erase(0, shown_path.size() + 1);
  return problem;
}

struct Inspected {
  EntryInfo info;
  std::uint64_t dev = 0, ino = 0;  // of what sits at the name (0: nothing opened)
};

// Checks one scanned file: its name, type and owner, header, name against header, manifest and
// `check`; with `full` the checksum too, streamed, so memory stays bounded. nullopt: it is gone.
std::optional<Inspected> inspect_file(const TrustedDir& d, const DirFile& f, bool read_only, const EntryCheck& check,
                                      bool full) {
  Inspected out;
  EntryInfo& info = out.info;
  info.path = d.path() / f.name;
  info.bytes = f.bytes;
  info.last_used = f.mtime_ns / 1'000'000'000;
  info.read_only = read_only;
  const auto parsed = parse_entry_file_name(f.name);
  if (!parsed) {
    info.problem = "file name is not <name>.<64 hex digit key>.fjc";
    return out;
  }
  info.name = parsed->name;
  info.key = parsed->key;
  OpenedFile file = open_for_reading(d, f.name);
  out.dev = file.dev;
  out.ino = file.ino;
  if (file.status == OpenedFile::Status::missing) return std::nullopt;  // removed since the scan
  const std::string shown = printable(info.path.string());
  if (file.status == OpenedFile::Status::error) {
    info.problem = beside_path(file.error, shown);
    return out;
  }
  const std::uint64_t size = static_cast<std::uint64_t>(file.st.st_size);
  info.bytes = size;
  if (size > kMaxFileBytes) {
    info.problem = std::to_string(size) + " bytes, larger than any cache entry (" + std::to_string(kMaxFileBytes) + ")";
    return out;
  }
  std::string head, manifest_text;
  info.problem = beside_path(
      read_exactly(file.fd.get(), 0, static_cast<std::size_t>(std::min<std::uint64_t>(size, kHeaderSize)), &head, shown),
      shown);
  if (!info.problem.empty()) return out;
  HeaderCheck hc = parse_header(head, size);
  if (!hc.header) {
    info.problem = std::move(hc.problem);
    return out;
  }
  const Header& h = *hc.header;
  info.key = h.key;
  info.name = h.name;
  if (std::string why = file_name_problem(f.name, h); !why.empty()) {
    info.problem = std::move(why);
    return out;
  }
  info.problem = beside_path(
      read_exactly(file.fd.get(), kHeaderSize, static_cast<std::size_t>(h.manifest_bytes), &manifest_text, shown), shown);
  if (!info.problem.empty()) return out;
  if (full) {
    Sha256 sha;
    hash_header(sha, head);
    sha.update(manifest_text);
    std::string chunk;
    for (std::uint64_t at = kHeaderSize + h.manifest_bytes; at < size; at += chunk.size()) {
      info.problem = beside_path(
          read_exactly(file.fd.get(), at, static_cast<std::size_t>(std::min<std::uint64_t>(kHashChunk, size - at)), &chunk,
                       shown),
          shown);
      if (!info.problem.empty()) return out;
      sha.update(chunk);
    }
    if (sha.finish_raw() != h.checksum) {
      info.problem = "checksum mismatch (corrupt)";
      return out;
    }
  }
  ManifestParse m = parse_manifest(manifest_text);
  if (!m.manifest) {
    info.problem = std::move(m.problem);
    return out;
  }
  if (check) {
    info.problem = check(h.key, *m.manifest);
    if (!info.problem.empty()) return out;
  }
  info.valid = true;
  info.manifest = std::move(*m.manifest);
  return out;
}

// The whole of a file that is an entry for its own header: checked in full, `check` included.
// problem is set when it is not valid.
struct WholeEntry {
  std::string bytes;
  std::optional<Header> header;
  std::string problem;
  bool gone = false;
};
WholeEntry read_entry(const TrustedDir& d, const std::string& file_name, const EntryCheck& check) {
  WholeEntry w;
  FileRead r = read_whole_file(d, file_name, kMaxFileBytes);
  if (r.status == FileRead::Status::missing) {
    w.gone = true;
    return w;
  }
  const std::string shown = printable((d.path() / file_name).string());
  if (r.status == FileRead::Status::error) {
    w.problem = r.error;
    return w;
  }
  HeaderCheck hc = parse_header(r.bytes, r.bytes.size());
  if (!hc.header) {
    w.problem = shown + ": " + hc.problem;
    return w;
  }
  Decoded dec = decode_entry(r.bytes, hc.header->key);
  std::string why = dec.entry ? check ? check(hc.header->key, dec.entry->manifest) : "" : dec.problem;
  if (!why.empty()) {
    w.problem = shown + ": " + why;
    return w;
  }
  w.header = std::move(hc.header);
  w.bytes = std::move(r.bytes);
  return w;
}

std::string canonical_name(const Header& h) { return h.name + "." + h.key + std::string(kEntrySuffix); }

}  // namespace

struct DiskStore::Warned {
  std::mutex mutex;
  std::set<std::string> seen;
};

DiskStore::DiskStore(StoreOptions options) : options_(std::move(options)), warned_(std::make_shared<Warned>()) {
  // The writable directory is searched last anyway; listing it as a layer too would only make
  // every fault in it reported twice.
  std::erase_if(options_.layers, [&](const fs::path& l) { return same_dir(l, options_.dir); });
}

void DiskStore::warn_once(const std::string& what, const std::string& message) const {
  bool first = false;
  {
    std::lock_guard<std::mutex> g(warned_->mutex);
    first = warned_->seen.insert(what).second;
  }
  log(first ? LogLevel::warn : LogLevel::debug, message);
}

TrustedDir DiskStore::open_dir(const fs::path& dir, Create create) const {
  return TrustedDir::open(dir, options_.sharing, create);
}

bool DiskStore::usable(const TrustedDir& d, bool read_only) const {
  if (d.ok()) return true;
  if (d.status() != TrustedDir::Status::missing)
    warn_once(d.path().string(), std::string("flashjit cache: skipping the ") +
                                     (read_only ? "read-only layer" : "cache directory") + ": " + d.problem());
  return false;
}

fs::path DiskStore::entry_path(const fs::path& dir, const Key& key, const std::string& name) const {
  return dir / entry_file_name(key, name);
}

fs::path DiskStore::lock_path(const Key& key) const {
  // In a shared sticky directory (/dev/shm) the locks go into a subdirectory of our own.
  const fs::path dir = options_.lock_dir.empty() ? options_.dir / ".locks"
                                                 : private_place(options_.lock_dir, "flashjit-locks", options_.sharing);
  return dir / (key.hex + ".lock");
}

std::optional<Entry> DiskStore::load_impl(const Key& key, const std::string& name, const EntryCheck& check,
                                          std::string* rejected, bool recheck, Provenance* where) {
  const std::string file = entry_file_name(key, name);  // validates the key
  auto try_dir = [&](const TrustedDir& d, bool writable) -> std::optional<Entry> {
    const std::string path = printable((d.path() / file).string());
    FileRead r = read_whole_file(d, file, kMaxFileBytes);
    if (r.status == FileRead::Status::missing) return std::nullopt;
    std::string problem = r.error;
    if (r.status == FileRead::Status::ok) {
      Decoded dec = decode_entry(r.bytes, key.hex);
      std::string why = dec.problem;
      if (dec.entry) why = file_name_problem(file, *dec.header);
      if (dec.entry && why.empty() && check) why = check(key.hex, dec.entry->manifest);
      if (why.empty()) {
        if (writable) touch(d, file);  // last-used stamp for LRU eviction
        log(LogLevel::debug, "flashjit cache: hit " + path);
        if (where) {
          where->file = d.path() / file;
          where->read_only = !writable;
        }
        return std::move(dec.entry);
      }
      problem = path + ": " + why;
    }
    if (writable && r.ino != 0) {  // whatever sits at the name in our own directory: ours to replace
      const Removal rm = remove_if_same(d, file, r.dev, r.ino);
      if (rm.status == Removal::Status::removed) problem += "; removed, it will be rebuilt";
      else if (rm.status == Removal::Status::failed) problem += "; " + rm.error;
    } else if (!writable) {
      problem += " (read-only layer, left in place)";
    }
    // a bad file in a layer stays, so the re-check after locking would only repeat the warning
    log(recheck && !writable ? LogLevel::debug : LogLevel::warn, "flashjit cache: ignoring a bad entry: " + problem);
    if (rejected) *rejected += "; rejected " + problem;
    return std::nullopt;
  };
  auto skipped = [&](const TrustedDir& d, bool read_only) {
    if (usable(d, read_only)) return false;
    if (rejected && d.status() != TrustedDir::Status::missing) *rejected += "; skipped " + d.problem();
    return true;
  };
  for (const auto& layer : options_.layers) {
    const TrustedDir d = open_dir(layer, Create::no);
    if (skipped(d, true)) continue;
    if (auto e = try_dir(d, false)) return e;
  }
  const TrustedDir d = open_dir(options_.dir, Create::no);
  if (skipped(d, false)) return std::nullopt;
  return try_dir(d, true);
}

std::optional<Entry> DiskStore::load(const Key& key, const std::string& name, const EntryCheck& check,
                                     Provenance* where) {
  return load_impl(key, name, check, nullptr, false, where);
}

bool DiskStore::store(const Key& key, const std::string& name, const Entry& entry, std::string* error) {
  const std::string file = entry_file_name(key, name);
  const std::string bytes = encode_entry(key.hex, name, entry);
  std::string why;
  TrustedDir d;
  if (bytes.size() > kMaxFileBytes) {
    why = "it would be " + std::to_string(bytes.size()) + " bytes, over the entry size limit (" +
          std::to_string(kMaxFileBytes) + ")";
  } else {
    d = open_dir(options_.dir, Create::private_dir);
    why = d.ok() ? publish_atomically(d, file, bytes, entry_file_mode(options_.sharing)) : d.problem();
  }
  if (!why.empty()) {
    warn_once("store", "flashjit cache: cannot store " + file + " in " + printable(options_.dir.string()) + ": " +
                           why + "; kernels stay in memory only");
    if (error) *error = "cannot store " + file + " in " + printable(options_.dir.string()) + ": " + why;
    return false;
  }
  if (options_.max_bytes > 0) evict(d, options_.max_bytes, file);
  return true;
}

Entry DiskStore::get_or_create(const Key& key, const std::string& name, const std::function<Entry()>& produce,
                               bool* produced) {
  Provenance where;
  Entry e = get_or_create(key, name, produce, {}, &where);
  if (produced) *produced = where.produced;
  return e;
}

Entry DiskStore::get_or_create(const Key& key, const std::string& name, const std::function<Entry()>& produce,
                               const EntryCheck& check, Provenance* where) {
  Provenance local;
  Provenance& w = where ? *where : local;
  w = Provenance{};
  std::string rejected;
  if (auto e = load_impl(key, name, check, &rejected, false, &w)) return std::move(*e);
  if (options_.offline) {
    std::string searched;
    for (const auto& l : options_.layers) searched += printable(l.string()) + ", ";
    searched += printable(options_.dir.string());
    throw MissError("flashjit: kernel not in cache (offline mode, FLASHJIT_OFFLINE=1): " + name + " key " +
                    key.hex + "; searched: " + searched + rejected);
  }
  const fs::path lock_file = lock_path(key);
  FileLock lock(lock_file, options_.lock_timeout_s, options_.sharing);
  switch (lock.status()) {
    case FileLock::Status::timed_out: {
      std::ostringstream msg;
      msg << "flashjit cache: timed out after " << options_.lock_timeout_s << " s waiting for the lock "
          << lock_file.string() << " (another thread or process is producing " << name
          << "); raise FLASHJIT_LOCK_TIMEOUT to wait longer, or set FLASHJIT_LOCK_DIR to node-local storage "
             "if the cache is on a network file system";
      throw LockTimeout(msg.str());
    }
    case FileLock::Status::unavailable:
      warn_once("lock", "flashjit cache: " + lock.error() +
                            "; producing without a cross-process lock (set FLASHJIT_LOCK_DIR to a writable directory)");
      break;
    case FileLock::Status::locked: break;
  }
  // Another thread or process may have published while we waited.
  if (auto e = load_impl(key, name, check, nullptr, true, &w)) return std::move(*e);
  log(LogLevel::debug, "flashjit cache: miss " + name + " key " + key.hex);
  Entry entry = produce();
  w.produced = true;
  if (check) {
    // Storing what every later load would reject would make each of them produce it again.
    const std::string why = check(key.hex, entry.manifest);
    if (!why.empty()) throw std::runtime_error("flashjit cache: the entry produced for " + name + " is not valid: " + why);
  }
  if (store(key, name, entry, &w.store_error)) w.file = entry_path(options_.dir, key, name);
  return entry;
}

std::vector<DirInfo> DiskStore::directories() const {
  std::vector<DirInfo> out;
  auto add_dir = [&](const fs::path& p, bool read_only) {
    const TrustedDir d = open_dir(p, Create::no);
    out.push_back(DirInfo{p, read_only, d.status(), d.ok() ? "" : d.problem()});
  };
  for (const auto& layer : options_.layers) add_dir(layer, true);
  add_dir(options_.dir, false);
  return out;
}

std::vector<EntryInfo> DiskStore::list(const EntryCheck& check) const {
  std::vector<EntryInfo> out;
  auto collect = [&](const fs::path& dir, bool read_only) {
    const TrustedDir d = open_dir(dir, Create::no);
    if (!usable(d, read_only)) return;
    const DirScan s = scan(d);
    if (!s.error.empty()) log(LogLevel::warn, "flashjit cache: " + s.error);
    for (const auto& f : s.entries)
      if (auto i = inspect_file(d, f, read_only, check, false)) out.push_back(std::move(i->info));
  };
  for (const auto& layer : options_.layers) collect(layer, true);
  collect(options_.dir, false);
  return out;
}

EntryInfo DiskStore::inspect(const EntryInfo& listed, const EntryCheck& check) const {
  EntryInfo info = listed;
  const TrustedDir d = open_dir(listed.path.parent_path(), Create::no);
  if (!d.ok()) {
    info.valid = false;
    info.problem = d.problem();
    return info;
  }
  struct stat st {};
  const std::string file = listed.path.filename().string();
  if (::fstatat(d.fd(), file.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    info.valid = false;
    info.problem = "cannot stat " + printable(listed.path.string()) + ": " + errno_text(errno);
    return info;
  }
  const DirFile f{file, S_ISREG(st.st_mode), static_cast<std::uint64_t>(st.st_size),
                  std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  if (auto i = inspect_file(d, f, listed.read_only, check, true)) return std::move(i->info);
  info.valid = false;
  info.problem = printable(listed.path.string()) + " has been removed";
  return info;
}

VerifyReport DiskStore::verify(bool remove_bad, const EntryCheck& check) {
  VerifyReport report;
  auto check_dir = [&](const fs::path& dir, bool read_only) {
    const TrustedDir d = open_dir(dir, Create::no);
    if (!d.ok()) {
      if (d.status() != TrustedDir::Status::missing) report.skipped_dirs.push_back(d.problem());
      return;
    }
    const DirScan s = scan(d);
    if (!s.error.empty()) report.skipped_dirs.push_back(s.error);
    for (const auto& f : s.entries) {
      auto i = inspect_file(d, f, read_only, check, true);
      if (!i) continue;
      ++report.checked;
      if (i->info.valid) continue;
      if (remove_bad && !read_only) {
        const Removal r = i->ino ? remove_if_same(d, f.name, i->dev, i->ino) : remove_file(d, f.name);
        i->info.removed = r.status != Removal::Status::failed;
        i->info.remove_error = r.error;
      }
      report.bad.push_back(std::move(i->info));
    }
  };
  for (const auto& layer : options_.layers) check_dir(layer, true);
  check_dir(options_.dir, false);
  return report;
}

Cleanup DiskStore::prune(std::uint64_t max_bytes) {
  const TrustedDir d = open_dir(options_.dir, Create::no);
  if (d.status() == TrustedDir::Status::missing) return {};
  if (!d.ok()) throw std::runtime_error("flashjit cache: " + d.problem());
  Cleanup c = remove_stale_temps(d, scan(d));
  add(c, evict(d, max_bytes, {}));
  return c;
}

Cleanup DiskStore::clear() {
  const TrustedDir d = open_dir(options_.dir, Create::no);
  if (d.status() == TrustedDir::Status::missing) return {};
  if (!d.ok()) throw std::runtime_error("flashjit cache: " + d.problem());
  const DirScan s = scan(d);
  Cleanup c;
  if (!s.error.empty()) c.failures.push_back(s.error);
  for (const auto& e : s.entries) {
    const Removal r = remove_file(d, e.name);
    if (r.status == Removal::Status::removed) {
      ++c.entries;
      c.bytes += e.bytes;
    } else if (r.status == Removal::Status::failed) {
      c.failures.push_back(r.error);
    }
  }
  add(c, remove_stale_temps(d, s));
  // Lock files nobody holds (left by killed processes). Locking one first means a holder is
  // never disturbed; FileLock unlinks the file on release.
  const fs::path lock_dir = lock_path(Key{std::string(64, '0')}).parent_path();
  const TrustedDir locks = open_dir(lock_dir, Create::no);
  std::error_code ec;
  if (locks.ok())
    for (fs::directory_iterator it(lock_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string f = it->path().filename().string();
      if (f.size() == 64 + 5 && f.ends_with(".lock") && is_key_hex(f.substr(0, 64)))
        FileLock stale(lock_dir / f, 0, options_.sharing);
    }
  return c;
}

std::size_t DiskStore::export_to(const fs::path& dir, const EntryCheck& check) const {
  const TrustedDir out = open_dir(dir, Create::shipped);
  if (!out.ok()) throw std::runtime_error("flashjit cache: cannot export to " + printable(dir.string()) + ": " + out.problem());
  std::set<std::string> done;  // the first valid copy of a key, in lookup order
  auto copy_dir = [&](const fs::path& from, bool read_only) {
    const TrustedDir d = open_dir(from, Create::no);
    if (!usable(d, read_only)) return;
    for (const auto& f : scan(d).entries) {
      const auto parsed = parse_entry_file_name(f.name);
      if (!parsed || done.count(parsed->key)) continue;
      WholeEntry w = read_entry(d, f.name, check);
      if (!w.header || canonical_name(*w.header) != f.name) continue;  // invalid: verify reports it
      const std::string error = publish_atomically(out, f.name, w.bytes, entry_file_mode(Sharing{}));
      if (!error.empty())
        throw std::runtime_error("flashjit cache: cannot export " + printable((d.path() / f.name).string()) + ": " + error);
      done.insert(w.header->key);
    }
  };
  for (const auto& layer : options_.layers) copy_dir(layer, true);
  copy_dir(options_.dir, false);
  return done.size();
}

ImportReport DiskStore::import_from(const fs::path& dir, const EntryCheck& check) {
  const TrustedDir src = open_dir(dir, Create::no);
  if (!src.ok()) throw std::runtime_error("flashjit cache: not importing from " + printable(dir.string()) + ": " + src.problem());
  const TrustedDir dst = open_dir(options_.dir, Create::private_dir);
  if (!dst.ok()) throw std::runtime_error("flashjit cache: cannot import into " + printable(options_.dir.string()) + ": " + dst.problem());
  const DirScan s = scan(src);
  if (!s.error.empty()) throw std::runtime_error("flashjit cache: " + s.error);
  ImportReport report;
  std::set<std::string> done;
  for (const auto& f : s.entries) {
    const std::string shown = printable((src.path() / f.name).string());
    WholeEntry w = read_entry(src, f.name, check);
    if (w.gone) continue;
    if (!w.header) {
      report.skipped.push_back(w.problem);
      log(LogLevel::warn, "flashjit cache: not importing " + w.problem);
      continue;
    }
    // Named from the verified contents, whatever the file was called.
    const std::string name = canonical_name(*w.header);
    if (!done.insert(w.header->key).second) {
      report.notes.push_back(shown + ": another copy of " + name + ", imported once");
      continue;
    }
    if (f.name != name) report.notes.push_back(shown + " is misnamed: imported as " + name);
    const std::string e = publish_atomically(dst, name, w.bytes, entry_file_mode(options_.sharing));
    if (!e.empty()) throw std::runtime_error("flashjit cache: cannot import " + shown + ": " + e);
    ++report.imported;
  }
  for (const auto& n : report.notes) log(LogLevel::info, "flashjit cache: " + n);
  if (options_.max_bytes > 0) evict(dst, options_.max_bytes, {});
  return report;
}

}  // namespace flashjit::cache
