#include "runtime/harness.hpp"

#include "runtime/driver.hpp"
#include "generator/element_types.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>

namespace flashjit {

namespace {

// splitmix64: fast, seedable, good enough for test data.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }
  // Approximately N(0, 1): a sum of four uniforms, rescaled.
  float normal() { return (uniform() + uniform() + uniform() + uniform() - 2.f) * 1.7320508f; }
};

// f(r) for r in [0, rows), over the host's cores: each r writes only its own rows.
template <class F>
void for_rows(int rows, const F& f) {
  const int threads = std::clamp(int(std::thread::hardware_concurrency()), 1, 32);
  if (threads == 1 || rows < 4096) {
    for (int r = 0; r < rows; ++r) f(r);
    return;
  }
  std::vector<std::thread> pool;
  const int chunk = (rows + threads - 1) / threads;
  for (int first = 0; first < rows; first += chunk)
    pool.emplace_back([&f, first, last = std::min(rows, first + chunk)] {
      for (int r = first; r < last; ++r) f(r);
    });
  for (std::thread& t : pool) t.join();
}

}  // namespace

std::string ProblemShape::describe() const {
  std::ostringstream s;
  s << "B=" << batch << " Hq=" << heads_q << " Hk=" << heads_k;
  if (!seqlens_q.empty()) {
    s << " ragged q=[";
    for (size_t i = 0; i < seqlens_q.size(); ++i) s << (i ? "," : "") << seqlens_q[i];
    s << "] k=[";
    for (size_t i = 0; i < seqlens_k.size(); ++i) s << (i ? "," : "") << seqlens_k[i];
    s << "]";
  } else {
    s << " Sq=" << seqlen_q << " Sk=" << seqlen_k << (layout == Layout::bhsd ? " bhsd" : " bshd");
  }
  if (window_left >= 0 || window_right >= 0) s << " window=(" << window_left << "," << window_right << ")";
  if (!cache_lens.empty()) {
    s << " cache=[";
    for (size_t i = 0; i < cache_lens.size() && i < 8; ++i) s << (i ? "," : "") << cache_lens[i];
    s << (cache_lens.size() > 8 ? ",...]" : "]");
  }
  if (num_splits > 0) s << " splits=" << num_splits;
  return s.str();
}

int ProblemShape::keys_of(const Config& c, int b) const {
  if (c.varlen) return seqlens_k[b];
  return cache_lens.empty() ? seqlen_k : cache_lens[b];
}

struct DeviceProblem::Buffer {
  CUdeviceptr ptr = 0;
};

CUdeviceptr DeviceProblem::alloc(size_t bytes) {
  CUdeviceptr p = 0;
  FLASHJIT_CU(driver().cuMemAlloc(&p, std::max<size_t>(bytes, 256)));
  buffers_.push_back(new Buffer{p});
  return p;
}

