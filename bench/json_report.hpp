// Output of the benchmark programs: JSON files written atomically, and the compact stdout table.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace flashjit::bench {

// Writes `j` (indented) to path through a temp file and a rename, so a reader never sees half a
// file; the run rewrites its report after every point. Throws std::runtime_error naming the path.
void write_json_file(const std::string& path, const nlohmann::json& j);

// The table of flashjit_bench points (the "points" array of its report), one line per point.
std::string format_points_table(const nlohmann::json& points);

// One line of the table (also the progress line printed as each point finishes).
std::string format_point_line(const nlohmann::json& point);
std::string points_table_header();

}  // namespace flashjit::bench
