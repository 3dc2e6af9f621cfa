// The problem shape of `run` and `bench`, from their command-line flags.
#pragma once

#include "cli/commands.hpp"
#include "generator/config.hpp"
#include "runtime/harness.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace flashjit::cli {

// Checks the flags against the config and builds the shape; throws UsageError naming the flag.
//  - ragged (--seqlens-q) needs a varlen config; a varlen config without it gets `batch`
//    sequences of --seqlen-q/--seqlen-k rows;
//  - --kv-heads defaults to --heads / group, and heads must equal kv_heads x group;
//  - --window L,R needs the sliding_window mask.
ProblemShape make_shape(const ShapeOptions& o, const Config& c);

// "3,100,7" -> {3, 100, 7}; throws UsageError naming `flag`.
std::vector<int> parse_int_list(const std::string& text, const std::string& flag);

nlohmann::json shape_json(const ProblemShape& s);

}  // namespace flashjit::cli
