#include "cli/format.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace flashjit::cli {

std::string format_fixed(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return std::to_string(bytes) + " B";
  return format_fixed(v, v < 10 ? 2 : v < 100 ? 1 : 0) + " " + units[u];
}

std::string format_ms(double ms) {
  if (ms >= 10000) return format_fixed(ms / 1000, 1) + " s";
  if (ms >= 1000) return format_fixed(ms / 1000, 2) + " s";
  if (ms >= 10) return format_fixed(ms, 0) + " ms";
  if (ms >= 1) return format_fixed(ms, 2) + " ms";
  return format_fixed(ms, 4) + " ms";
}

std::string format_duration_s(double s) {
  if (s < 0) s = 0;
  long long t = static_cast<long long>(s + 0.5);
  char b[64];
  if (t >= 3600) std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
  else std::snprintf(b, sizeof b, "%lld:%02lld", t / 60, t % 60);
  return b;
}

std::string format_time(std::int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M", &tm);
  return b;
}

std::string format_age(std::int64_t unix_seconds) {
  const std::int64_t d = static_cast<std::int64_t>(std::time(nullptr)) - unix_seconds;
  if (d < 60) return "just now";
  if (d < 3600) return std::to_string(d / 60) + " min ago";
  if (d < 86400) return std::to_string(d / 3600) + " h ago";
  if (d < 86400 * 60) return std::to_string(d / 86400) + " d ago";
  return format_time(unix_seconds);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace flashjit::cli