DeviceProblem::DeviceProblem(const Config& config, const ProblemShape& shape, uint64_t seed)
    : config_(config), shape_(shape) {
  const bool paged = config.kv_layout.paged;
  if (config.varlen) {
    if (shape.seqlens_q.size() != size_t(shape.batch) || shape.seqlens_k.size() != size_t(shape.batch))
      throw ArgumentError("ragged problem: seqlens_q/seqlens_k need one length per batch entry");
    for (int b = 0; b < shape.batch; ++b) rows_q_ += shape.seqlens_q[b];
    shape_.seqlen_q = *std::max_element(shape.seqlens_q.begin(), shape.seqlens_q.end());
    shape_.seqlen_k = *std::max_element(shape.seqlens_k.begin(), shape.seqlens_k.end());
  } else {
    rows_q_ = shape.batch * shape.seqlen_q;
  }
  if (!shape.cache_lens.empty()) {
    if (config.varlen) throw ArgumentError("ragged problem: the key lengths are seqlens_k, not cache_lens");
    if (shape.cache_lens.size() != size_t(shape.batch))
      throw ArgumentError("cache_lens needs one length per batch entry");
    for (int len : shape.cache_lens)
      if (len < 0 || len > shape.seqlen_k)
        throw ArgumentError("cache length " + std::to_string(len) + " is outside [0, seqlen_k = " +
                            std::to_string(shape.seqlen_k) + "]");
  }
  for (int b = 0, r = 0; b < shape.batch; ++b) {
    query_start_.push_back(r);
    r += config.varlen ? shape.seqlens_q[b] : shape.seqlen_q;
  }
  // Host key rows: entry after entry, each its own keys (paged, ragged) or seqlen_k of them.
  for (int b = 0; b < shape.batch; ++b) {
    key_start_.push_back(rows_k_);
    rows_k_ += paged || config.varlen ? shape_.keys_of(config, b) : shape_.seqlen_k;
  }
  device_rows_k_ = rows_k_;
  if (paged) {
    plan_pages(seed);
    device_rows_k_ = num_pages_ * config.kv_layout.page_size;
  }

  const HeadDims& h = config.head_dim;
  const size_t e = dtype_bytes(config.dtype.qkv), er = dtype_bytes(config.dtype.rope.value_or(config.dtype.qkv));
  q_ = alloc(size_t(rows_q_) * shape.heads_q * h.nope() * dtype_bytes(config.dtype.q.value_or(config.dtype.qkv)));
  k_ = alloc(size_t(device_rows_k_) * shape.heads_k * h.nope() * e);
  if (!shared_kv()) v_ = alloc(size_t(device_rows_k_) * shape.heads_k * h.v * e);
  if (h.rope) {
    q_rope_ = alloc(size_t(rows_q_) * shape.heads_q * h.rope * er);
    k_rope_ = alloc(size_t(device_rows_k_) * shape.heads_k * h.rope * er);
  }
  o_ = alloc(size_t(rows_q_) * shape.heads_q * h.v * dtype_bytes(config.dtype.out));
  o_ref_ = alloc(size_t(rows_q_) * shape.heads_q * h.v * 4);
  lse_ = alloc(size_t(rows_q_) * shape.heads_q * 4);
  lse_ref_ = alloc(size_t(rows_q_) * shape.heads_q * 4);
  if (config.varlen) {
    std::vector<int> cq(shape.batch + 1, 0), ck(shape.batch + 1, 0);
    for (int b = 0; b < shape.batch; ++b) {
      cq[b + 1] = cq[b] + shape.seqlens_q[b];
      ck[b + 1] = ck[b] + shape.seqlens_k[b];
    }
    cu_q_ = alloc(cq.size() * 4);
    FLASHJIT_CU(driver().cuMemcpyHtoD(cu_q_, cq.data(), cq.size() * 4));
    if (!paged) {
      cu_k_ = alloc(ck.size() * 4);
      FLASHJIT_CU(driver().cuMemcpyHtoD(cu_k_, ck.data(), ck.size() * 4));
    }
  }
  if (paged || !shape.cache_lens.empty()) {
    std::vector<int> used(shape.batch);
    for (int b = 0; b < shape.batch; ++b) used[b] = shape_.keys_of(config, b);
    seqused_ = alloc(used.size() * 4);
    FLASHJIT_CU(driver().cuMemcpyHtoD(seqused_, used.data(), used.size() * 4));
  }
  if (paged) {
    pages_ = alloc(page_table_.size() * 4);
    FLASHJIT_CU(driver().cuMemcpyHtoD(pages_, page_table_.data(), page_table_.size() * 4));
  }
  upload_inputs(seed);
}

// Every entry gets the pages its keys need, plus one page nobody uses; in a random order unless
// shuffle_pages is off. Table entries past an entry's keys are -1: a kernel must never read them.
void DeviceProblem::plan_pages(uint64_t seed) {
  const int page = config_.kv_layout.page_size;
  std::vector<int> need(shape_.batch);
  for (int b = 0; b < shape_.batch; ++b) need[b] = (shape_.keys_of(config_, b) + page - 1) / page;
  if (!shape_.page_table.empty()) {
    use_page_table(need);
    return;
  }
  for (int b = 0; b < shape_.batch; ++b) num_pages_ += need[b];
  num_pages_ += 1;
  max_pages_ = std::max(1, (shape_.seqlen_k + page - 1) / page);
  std::vector<int> order(num_pages_);
  for (int i = 0; i < num_pages_; ++i) order[i] = i;
  if (shape_.shuffle_pages) {
    Rng rng{seed * 0x9e3779b97f4a7c15ull + 7};
    for (int i = num_pages_ - 1; i > 0; --i) std::swap(order[i], order[rng.next() % uint64_t(i + 1)]);
  }
  page_table_.assign(size_t(shape_.batch) * max_pages_, -1);
  int next = 0;
  for (int b = 0; b < shape_.batch; ++b)
    for (int i = 0; i < need[b]; ++i) page_table_[size_t(b) * max_pages_ + i] = order[next++];
}

DeviceProblem::~DeviceProblem() {
  for (Buffer* b : buffers_) {
    if (gpu_available()) driver().cuMemFree(b->ptr);
    delete b;
  }
}

void DeviceProblem::refill(uint64_t seed) { upload_inputs(seed); }

// Device tensors are stored [B, S, H, D] / [B, H, S, D] / packed [total, H, D] / paged
// [pages, page_size, H, D]; host copies are [rows][heads][dim] with rows = b * S + s (or the
// packed row; paged keys: entry after entry).
size_t DeviceProblem::device_index(bool is_q, int r, int heads, int dim, int h, int d) const {
  if (!is_q && config_.kv_layout.paged) {
    const int b = int(std::upper_bound(key_start_.begin(), key_start_.end(), r) - key_start_.begin()) - 1;
    const int j = r - key_start_[b], page = config_.kv_layout.page_size;
    const int slot = page_table_[size_t(b) * max_pages_ + j / page];
    return ((size_t(slot) * page + j % page) * heads + h) * dim + d;
  }
  if (!config_.varlen && shape_.layout == Layout::bhsd) {
    const int seqlen = is_q ? shape_.seqlen_q : shape_.seqlen_k;
    const int b = r / seqlen, s = r % seqlen;
    return ((size_t(b) * heads + h) * seqlen + s) * dim + d;
  }
  return (size_t(r) * heads + h) * dim + d;
}

