// The ptxas resource report (registers, spills, shared memory) and advisories (C75xx) parsed from
// an NVRTC log compiled with --ptxas-options=-v.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace flashjit {

struct PtxasReport {
  int registers = 0;
  int spill_stores = 0;   // bytes
  int spill_loads = 0;    // bytes
  int stack_frame = 0;    // bytes
  int static_smem = 0;    // bytes
  int barriers = 0;
  std::vector<std::string> advisories;  // ptxas warning/advisory lines, e.g. "(C7508) ... setmaxnreg ignored"
  bool has_advisory(const std::string& code) const;
};

// Parses the report of `entry` (the first function's report when entry is empty).
PtxasReport parse_ptxas_report(const std::string& log, const std::string& entry = "");

nlohmann::json to_json(const PtxasReport& r);
PtxasReport ptxas_report_from_json(const nlohmann::json& j);

}  // namespace flashjit
