#include "runtime/ptxas_report.hpp"

#include <regex>
#include <sstream>

namespace flashjit {

bool PtxasReport::has_advisory(const std::string& code) const {
  for (const auto& a : advisories)
    if (a.find(code) != std::string::npos) return true;
  return false;
}

PtxasReport parse_ptxas_report(const std::string& log, const std::string& entry) {
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex barriers(R"(used (\d+) barriers)");
  static const std::regex smem(R"((\d+) bytes smem)");

  PtxasReport r;
  std::istringstream in(log);
  std::string line;
  bool in_entry = entry.empty();
  bool seen_entry = false;
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.find("warning") != std::string::npos || line.find("(C7") != std::string::npos ||
        line.find("advisory") != std::string::npos) {
      r.advisories.push_back(line);
    }
    if (line.find("Compiling entry function") != std::string::npos ||
        line.find("Function properties for") != std::string::npos) {
      bool match = entry.empty() ? !seen_entry : line.find("'" + entry + "'") != std::string::npos ||
                                                     line.find(" " + entry) != std::string::npos;
      if (line.find("Compiling entry function") != std::string::npos) {
        in_entry = match;
        if (match) seen_entry = true;
      }
      continue;
    }
    if (!in_entry) continue;
    if (std::regex_search(line, m, frame)) {
      r.stack_frame = std::stoi(m[1]);
      r.spill_stores = std::stoi(m[2]);
      r.spill_loads = std::stoi(m[3]);
    }
    if (std::regex_search(line, m, used)) {
      r.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, barriers)) r.barriers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) r.static_smem = std::stoi(m[1]);
    }
  }
  return r;
}

nlohmann::json to_json(const PtxasReport& r) {
  return {{"registers", r.registers},     {"spill_stores", r.spill_stores},
          {"spill_loads", r.spill_loads}, {"stack_frame", r.stack_frame},
          {"static_smem", r.static_smem}, {"barriers", r.barriers},
          {"advisories", r.advisories}};
}

PtxasReport ptxas_report_from_json(const nlohmann::json& j) {
  PtxasReport r;
  r.registers = j.value("registers", 0);
  r.spill_stores = j.value("spill_stores", 0);
  r.spill_loads = j.value("spill_loads", 0);
  r.stack_frame = j.value("stack_frame", 0);
  r.static_smem = j.value("static_smem", 0);
  r.barriers = j.value("barriers", 0);
  r.advisories = j.value("advisories", std::vector<std::string>{});
  return r;
}

}  // namespace flashjit