std::pair<int, int> DeviceProblem::row_position(bool is_q, int r) const {
  const std::vector<int>& starts = is_q ? query_start_ : key_start_;
  const int b = int(std::upper_bound(starts.begin(), starts.end(), r) - starts.begin()) - 1;
  return {b, r - starts[b]};
}

// The scale of every (row, head) of a quantised tensor: amax over its group (the whole tensor,
// a head, a row of a head) over the largest finite value of the input type (4 for 16-bit inputs,
// which need no quantising but may be given scales), rounded to dtype.scale; `values` becomes
// the stored values over their scale. Returns one scale per (row, head).
std::vector<float> DeviceProblem::quantise(char which, std::vector<float>& values, int rows, int heads,
                                           int dim) const {
  const ScaleGranularity g = granularity(which);
  const ElementType& type = element_type(config_.dtype.qkv);
  const double target = is_float8(config_.dtype.qkv) ? type.max_finite : 4.0;
  const ElementType& stored = element_type(g == ScaleGranularity::per_token ? config_.dtype.scale.value_or(DType::fp32)
                                                                          : DType::fp32);
  const int blocks = scale_blocks(which), block_cols = dim / blocks;  // per-block K scales
  auto group_of = [&](int r, int h, int d) -> size_t {
    return g == ScaleGranularity::per_tensor ? 0
           : g == ScaleGranularity::per_head ? size_t(h)
                                             : (size_t(r) * heads + h) * blocks + d / block_cols;
  };
  const size_t groups = g == ScaleGranularity::per_tensor ? 1
                        : g == ScaleGranularity::per_head ? heads
                                                          : size_t(rows) * heads * blocks;
  std::vector<float> amax(groups, 0.f);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < dim; ++d) {
        float& m = amax[group_of(r, h, d)];
        m = std::max(m, std::fabs(values[(size_t(r) * heads + h) * dim + d]));
      }
  std::vector<float> scale(groups);
  for (size_t i = 0; i < groups; ++i) {
    const float raw = amax[i] > 0 ? float(amax[i] / target) : 1.f;
    scale[i] = stored.decode(stored.encode(raw));
  }
  std::vector<float> per_row(size_t(rows) * heads * blocks);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < dim; ++d) {
        const float sc = scale[group_of(r, h, d)];
        per_row[(size_t(r) * heads + h) * blocks + d / block_cols] = sc;
        values[(size_t(r) * heads + h) * dim + d] /= sc;
      }
  return per_row;
}

int DeviceProblem::scale_blocks(char which) const { return which == 'k' ? config_.k_scale_blocks() : 1; }

ScaleGranularity DeviceProblem::granularity(char which) const {
  return which == 'q' ? config_.scales.q : which == 'k' ? config_.scales.k : which == 'v' ? config_.scales.v
                                                                                          : ScaleGranularity::none;
}

// Per-token scales are laid out [batch, heads, seqlen], or [heads, total] where the rows are
// packed (ragged queries, contiguous ragged keys); the others are fp32 [1] or [heads].
bool DeviceProblem::packed_scales(char which) const {
  return config_.varlen && (which == 'q' || !config_.kv_layout.paged);
}

std::vector<int64_t> DeviceProblem::scale_shape(char which) const {
  const ScaleGranularity g = granularity(which);
  const bool is_q = which == 'q';
  const int64_t heads = is_q ? shape_.heads_q : shape_.heads_k;
  switch (g) {
    case ScaleGranularity::none: return {};
    case ScaleGranularity::per_tensor: return {1};
    case ScaleGranularity::per_head: return {heads};
    case ScaleGranularity::per_token: break;
  }
  if (!is_q && config_.scales.token_layout == ScaleLayout::cache) {  // like the cache's rows
    std::vector<int64_t> shape = config_.kv_layout.paged ? std::vector<int64_t>{num_pages_, config_.kv_layout.page_size, heads}
                                 : config_.varlen        ? std::vector<int64_t>{rows_k_, heads}
                                                         : std::vector<int64_t>{shape_.batch, shape_.seqlen_k, heads};
    if (scale_blocks(which) > 1) shape.push_back(scale_blocks(which));  // per-block K scales
    return shape;
  }
  if (packed_scales(which)) return {heads, is_q ? rows_q_ : rows_k_};
  return {shape_.batch, heads, is_q ? shape_.seqlen_q : shape_.seqlen_k};
}

void DeviceProblem::set_scales(char which, const std::vector<float>& values) {
  const std::vector<int64_t> shape = scale_shape(which);
  if (shape.empty()) throw ArgumentError(std::string("scales of ") + which + ": the config does not scale it");
  size_t n = 1;
  for (int64_t v : shape) n *= size_t(v);
  if (values.size() != n)
    throw ArgumentError(std::string("scales of ") + which + ": " + std::to_string(values.size()) +
                        " values; the scale tensor holds " + std::to_string(n));
  const bool token = granularity(which) == ScaleGranularity::per_token;
  const ElementType& t = element_type(token ? config_.dtype.scale.value_or(DType::fp32) : DType::fp32);
  std::vector<unsigned char> dev(std::max<size_t>(n, 1) * t.bytes, 0);
  for (size_t i = 0; i < n; ++i) store_element(t, values[i], dev.data() + i * t.bytes);
  CUdeviceptr& dst = which == 'q' ? q_scale_ : which == 'k' ? k_scale_ : v_scale_;
  if (!dst) dst = alloc(dev.size());
  FLASHJIT_CU(driver().cuMemcpyHtoD(dst, dev.data(), dev.size()));
}

