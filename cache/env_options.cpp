#include "cache/env_options.hpp"

#include "cache/file_io.hpp"
#include "cache/log.hpp"
#include "cache/store.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit::cache {

namespace {

[[noreturn]] void reject(std::string_view variable, std::string_view value, std::string_view expected) {
  throw std::invalid_argument(std::string(variable) + "='" + std::string(value) + "' is not valid: expected " +
                              std::string(expected));
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Creates dir (private), checks that it is trusted and that we can write into it.
bool usable(const std::filesystem::path& dir, const Sharing& sharing, std::string* why, bool* untrusted) {
  const TrustedDir d = TrustedDir::open(dir, sharing, Create::private_dir);
  if (!d.ok()) {
    *why = d.problem();
    *untrusted = d.status() == TrustedDir::Status::untrusted;
    return false;
  }
  if (::faccessat(d.fd(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    *why = errno_text(errno);
    return false;
  }
  return true;
}

// <tmp>/flashjit-<uid>, only if it is a trusted directory (a cache directory others can write
// is a way to make us load their binaries).
std::filesystem::path temp_cache_dir() {
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  const std::filesystem::path dir = tmp / ("flashjit-" + std::to_string(::geteuid()));
  const TrustedDir d = TrustedDir::open(dir, Sharing{}, Create::private_dir);
  if (d.ok()) return dir;
  std::string templ = (tmp / "flashjit-XXXXXX").string();
  if (::mkdtemp(templ.data())) {
    log(LogLevel::warn, "flashjit cache: " + dir.string() + " is not a private directory (" + d.problem() +
                            "); using " + templ);
    return templ;
  }
  return dir;  // store() will report why it cannot be used
}

}  // namespace

std::uint64_t parse_byte_size(std::string_view variable, std::string_view value) {
  constexpr const char* expected = "a byte count with an optional K, M or G suffix, e.g. 500M";
  if (value.empty()) return 0;
  std::size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) ++digits;
  if (digits == 0) reject(variable, value, expected);
  std::uint64_t shift = 0;
  const std::string_view suffix = value.substr(digits);
  if (!suffix.empty()) {
    const std::string s = lower(suffix);
    if (s == "k") shift = 10;
    else if (s == "m") shift = 20;
    else if (s == "g") shift = 30;
    else reject(variable, value, expected);
  }
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const std::uint64_t d = static_cast<std::uint64_t>(value[i] - '0');
    if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) reject(variable, value, "a value that fits in 64 bits");
    n = n * 10 + d;
  }
  if (n > (std::numeric_limits<std::uint64_t>::max() >> shift)) reject(variable, value, "a value that fits in 64 bits");
  return n << shift;
}

bool parse_bool(std::string_view variable, std::string_view value) {
  const std::string v = lower(value);
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  reject(variable, value, "1/true/yes/on or 0/false/no/off");
}

double parse_seconds(std::string_view variable, std::string_view value) {
  constexpr const char* expected = "a non-negative number of seconds, e.g. 300 or 0.5";
  const std::string s(value);
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) reject(variable, value, expected);
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(d) || d < 0) reject(variable, value, expected);
  return d;
}

std::vector<std::filesystem::path> parse_path_list(std::string_view value) {
  std::vector<std::filesystem::path> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = value.find(':', start);
    if (end == std::string_view::npos) end = value.size();
    if (end > start) out.emplace_back(std::string(value.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

gid_t parse_group(std::string_view variable, std::string_view value) {
  constexpr const char* expected = "the name or number of a group you are a member of";
  const std::string s(value);
  gid_t gid = 0;
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() <= 9) {
    gid = static_cast<gid_t>(std::stoul(s));
  } else {
    std::vector<char> buf(16384);
    group gr{}, *found = nullptr;
    if (s.empty() || ::getgrnam_r(s.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || !found)
      reject(variable, value, expected);
    gid = found->gr_gid;
  }
  if (::geteuid() == 0 || ::getegid() == gid) return gid;
  const int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(n > 0 ? n : 0);
  if (n > 0 && ::getgroups(n, groups.data()) == n)
    for (gid_t g : groups)
      if (g == gid) return gid;
  reject(variable, value, expected);
}

std::filesystem::path default_cache_dir(const Sharing& sharing) {
  std::filesystem::path dir;
  const std::string xdg = env("XDG_CACHE_HOME"), home = env("HOME");
  if (!xdg.empty() && xdg[0] == '/') dir = std::filesystem::path(xdg) / "flashjit";
  else if (!home.empty()) dir = std::filesystem::path(home) / ".cache" / "flashjit";
  std::string why;
  bool untrusted = false;
  if (!dir.empty() && usable(dir, sharing, &why, &untrusted)) return dir;
  const std::filesystem::path tmp = temp_cache_dir();
  // A read-only home is common in containers; a directory others can write is not.
  if (!dir.empty())
    log(untrusted ? LogLevel::warn : LogLevel::info,
        "flashjit cache: cannot use " + dir.string() + " (" + why + "); caching in " + tmp.string());
  return tmp;
}

StoreOptions StoreOptions::from_env() {
  StoreOptions o;
  const std::string group = env("FLASHJIT_CACHE_GROUP");
  if (!group.empty()) o.sharing.group = parse_group("FLASHJIT_CACHE_GROUP", group);
  const std::string dir = env("FLASHJIT_CACHE_DIR");
  o.dir = dir.empty() ? default_cache_dir(o.sharing) : std::filesystem::path(dir);
  o.layers = parse_path_list(env("FLASHJIT_CACHE_PATH"));
  o.offline = parse_bool("FLASHJIT_OFFLINE", env("FLASHJIT_OFFLINE"));
  o.max_bytes = parse_byte_size("FLASHJIT_CACHE_MAX_BYTES", env("FLASHJIT_CACHE_MAX_BYTES"));
  const std::string timeout = env("FLASHJIT_LOCK_TIMEOUT");
  if (!timeout.empty()) o.lock_timeout_s = parse_seconds("FLASHJIT_LOCK_TIMEOUT", timeout);
  o.lock_dir = env("FLASHJIT_LOCK_DIR");
  return o;
}

}  // namespace flashjit::cache
