#include "cli/shape.hpp"

#include "cli/errors.hpp"
#include "cli/format.hpp"
#include "cli/npy.hpp"
#include "cli/register.hpp"
#include "generator/excerpt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace flashjit::cli {

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  for (const auto& part : split(text, ',')) {
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(part, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (part.empty() || used != part.size())
      throw UsageError(flag + " " + excerpt(text, 80) + ": expected comma-separated integers (e.g. 3,100,7)");
    out.push_back(v);
  }
  return out;
}

namespace {
constexpr int64_t kMaxRows = (int64_t(1) << 31) - 1;

[[noreturn]] void throw_too_many_rows(const char* what, int64_t rows) {
  throw UsageError(std::string(what) + " = " + std::to_string(rows) + " rows; at most " + std::to_string(kMaxRows));
}
}  // namespace

ProblemShape make_shape(const ShapeOptions& o, const Config& c) {
  ProblemShape s;
  if (o.batch < 1) throw UsageError("--batch " + std::to_string(o.batch) + ": must be at least 1");
  if (o.seqlen_q < 0) throw UsageError("--seqlen-q " + std::to_string(o.seqlen_q) + ": must not be negative");
  if (o.seqlen_k < -1) throw UsageError("--seqlen-k " + std::to_string(o.seqlen_k) + ": must not be negative");
  s.batch = o.batch;
  s.seqlen_q = o.seqlen_q;
  s.seqlen_k = o.seqlen_k < 0 ? o.seqlen_q : o.seqlen_k;
  if (!o.cache_lens.empty()) {
    if (c.varlen) throw UsageError("--cache-lens: a ragged batch gives its key lengths with --seqlens-k");
    s.cache_lens = parse_int_list(o.cache_lens, "--cache-lens");
    for (int v : s.cache_lens)
      if (v < 0) throw UsageError("--cache-lens: lengths must not be negative");
    if (o.batch != 2 && size_t(o.batch) != s.cache_lens.size())  // 2: --batch's default
      throw UsageError("--cache-lens has " + std::to_string(s.cache_lens.size()) + " lengths but --batch is " +
                       std::to_string(o.batch));
    s.batch = int(s.cache_lens.size());
    const int longest = *std::max_element(s.cache_lens.begin(), s.cache_lens.end());
    if (o.seqlen_k < 0) s.seqlen_k = longest;
    else if (longest > s.seqlen_k)
      throw UsageError("--cache-lens: " + std::to_string(longest) + " keys is more than --seqlen-k " +
                       std::to_string(s.seqlen_k));
  }

  if (!o.seqlens_q.empty() || !o.seqlens_k.empty()) {
    if (!c.varlen)
      throw UsageError("--seqlens-q/--seqlens-k describe a ragged batch: the config needs \"varlen\": true");
    if (o.seqlens_q.empty()) throw UsageError("--seqlens-k needs --seqlens-q");
    s.seqlens_q = parse_int_list(o.seqlens_q, "--seqlens-q");
    s.seqlens_k = o.seqlens_k.empty() ? s.seqlens_q : parse_int_list(o.seqlens_k, "--seqlens-k");
    if (s.seqlens_q.size() != s.seqlens_k.size())
      throw UsageError("--seqlens-q has " + std::to_string(s.seqlens_q.size()) + " lengths but --seqlens-k has " +
                       std::to_string(s.seqlens_k.size()) + ": one per sequence each");
    for (int v : s.seqlens_q)
      if (v < 0) throw UsageError("--seqlens-q: lengths must not be negative");
    for (int v : s.seqlens_k)
      if (v < 0) throw UsageError("--seqlens-k: lengths must not be negative");
    s.batch = static_cast<int>(s.seqlens_q.size());
  } else if (c.varlen) {
    s.seqlens_q.assign(s.batch, s.seqlen_q);
    s.seqlens_k.assign(s.batch, s.seqlen_k);
  }
  // Rows over the batch are counted in 32-bit ints (offsets, grid, LSE rows): keep them there.
  int64_t rows_q = int64_t(s.batch) * s.seqlen_q, rows_k = int64_t(s.batch) * s.seqlen_k;
  if (c.varlen) {
    rows_q = rows_k = 0;
    for (int v : s.seqlens_q) rows_q += v;
    for (int v : s.seqlens_k) rows_k += v;
  }
  const char* rows_of = c.varlen ? "the sum of --seqlens-q" : "--batch x --seqlen-q";
  if (rows_q > kMaxRows) throw_too_many_rows(rows_of, rows_q);
  if (rows_k > kMaxRows) throw_too_many_rows(c.varlen ? "the sum of --seqlens-k" : "--batch x --seqlen-k", rows_k);

  if (o.heads < 1) throw UsageError("--heads " + std::to_string(o.heads) + ": must be at least 1");
  if (rows_q * o.heads > kMaxRows)
    throw UsageError(std::string(rows_of) + " x --heads = " + std::to_string(rows_q * o.heads) +
                     " LSE entries; at most " + std::to_string(kMaxRows));
  s.heads_q = o.heads;
  if (o.kv_heads < 0) {
    if (o.heads % c.group)
      throw UsageError("--heads " + std::to_string(o.heads) + " is not a multiple of the config's group (" +
                       std::to_string(c.group) + " query heads per KV head)");
    s.heads_k = o.heads / c.group;
  } else {
    if (o.kv_heads < 1) throw UsageError("--kv-heads " + std::to_string(o.kv_heads) + ": must be at least 1");
    if (o.heads != o.kv_heads * c.group)
      throw UsageError("--heads " + std::to_string(o.heads) + " must equal --kv-heads " + std::to_string(o.kv_heads) +
                       " x the config's group " + std::to_string(c.group));
    s.heads_k = o.kv_heads;
  }

  if (o.layout == "bshd") s.layout = Layout::bshd;
  else if (o.layout == "bhsd") s.layout = Layout::bhsd;
  else throw UsageError("--layout " + o.layout + ": must be bshd or bhsd");

  if (!o.window.empty()) {
    if (c.mask != Mask::sliding_window)
      throw UsageError(std::string("--window needs a config with \"mask\": \"sliding_window\" (it has \"") +
                       to_string(c.mask) + "\")");
    const auto w = parse_int_list(o.window, "--window");
    if (w.size() != 2 || w[0] < -1 || w[1] < -1)
      throw UsageError("--window " + o.window + ": expected L,R (keys i-L .. i+R; -1 = unbounded)");
    s.window_left = w[0];
    s.window_right = w[1];
  }
  if (!(o.softmax_scale >= 0.f) || !std::isfinite(o.softmax_scale))
    throw UsageError("--softmax-scale " + std::to_string(o.softmax_scale) +
                     ": must be positive and finite (0 selects 1/sqrt(head_dim.qk))");
  s.softmax_scale = o.softmax_scale;

  if (o.splits < 0) throw UsageError("--splits " + std::to_string(o.splits) + ": must be 0 (automatic) or a count");
  if (o.splits > 0 && c.tuning.family != Family::decode)
    throw UsageError("--splits: only decode kernels split the keys (the config resolves to the " +
                     std::string(to_string(c.tuning.family.value_or(Family::automatic))) + " family)");
  s.num_splits = o.splits;
  const bool paged = c.kv_layout.paged;
  if (!paged && (o.ordered_pages || !o.page_table.empty() || o.num_pages))
    throw UsageError("--ordered-pages/--page-table/--num-pages describe a paged cache: the config's kv_layout is "
                     "contiguous (set kv_layout.paged, or --page-size)");
  s.shuffle_pages = !o.ordered_pages;
  if (!o.page_table.empty()) s.page_table = read_page_table(o.page_table, s.batch);
  if (o.num_pages < 0) throw UsageError("--num-pages " + std::to_string(o.num_pages) + ": must not be negative");
  s.num_pages = o.num_pages;
  return s;
}

