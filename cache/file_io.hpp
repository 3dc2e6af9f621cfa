// POSIX file primitives for the cache: read a whole file, publish one atomically, touch it.
// Errors come back as values (never exceptions): a cache fault must not take the caller down.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace flashjit::cache {

struct FileRead {
  enum class Status { ok, missing, error } status = Status::error;
  std::string bytes;
  std::string error;     // when status == error: what failed (with errno text)
  std::uint64_t dev = 0, ino = 0;  // identity of the regular file opened (0: none)
};
// A regular file larger than max_bytes is an error, not an allocation of its size.
FileRead read_whole_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// Temp files are "<dir>/.fjc-tmp.<pid>.<tid>.<counter>.<random>": hidden, never *.fjc.
inline constexpr std::string_view kTempPrefix = ".fjc-tmp.";

// Writes bytes to a new unique temp file in dir, fsyncs it, renames it over dir/file_name and
// fsyncs dir. Creates dir (and parents) first. Returns "" on success, else the error text (the
// temp file is removed).
std::string publish_atomically(const std::filesystem::path& dir, const std::string& file_name,
                               std::string_view bytes);

// Sets the file's mtime (and atime) to now: the cache's last-used stamp. False on failure.
bool touch(const std::filesystem::path& path);

// Removes path only if it is still the file (dev, ino) that was read, so a good file another
// process has just renamed into place is not removed by mistake. False if nothing was removed.
bool remove_if_same(const std::filesystem::path& path, std::uint64_t dev, std::uint64_t ino);

// strerror for errno values, thread-safe.
std::string errno_text(int err);

}  // namespace flashjit::cache
