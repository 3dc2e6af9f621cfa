#include "cli/shape.hpp"

#include "cli/errors.hpp"
#include "cli/format.hpp"
#include "cli/register.hpp"

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
      throw UsageError(flag + " " + text + ": expected comma-separated integers (e.g. 3,100,7)");
    out.push_back(v);
  }
  return out;
}

ProblemShape make_shape(const ShapeOptions& o, const Config& c) {
  ProblemShape s;
  if (o.batch < 1) throw UsageError("--batch " + std::to_string(o.batch) + ": must be at least 1");
  if (o.seqlen_q < 0) throw UsageError("--seqlen-q " + std::to_string(o.seqlen_q) + ": must not be negative");
  if (o.seqlen_k < -1) throw UsageError("--seqlen-k " + std::to_string(o.seqlen_k) + ": must not be negative");
  s.batch = o.batch;
  s.seqlen_q = o.seqlen_q;
  s.seqlen_k = o.seqlen_k < 0 ? o.seqlen_q : o.seqlen_k;

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
  if (c.varlen) {
    long long tq = 0, tk = 0;
    for (int v : s.seqlens_q) tq += v;
    for (int v : s.seqlens_k) tk += v;
    if (tq < 1 || tk < 1) throw UsageError("a ragged batch needs at least one query row and one key row");
  }

  if (o.heads < 1) throw UsageError("--heads " + std::to_string(o.heads) + ": must be at least 1");
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
  if (!(o.softmax_scale >= 0.f))
    throw UsageError("--softmax-scale: must be positive (0 selects 1/sqrt(head_dim.qk))");
  s.softmax_scale = o.softmax_scale;
  return s;
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
}

}  // namespace flashjit::cli
