// The flashjit commands as functions: each takes its parsed options and a Context and returns the
// exit code. The command-line parser (app.cpp, CLI11) only fills these structs; the test suite
// calls the functions directly.
#pragma once

#include "cli/context.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace flashjit::cli {

// ---- generate ---------------------------------------------------------------------------------
struct GenerateOptions {
  std::string config;      // path, or "-" for stdin
  std::string arch;        // overrides the config's arch when set
  bool flat = false;       // the self-contained source (every template inlined)
  bool reference = false;  // the fp32 reference kernel instead of the fast one
  std::string output;      // file; empty: stdout
};
int cmd_generate(const GenerateOptions& o, Context& ctx);

// ---- compile ----------------------------------------------------------------------------------
struct CompileOptions {
  std::string config;
  std::vector<std::string> archs;  // empty: the config's arch
  bool json = false;
  bool reference = false;
};
int cmd_compile(const CompileOptions& o, Context& ctx);

// ---- precompile -------------------------------------------------------------------------------
struct PrecompileOptions {
  std::string manifest;
  int jobs = 0;                    // 0: hardware threads
  std::string shard;               // "I/N"; empty: everything
  std::vector<std::string> archs;  // replace the manifest's archs
  bool keep_going = false;         // keep compiling after a failure
  bool dry_run = false;            // print the plan, compile nothing
  std::string json_summary;        // file for a JSON summary; empty: none
};
int cmd_precompile(const PrecompileOptions& o, Context& ctx);

// ---- cache ------------------------------------------------------------------------------------
int cmd_cache_list(bool json, Context& ctx);
struct CacheInfoOptions {
  std::string what;  // key, key prefix (>= 6 hex digits) or readable name
  bool source = false;
  bool log = false;
  bool json = false;
};
int cmd_cache_info(const CacheInfoOptions& o, Context& ctx);
int cmd_cache_verify(bool remove, Context& ctx);
int cmd_cache_prune(const std::string& max_bytes, Context& ctx);
int cmd_cache_clear(Context& ctx);
int cmd_cache_export(const std::string& dir, Context& ctx);
int cmd_cache_import(const std::string& dir, Context& ctx);
int cmd_cache_path(bool layers, Context& ctx);

// ---- config -----------------------------------------------------------------------------------
struct ConfigValidateOptions {
  std::vector<std::string> configs;
  std::string arch;
};
int cmd_config_validate(const ConfigValidateOptions& o, Context& ctx);
struct ConfigResolveOptions {
  std::string config;
  std::string arch;
  bool compact = false;  // canonical one-line form instead of pretty-printed
};
int cmd_config_resolve(const ConfigResolveOptions& o, Context& ctx);
int cmd_config_schema(Context& ctx);
const std::string& config_schema_text();  // the embedded JSON Schema

// ---- run / bench ------------------------------------------------------------------------------
struct ShapeOptions {
  int batch = 2;
  int seqlen_q = 1024;
  int seqlen_k = -1;   // -1: seqlen_q
  int heads = 16;      // query heads
  int kv_heads = -1;   // -1: heads / group
  std::string seqlens_q;  // "3,100,7": a ragged batch (varlen configs)
  std::string seqlens_k;  // empty: seqlens_q
  std::string layout = "bshd";
  std::string window;     // "L,R" for sliding_window masks (-1: unbounded)
  float softmax_scale = 0.f;
  // KV caches: keys per sequence ("100,4096,7"; the longest is --seqlen-k's default), the page
  // size (-1: the config's; 0: a contiguous cache), random or in-order pages, a page table from
  // an int32 .npy [batch, max_pages] with the cache's page count, and the decode split count.
  std::string cache_lens;
  int page_size = -1;
  bool ordered_pages = false;
  std::string page_table;
  int num_pages = 0;
  int splits = 0;
};

struct RunOptions {
  std::string config;
  std::string arch;
  ShapeOptions shape;
  bool check = false;
  int warmup = 3;
  int iters = 10;
  uint64_t seed = 1;
  std::string load_q, load_k, load_v;
  std::string load_q_scale, load_k_scale, load_v_scale;
  std::string save_o, save_lse;
  bool json = false;
};
int cmd_run(const RunOptions& o, Context& ctx);

struct BenchOptions {
  std::string config;
  std::string arch;
  ShapeOptions shape;
  int warmup = 10;
  int iters = 50;
  int buffers = 0;  // copies of the problem rotated through (defeats L2 reuse); 0: automatic
  uint64_t seed = 1;
  bool json = false;
};
int cmd_bench(const BenchOptions& o, Context& ctx);

// ---- version ----------------------------------------------------------------------------------
std::string version_text();

}  // namespace flashjit::cli