// The device scale tensor of one quantised input from the scale of each (row, head).
void DeviceProblem::upload_scales(char which, const std::vector<float>& per_row) {
  const bool is_q = which == 'q';
  const int heads = is_q ? shape_.heads_q : shape_.heads_k;
  const int rows = is_q ? rows_q_ : rows_k_;
  const std::vector<int64_t> shape = scale_shape(which);
  size_t n = 1;
  for (int64_t v : shape) n *= size_t(v);
  std::vector<float> values(n, 0.f);
  if (granularity(which) == ScaleGranularity::per_token && !is_q && config_.scales.token_layout == ScaleLayout::cache) {
    // At each key row's place in the cache's layout: [pages, page_size, heads] (a one-column
    // tensor of the paged cache), [batch, seqlen_k, heads], or ragged [total_k, heads]; per-block
    // scales a last dimension of the row's blocks.
    const int blocks = scale_blocks(which);
    for (int r = 0; r < rows; ++r) {
      const auto [b, pos] = row_position(false, r);
      for (int h = 0; h < heads; ++h) {
        const size_t i = config_.kv_layout.paged ? device_index(false, r, heads, 1, h, 0)
                         : config_.varlen        ? size_t(r) * heads + h
                                                 : (size_t(b) * shape_.seqlen_k + pos) * heads + h;
        for (int g = 0; g < blocks; ++g) values[i * blocks + g] = per_row[(size_t(r) * heads + h) * blocks + g];
      }
    }
  } else if (granularity(which) == ScaleGranularity::per_token) {
    const bool packed = packed_scales(which);
    const int per_seq = is_q ? shape_.seqlen_q : shape_.seqlen_k;
    for (int r = 0; r < rows; ++r) {
      const auto [b, pos] = row_position(is_q, r);
      for (int h = 0; h < heads; ++h) {
        const size_t i = packed ? size_t(h) * rows + r : (size_t(b) * heads + h) * per_seq + pos;
        values[i] = per_row[size_t(r) * heads + h];
      }
    }
  } else {
    const bool tensor = granularity(which) == ScaleGranularity::per_tensor;
    for (size_t i = 0; i < n; ++i) values[i] = rows > 0 ? per_row[tensor ? 0 : i] : 1.f;
  }
  set_scales(which, values);
}

// One input tensor (or its rope part) from host-order values [rows][heads][dim]: quantised
// when the config scales it (`which` 'q', 'k', 'v'; 0 for a rope part), stored in `type` at
// the tensor's device positions, and its dequantised values copied into columns
// [host_offset, host_offset + dim) of the host copy. Returns the scales (empty: unscaled).
std::vector<float> DeviceProblem::write_input(const TensorSlot& t, std::vector<float> values) {
  std::vector<float> scale;
  if (granularity(t.which) != ScaleGranularity::none) scale = quantise(t.which, values, t.rows, t.heads, t.dim);
  // Device rows no host row maps to (unused pages) hold NaN, so reading one shows.
  const int device_rows = t.is_q ? rows_q_ : device_rows_k_;
  std::vector<unsigned char> dev(size_t(device_rows) * t.heads * t.dim * t.type->bytes, 0xff);
  const int blocks = scale_blocks(t.which), block_cols = t.dim / blocks;
  // A (row, head)'s dim values are contiguous on the device (device_index is its d = 0 index
  // plus d), so each row is placed once; rows go to threads (a 64 x 16k latent cache has 600 M
  // values).
  for_rows(t.rows, [&](int r) {
    for (int hh = 0; hh < t.heads; ++hh) {
      const size_t row_head = size_t(r) * t.heads + hh;
      unsigned char* slots = dev.data() + device_index(t.is_q, r, t.heads, t.dim, hh, 0) * t.type->bytes;
      const float* in = values.data() + row_head * t.dim;
      float* host = t.host->data() + row_head * t.host_dim + t.host_offset;
      for (int d = 0; d < t.dim; ++d) {
        unsigned char* slot = slots + size_t(d) * t.type->bytes;
        store_element(*t.type, in[d], slot);
        const float sc = scale.empty() ? 1.f : scale[row_head * blocks + d / block_cols];
        host[d] = load_element(*t.type, slot) * sc;
      }
    }
  });
  FLASHJIT_CU(driver().cuMemcpyHtoD(t.dst, dev.data(), dev.size()));
  if (!scale.empty()) upload_scales(t.which, scale);
  return scale;
}

