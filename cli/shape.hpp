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
//  - --window L,R needs the sliding_window mask;
//  - --cache-lens sets the batch and each sequence's keys; --splits needs a decode config;
//    page options need a paged one;
//  - rows over the batch (and rows x heads) stay below 2^31.
ProblemShape make_shape(const ShapeOptions& o, const Config& c);

// An int32 .npy page table [batch, max_pages], flattened; throws UsageError naming the file.
std::vector<int> read_page_table(const std::string& file, int batch);

// `c` with --page-size applied (-1: unchanged, 0: contiguous, else paged in pages of that size).
Config with_page_size(Config c, int page_size);

// "3,100,7" -> {3, 100, 7}; throws UsageError naming `flag`.
std::vector<int> parse_int_list(const std::string& text, const std::string& flag);

nlohmann::json shape_json(const ProblemShape& s);

}  // namespace flashjit::cli
