#include "bench/json_report.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace flashjit::bench {

void write_json_file(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp);
    f << j.dump(2) << "\n";
    if (!f.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
}

namespace {

std::string str(const nlohmann::json& j, const char* key, const std::string& fallback = "-") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

// A number field, or `fallback` when absent or not a number (NaN and infinity are written as null).
double real(const nlohmann::json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

int num(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
}

}  // namespace

std::string points_table_header() {
  char b[256];
  std::snprintf(b, sizeof b, "%-5s %4s %-7s %6s %5s %4s %4s  %9s %9s %8s  %-11s %s", "dtype", "hd",
                "mask", "seqlen", "batch", "hq", "hk", "median_ms", "min_ms", "TFLOP/s", "check",
                "kernel");
  return b;
}

std::string format_point_line(const nlohmann::json& p) {
  const nlohmann::json& s = p.value("shape", nlohmann::json::object());
  std::string seq = std::to_string(num(s, "seqlen_q"));
  if (num(s, "seqlen_k") != num(s, "seqlen_q")) seq += "/" + std::to_string(num(s, "seqlen_k"));
  std::string check = "-";
  if (auto c = p.find("check"); c != p.end() && c->is_object()) {
    char b[48];
    const double nonfinite = real(*c, "nonfinite", 0);
    const bool passed = c->contains("passed") && (*c)["passed"].is_boolean() && (*c)["passed"].get<bool>();
    if (nonfinite > 0)
      std::snprintf(b, sizeof b, "FAIL %.0f NaN", nonfinite);
    else
      std::snprintf(b, sizeof b, "%s %.1e", passed ? "ok" : "FAIL", real(*c, "rel_error", NAN));
    check = b;
  }
  char times[96];
  if (p.contains("median_ms") && p["median_ms"].is_number())
    std::snprintf(times, sizeof times, "%9.4f %9.4f %8.1f", p["median_ms"].get<double>(),
                  real(p, "min_ms", NAN), real(p, "tflops", NAN));
  else
    std::snprintf(times, sizeof times, "%9s %9s %8s", "-", "-", "-");
  char b[512];
  std::snprintf(b, sizeof b, "%-5s %4d %-7s %6s %5d %4d %4d  %s  %-11s %s", str(p, "dtype").c_str(),
                num(p, "head_dim"), str(p, "mask").c_str(), seq.c_str(), num(s, "batch"),
                num(s, "heads_q"), num(s, "heads_k"), times, check.c_str(),
                str(p, "kernel").c_str());
  std::string line = b;
  if (p.contains("error") && p["error"].is_string()) {
    std::string e = p["error"].get<std::string>();
    if (auto nl = e.find('\n'); nl != std::string::npos) e = e.substr(0, nl) + " ...";
    line += "  ERROR: " + e;
  }
  return line;
}

std::string format_points_table(const nlohmann::json& points) {
  std::string out = points_table_header() + "\n";
  for (const auto& p : points) out += format_point_line(p) + "\n";
  return out;
}

}  // namespace flashjit::bench