// The nope part (or the whole head) and the rope part of input `which`.
std::pair<DeviceProblem::TensorSlot, DeviceProblem::TensorSlot> DeviceProblem::slots(char which) {
  const HeadDims& h = config_.head_dim;
  const ElementType& in = element_type(config_.dtype.qkv);
  const ElementType& q_type = element_type(config_.dtype.q.value_or(config_.dtype.qkv));
  const ElementType& rope = element_type(config_.dtype.rope.value_or(config_.dtype.qkv));
  if (which == 'q')
    return {{q_, &q_type, rows_q_, shape_.heads_q, h.nope(), h.qk, 0, &hq_, true, 'q'},
            {q_rope_, &rope, rows_q_, shape_.heads_q, h.rope, h.qk, h.nope(), &hq_, true, 0}};
  if (which == 'k')
    return {{k_, &in, rows_k_, shape_.heads_k, h.nope(), h.qk, 0, &hk_, false, 'k'},
            {k_rope_, &rope, rows_k_, shape_.heads_k, h.rope, h.qk, h.nope(), &hk_, false, 0}};
  return {{v_, &in, rows_k_, shape_.heads_k, h.v, h.v, 0, &hv_, false, 'v'}, {}};
}

void DeviceProblem::upload_inputs(uint64_t seed) {
  Rng rng{seed * 0x2545f4914f6cdd1dull + 1};
  const HeadDims& h = config_.head_dim;
  hq_.assign(size_t(rows_q_) * shape_.heads_q * h.qk, 0.f);
  hk_.assign(size_t(rows_k_) * shape_.heads_k * h.qk, 0.f);
  hv_.assign(size_t(rows_k_) * shape_.heads_k * h.v, 0.f);
  auto random = [&](const TensorSlot& t) {
    std::vector<float> values(size_t(t.rows) * t.heads * t.dim);
    for (float& x : values) x = rng.normal();
    return values;
  };
  for (char which : {'q', 'k', 'v'}) {
    if (which == 'v' && shared_kv()) continue;
    const TensorSlot t = slots(which).first;
    write_input(t, random(t));
  }
  if (h.rope)
    for (char which : {'q', 'k'}) {
      const TensorSlot t = slots(which).second;
      write_input(t, random(t));
    }
  share_v();
}

bool DeviceProblem::shared_kv() const { return config_.kv_layout.shared_kv; }

// A shared K/V cache's V: the first head_dim.v columns of each K row (host copy; the kernels
// read them from k).
void DeviceProblem::share_v() {
  if (!shared_kv()) return;
  const HeadDims& h = config_.head_dim;
  const size_t rows = size_t(rows_k_) * shape_.heads_k;
  for (size_t r = 0; r < rows; ++r) std::copy_n(hk_.begin() + r * h.qk, h.v, hv_.begin() + r * h.v);
}

std::vector<float> DeviceProblem::set_input(char which, const std::vector<float>& values) {
  if (which == 'v' && shared_kv())
    throw ArgumentError("input v: the config has kv_layout.shared_kv = true, so V is the first head_dim.v columns of k");
  std::vector<float> used = set_split_input(which, values);
  if (which == 'k') share_v();
  return used;
}

std::vector<float> DeviceProblem::set_split_input(char which, const std::vector<float>& values) {
  const auto [main, rope] = slots(which);
  const size_t rows = size_t(main.rows) * main.heads, full = main.host_dim;
  if (values.size() != rows * full)
    throw ArgumentError(std::string("input ") + which + ": " + std::to_string(values.size()) + " values; the problem needs " +
                        std::to_string(rows * full));
  if (rope.dim == 0) return write_input(main, values);
  std::vector<float> nope(rows * main.dim), tail(rows * rope.dim);
  for (size_t r = 0; r < rows; ++r) {
    std::copy_n(values.begin() + r * full, main.dim, nope.begin() + r * main.dim);
    std::copy_n(values.begin() + r * full + main.dim, rope.dim, tail.begin() + r * rope.dim);
  }
  write_input(rope, std::move(tail));
  return write_input(main, std::move(nope));
}

size_t DeviceProblem::input_index(char which, int r, int h, int d) const {
  const bool is_q = which == 'q';
  const int heads = is_q ? shape_.heads_q : shape_.heads_k;
  const int dim = which == 'v' ? config_.head_dim.v : config_.head_dim.qk;
  return device_index(is_q, r, heads, dim, h, d);
}