std::vector<int> read_page_table(const std::string& file, int batch) {
  const NpyArray a = read_npy(file);
  if (a.descr != "<i4")
    throw UsageError(file + ": a page table holds int32 ('<i4'), not '" + a.descr + "'");
  if (a.shape.size() != 2 || a.shape[0] != batch)
    throw UsageError(file + ": a page table is [batch, max_pages] = [" + std::to_string(batch) +
                     ", N]; this one is " + a.shape_string());
  std::vector<int> t(static_cast<size_t>(a.elements()));
  std::memcpy(t.data(), a.data.data(), t.size() * 4);
  return t;
}

Config with_page_size(Config c, int page_size) {
  if (page_size < 0) return c;
  const bool shared_kv = c.kv_layout.shared_kv;  // what the cache holds, not how it is paged
  c.kv_layout = page_size == 0 ? KvLayout{} : KvLayout{true, page_size};
  c.kv_layout.shared_kv = shared_kv;
  return c;
}

nlohmann::json shape_json(const ProblemShape& s) {
  nlohmann::json j = {{"batch", s.batch},
                      {"seqlen_q", s.seqlen_q},
                      {"seqlen_k", s.seqlen_k},
                      {"heads_q", s.heads_q},
                      {"heads_k", s.heads_k},
                      {"layout", s.layout == Layout::bhsd ? "bhsd" : "bshd"}};
  if (!s.seqlens_q.empty()) {
    j["seqlens_q"] = s.seqlens_q;
    j["seqlens_k"] = s.seqlens_k;
  }
  if (s.window_left >= 0 || s.window_right >= 0) j["window"] = {s.window_left, s.window_right};
  if (s.softmax_scale > 0) j["softmax_scale"] = s.softmax_scale;
  if (!s.cache_lens.empty()) j["cache_lens"] = s.cache_lens;
  if (s.num_splits > 0) j["splits"] = s.num_splits;
  return j;
}

