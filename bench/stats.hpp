// Summary statistics of timing samples (header-only).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

namespace flashjit::bench {

struct Summary {
  double median = 0, min = 0, max = 0, mean = 0;
  size_t n = 0;
};

inline Summary summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  return s;
}

inline nlohmann::json to_json(const Summary& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"n", s.n}};
}

}  // namespace flashjit::bench