// A given page table: one row per entry, covering each entry's keys with distinct pages.
void DeviceProblem::use_page_table(const std::vector<int>& need) {
  const std::vector<int>& t = shape_.page_table;
  if (t.size() % size_t(shape_.batch))
    throw ArgumentError("page table of " + std::to_string(t.size()) + " entries: not " + std::to_string(shape_.batch) +
                        " rows (one per sequence)");
  max_pages_ = int(t.size() / size_t(shape_.batch));
  int largest = -1;
  for (int b = 0; b < shape_.batch; ++b) {
    if (need[b] > max_pages_)
      throw ArgumentError("page table row " + std::to_string(b) + " has " + std::to_string(max_pages_) +
                          " entries; its " + std::to_string(shape_.keys_of(config_, b)) + " keys need " +
                          std::to_string(need[b]));
    for (int i = 0; i < need[b]; ++i) largest = std::max(largest, t[size_t(b) * max_pages_ + i]);
  }
  num_pages_ = shape_.num_pages > 0 ? shape_.num_pages : std::max(1, largest + 1);
  std::vector<char> used(num_pages_, 0);
  for (int b = 0; b < shape_.batch; ++b)
    for (int i = 0; i < need[b]; ++i) {
      const int pg = t[size_t(b) * max_pages_ + i];
      if (pg < 0 || pg >= num_pages_)
        throw ArgumentError("page table row " + std::to_string(b) + " entry " + std::to_string(i) + " = " +
                            std::to_string(pg) + ": not a page of the " + std::to_string(num_pages_) + "-page cache");
      if (used[pg]++)
        throw ArgumentError("page table: page " + std::to_string(pg) + " is used twice (row " + std::to_string(b) +
                            ", entry " + std::to_string(i) + ")");
    }
  page_table_ = t;
}

Tensor DeviceProblem::tensor(CUdeviceptr p, bool is_q, int dim) const {
  const void* ptr = reinterpret_cast<const void*>(p);
  const int heads = is_q ? shape_.heads_q : shape_.heads_k;
  if (!is_q && config_.kv_layout.paged) return Tensor::paged(ptr, config_.kv_layout.page_size, heads, dim);
  if (config_.varlen) return Tensor::packed(ptr, heads, dim);
  const int seqlen = is_q ? shape_.seqlen_q : shape_.seqlen_k;
  return shape_.layout == Layout::bhsd ? Tensor::bhsd(ptr, seqlen, heads, dim)
                                       : Tensor::bshd(ptr, seqlen, heads, dim);
}

AttentionArgs DeviceProblem::args() const {
  const HeadDims& h = config_.head_dim;
  AttentionArgs a;
  a.q = tensor(q_, true, h.nope());
  a.k = tensor(k_, false, h.nope());
  if (!shared_kv()) a.v = tensor(v_, false, h.v);  // shared K/V: V is read from k
  a.o = tensor(o_, true, h.v);
  if (h.rope) {
    a.q_rope = tensor(q_rope_, true, h.rope);
    a.k_rope = tensor(k_rope_, false, h.rope);
  }
  if (config_.lse) a.lse = reinterpret_cast<float*>(lse_);
  shape_.apply_to(a);
  if (config_.varlen) {
    a.cu_seqlens_q = reinterpret_cast<const int*>(cu_q_);
    a.cu_seqlens_k = reinterpret_cast<const int*>(cu_k_);
    a.total_q = rows_q_;
    a.total_k = rows_k_;
  }
  a.seqused_k = reinterpret_cast<const int*>(seqused_);
  if (config_.kv_layout.paged) {
    a.page_table = reinterpret_cast<const int*>(pages_);
    a.num_pages = num_pages_;
    a.max_pages = max_pages_;
  }
  if (config_.tuning.family == Family::decode) a.num_splits = shape_.num_splits;
  a.q_scale.data = reinterpret_cast<const void*>(q_scale_);
  a.k_scale.data = reinterpret_cast<const void*>(k_scale_);
  a.v_scale.data = reinterpret_cast<const void*>(v_scale_);
  return a;
}

int ProblemShape::max_seqlen_k() const {
  if (seqlens_k.empty()) return seqlen_k;
  return *std::max_element(seqlens_k.begin(), seqlens_k.end());
}

void ProblemShape::apply_to(AttentionArgs& a) const {
  a.batch = batch;
  a.seqlen_q = seqlen_q;
  a.seqlen_k = seqlen_k;
  a.heads_q = heads_q;
  a.heads_k = heads_k;
  a.window_left = window_left;
  a.window_right = window_right;
  a.softmax_scale = softmax_scale;
}

AttentionArgs DeviceProblem::reference_args() const {
  AttentionArgs a = args();
  a.o = tensor(o_ref_, true, config_.head_dim.v);
  a.lse = reinterpret_cast<float*>(lse_ref_);
  a.num_splits = 0;  // the reference does not split
  return a;
}

void DeviceProblem::poison_outputs(CUstream stream) const {
  // All-ones bytes are NaN in every output dtype; sizes are whole 4-byte words (head dims are
  // multiples of 16). On `stream`, so the poison lands before that stream's next launch.
  const DriverApi& d = driver();
  const size_t o_bytes = size_t(rows_q_) * shape_.heads_q * config_.head_dim.v * dtype_bytes(config_.dtype.out);
  FLASHJIT_CU(d.cuMemsetD32Async(o_, 0xffffffffu, o_bytes / 4, stream));
  FLASHJIT_CU(d.cuMemsetD32Async(lse_, 0xffffffffu, size_t(rows_q_) * shape_.heads_q, stream));
}

size_t DeviceProblem::output_elements() const {
  return size_t(rows_q_) * shape_.heads_q * config_.head_dim.v;
}