void add_shape_options(CLI::App& app, ShapeOptions& s) {
  const char* g = "Problem shape";
  app.add_option("-b,--batch", s.batch, "Batch size")->capture_default_str()->group(g);
  app.add_option("--seqlen-q", s.seqlen_q, "Query rows per sequence")->capture_default_str()->group(g);
  app.add_option("--seqlen-k", s.seqlen_k, "Key rows per sequence (default: --seqlen-q)")->group(g);
  app.add_option("--heads", s.heads, "Query heads")->capture_default_str()->group(g);
  app.add_option("--kv-heads", s.kv_heads, "KV heads (default: --heads / the config's group)")->group(g);
  app.add_option("--seqlens-q", s.seqlens_q, "Ragged batch (varlen configs): query rows per sequence")
      ->type_name("N,N,...")->group(g);
  app.add_option("--seqlens-k", s.seqlens_k, "Ragged batch: key rows per sequence (default: --seqlens-q)")
      ->type_name("N,N,...")->group(g);
  app.add_option("--layout", s.layout, "Memory layout of Q, K, V, O (ragged batches are packed [total, H, D])")
      ->check(CLI::IsMember({"bshd", "bhsd"}))->capture_default_str()->group(g);
  app.add_option("--window", s.window, "Sliding window L,R (keys i-L .. i+R; -1 unbounded)")
      ->type_name("L,R")->group(g);
  app.add_option("--softmax-scale", s.softmax_scale, "Softmax scale (default 1/sqrt(head_dim.qk))")->group(g);
  const char* kv = "KV cache";
  app.add_option("--cache-lens", s.cache_lens, "Keys per sequence, one per batch entry (sets --batch; the longest "
                                                "is --seqlen-k's default)")
      ->type_name("N,N,...")->group(kv);
  app.add_option("--page-size", s.page_size, "Page size of a paged cache (overrides the config's paging, keeping kv_layout.shared_kv; 0: contiguous)")
      ->group(kv);
  app.add_flag("--ordered-pages", s.ordered_pages, "Hand out pages in order (default: a random page table)")->group(kv);
  app.add_option("--page-table", s.page_table, "Page table from an int32 .npy [batch, max_pages]")
      ->type_name("FILE")->group(kv);
  app.add_option("--num-pages", s.num_pages, "Pages in the cache with --page-table (default: its largest entry + 1)")
      ->group(kv);
  app.add_option("--splits", s.splits, "Decode kernels: CTAs per sequence's keys (default: chosen from the shape)")
      ->group(kv);
}

}  // namespace flashjit::cli
