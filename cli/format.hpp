// Small text helpers shared by the commands: sizes, durations, times, tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashjit::cli {

std::string format_bytes(std::uint64_t bytes);  // "1.5 MiB", "312 B"
std::string format_ms(double ms);               // "812 ms", "1.24 s", "0.031 ms"
std::string format_duration_s(double s);       // "0:07", "1:02:03"
std::string format_time(std::int64_t unix_seconds);  // "2024-05-01 12:30" (local time)
std::string format_age(std::int64_t unix_seconds);   // "just now", "5 min ago", "3 h ago", "2 d ago"
std::string format_fixed(double v, int decimals);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
std::vector<std::string> split(const std::string& s, char sep);

// Left-aligned columns separated by two spaces; the last column is not padded.
std::string format_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace flashjit::cli