std::vector<float> DeviceProblem::output() const {
  const ElementType& type = element_type(config_.dtype.out);
  std::vector<unsigned char> raw(output_elements() * type.bytes);
  FLASHJIT_CU(driver().cuMemcpyDtoH(raw.data(), o_, raw.size()));
  std::vector<float> out(output_elements());
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_element(type, raw.data() + i * type.bytes);
  return out;
}

std::vector<float> DeviceProblem::reference_output() const {
  std::vector<float> out(output_elements());
  FLASHJIT_CU(driver().cuMemcpyDtoH(out.data(), o_ref_, out.size() * 4));
  return out;
}

std::vector<float> DeviceProblem::lse() const {
  std::vector<float> out(size_t(rows_q_) * shape_.heads_q);
  FLASHJIT_CU(driver().cuMemcpyDtoH(out.data(), lse_, out.size() * 4));
  return out;
}

std::vector<float> DeviceProblem::reference_lse() const {
  std::vector<float> out(size_t(rows_q_) * shape_.heads_q);
  FLASHJIT_CU(driver().cuMemcpyDtoH(out.data(), lse_ref_, out.size() * 4));
  return out;
}

double tolerance_for(DType qkv) { return element_type(qkv).tolerance; }

std::string CheckResult::summary() const {
  std::ostringstream s;
  s << (passed ? "PASS" : "FAIL") << " rel_error=" << rel_error << " (tolerance " << tolerance
    << ") max_abs=" << max_abs_error << " lse_max_error=" << lse_max_error
    << " nonfinite=" << nonfinite;
  return s.str();
}

CheckResult check_against_reference(const Kernel& kernel, const Config& config,
                                    DeviceProblem& problem, CUstream stream) {
  auto reference = get_reference_kernel(config);
  problem.poison_outputs(stream);
  reference->launch(problem.reference_args(), stream);
  kernel.launch(problem.args(), stream);
  FLASHJIT_CU(driver().cuStreamSynchronize(stream));
  return compare_with_reference(config, problem);
}

CheckResult compare_with_reference(const Config& config, const DeviceProblem& problem) {
  CheckResult r;
  r.tolerance = tolerance_for(config.dtype.qkv);
  const auto out = problem.output();
  const auto ref = problem.reference_output();
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++r.nonfinite;
      continue;
    }
    const double d = double(out[i]) - double(ref[i]);
    diff2 += d * d;
    ref2 += double(ref[i]) * double(ref[i]);
    r.max_abs_error = std::max(r.max_abs_error, std::fabs(d));
  }
  r.rel_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (config.lse) {
    const auto l = problem.lse();
    const auto lr = problem.reference_lse();
    for (size_t i = 0; i < l.size(); ++i) {
      if (std::isnan(l[i])) {
        r.lse_max_error = std::numeric_limits<double>::infinity();
      } else if (std::isinf(lr[i]) || std::isinf(l[i])) {
        if (l[i] != lr[i]) r.lse_max_error = std::numeric_limits<double>::infinity();
      } else {
        r.lse_max_error = std::max(r.lse_max_error, std::fabs(double(l[i]) - double(lr[i])));
      }
    }
  }
  // The LSE bound follows the dtype's: 1e-2 for 16-bit inputs, half the output tolerance for
  // fp8 ones. A family that widens fp8 on load rounds each dequantised value (value x scale) to
  // its 16-bit compute type (bf16: 8 significant bits), which moves a logit of a few units by
  // about 1e-2 (an e4m3 case with per-head scales on the sm80 family: 1.1e-2, its output 3.4e-3).
  const double lse_bound = std::max(1e-2, r.tolerance / (is_float8(config.dtype.qkv) ? 2 : 3));
  r.passed = r.nonfinite == 0 && r.rel_error <= r.tolerance && r.lse_max_error <= lse_bound;
  return r;
}

void cpu_reference(const Config& c, const ProblemShape& shape, const std::vector<float>& q,
                   const std::vector<float>& k, const std::vector<float>& v,
                   std::vector<double>& o, std::vector<double>& lse) {
  const int dqk = c.head_dim.qk, dv = c.head_dim.v, hq = shape.heads_q, hk = shape.heads_k;
  const double scale = shape.softmax_scale > 0 ? shape.softmax_scale : 1.0 / std::sqrt(double(dqk));
  int rows_q = 0, rows_k = 0;
  std::vector<int> sq, sk, oq, ok;
  const bool packed_keys = c.varlen || c.kv_layout.paged;  // host key rows as DeviceProblem keeps them
  for (int b = 0; b < shape.batch; ++b) {
    int lq = c.varlen ? shape.seqlens_q[b] : shape.seqlen_q;
    int lk = shape.keys_of(c, b);
    oq.push_back(rows_q);
    ok.push_back(rows_k);
    sq.push_back(lq);
    sk.push_back(lk);
    rows_q += lq;
    rows_k += packed_keys ? lk : shape.seqlen_k;
  }
  const size_t rows_total = size_t(rows_q);
  o.assign(size_t(rows_q) * hq * dv, 0.0);
  lse.assign(size_t(rows_q) * hq, -std::numeric_limits<double>::infinity());
  for (int b = 0; b < shape.batch; ++b)
    for (int h = 0; h < hq; ++h) {
      const int kh = h / (hq / hk);
      for (int i = 0; i < sq[b]; ++i) {
        const int shift = sk[b] - sq[b];
        int lo = 0, hi = sk[b];
        if (c.mask == Mask::causal) hi = std::min(hi, i + shift + 1);
        if (c.mask == Mask::sliding_window) {
          if (shape.window_right >= 0) hi = std::min(hi, i + shift + shape.window_right + 1);
          if (shape.window_left >= 0) lo = std::max(0, i + shift - shape.window_left);
        }
        const size_t qrow = size_t(oq[b] + i);
        std::vector<double> s;
        double m = -std::numeric_limits<double>::infinity();
        for (int j = lo; j < hi; ++j) {
          double dot = 0;
          for (int d = 0; d < dqk; ++d)
            dot += double(q[(qrow * hq + h) * dqk + d]) * double(k[(size_t(ok[b] + j) * hk + kh) * dqk + d]);
          s.push_back(dot * scale);
          m = std::max(m, s.back());
        }
        if (s.empty()) continue;
        double l = 0;
        for (double& x : s) l += (x = std::exp(x - m));
        for (int d = 0; d < dv; ++d) {
          double acc = 0;
          for (int j = lo; j < hi; ++j) acc += s[j - lo] * double(v[(size_t(ok[b] + j) * hk + kh) * dv + d]);
          o[(qrow * hq + h) * dv + d] = acc / l;
        }
        // The device's default LSE layout: [b][h][s], ragged [h][total_q].
        const size_t li = c.varlen ? size_t(h) * rows_total + qrow
                                   : (size_t(b) * hq + h) * sq[b] + i;
        lse[li] = m + std::log(l);
      }
    }
}

Timing time_kernel(const Kernel& kernel, const std::vector<DeviceProblem*>& problems, int warmup,
                   int iters, CUstream stream) {
  const DriverApi& d = driver();
  std::vector<AttentionArgs> args;
  for (auto* p : problems) args.push_back(p->args());
  for (int i = 0; i < warmup; ++i) kernel.launch(args[i % args.size()], stream);
  CUevent start, stop;
  FLASHJIT_CU(d.cuEventCreate(&start, CU_EVENT_DEFAULT));
  FLASHJIT_CU(d.cuEventCreate(&stop, CU_EVENT_DEFAULT));
  Timing t;
  for (int i = 0; i < iters; ++i) {
    FLASHJIT_CU(d.cuEventRecord(start, stream));
    kernel.launch(args[i % args.size()], stream);
    FLASHJIT_CU(d.cuEventRecord(stop, stream));
    FLASHJIT_CU(d.cuEventSynchronize(stop));
    float ms = 0;
    FLASHJIT_CU(d.cuEventElapsedTime(&ms, start, stop));
    t.samples_ms.push_back(ms);
  }
  d.cuEventDestroy(start);
  d.cuEventDestroy(stop);
  std::vector<double> s = t.samples_ms;
  std::sort(s.begin(), s.end());
  t.median_ms = s[s.size() / 2];
  t.min_ms = s.front();
  return t;
}

double attention_flops(const Config& c, const ProblemShape& shape) {
  const double d = 0.5 * (c.head_dim.qk + c.head_dim.v);
  double pairs = 0;
  for (int b = 0; b < shape.batch; ++b) {
    const double sq = c.varlen ? shape.seqlens_q[b] : shape.seqlen_q;
    const double sk = c.varlen ? shape.seqlens_k[b] : shape.seqlen_k;
    if (c.mask == Mask::none) {
      pairs += sq * sk;
    } else if (c.mask == Mask::causal) {
      pairs += sq * sk / 2;  // the FlashAttention convention
    } else {
      // Visible pairs of the window, counted row by row.
      const int shift = int(sk - sq);
      for (int i = 0; i < int(sq); ++i) {
        int hi = int(sk), lo = 0;
        if (shape.window_right >= 0) hi = std::min(hi, i + shift + shape.window_right + 1);
        if (shape.window_left >= 0) lo = std::max(0, i + shift - shape.window_left);
        pairs += std::max(0, hi - lo);
      }
    }
  }
  return 4.0 * shape.heads_q * d * pairs;
}

double attention_bytes(const Config& c, const ProblemShape& shape) {
  double rows_q = 0, keys = 0;
  for (int b = 0; b < shape.batch; ++b) {
    rows_q += c.varlen ? shape.seqlens_q[b] : shape.seqlen_q;
    keys += shape.keys_of(c, b);
  }
  const double in = dtype_bytes(c.dtype.qkv), out = dtype_bytes(c.dtype.out);
  const double q = dtype_bytes(c.dtype.q.value_or(c.dtype.qkv));
  // A shared K/V cache's V is part of its K rows: each key row is read once.
  const double per_key = c.head_dim.qk + (c.kv_layout.shared_kv ? 0 : c.head_dim.v);
  return q * rows_q * shape.heads_q * c.head_dim.qk + in * keys * shape.heads_k * per_key +
         out * rows_q * shape.heads_q * c.head_dim.v;
}

}  // namespace flashjit
