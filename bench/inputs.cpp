#include "bench/inputs.hpp"

#include <algorithm>
#include <cmath>

namespace flashjit::bench {

namespace {

constexpr size_t kAlign = 512;  // elements between sets (1 KiB for 16-bit): TMA wants 16 B

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

const char* byte_ptr_add(const void* p, size_t bytes) {
  return static_cast<const char*>(p) + bytes;
}

}  // namespace

InputPool::InputPool(size_t l2_bytes, uint64_t seed, size_t max_bytes)
    : l2_bytes_(l2_bytes), seed_(seed), max_bytes_(max_bytes) {}

InputPool::~InputPool() = default;

bool InputPool::poolable(const Config& c) {
  const bool sixteen = c.dtype.qkv == DType::bf16 || c.dtype.qkv == DType::fp16;
  return sixteen && !c.varlen && c.head_dim.rope == 0 && !c.kv_layout.paged && !c.scales.any() &&
         !c.lse;
}

size_t InputPool::sets_for(double bytes_per_set, size_t max_sets) const {
  if (bytes_per_set <= 0) return 1;
  size_t n = static_cast<size_t>(std::ceil(3.0 * double(l2_bytes_) / bytes_per_set));
  n = std::clamp<size_t>(n, 1, max_sets);
  while (n > 1 && double(n) * bytes_per_set > double(max_bytes_)) --n;
  return n;
}

DeviceProblem& InputPool::flat(const Config& c, size_t elements) {
  const std::string key = std::string(to_string(c.dtype.qkv)) + "/" + to_string(c.dtype.out);
  Flat& f = flat_[key];
  if (!f.problem || f.elements < elements) {
    f.problem.reset();  // free first: the old and new pools need not coexist
    // A flat problem: one head of depth 128 and `rows` rows holds rows * 128 elements per tensor.
    constexpr int kDepth = 128;
    Config fc;
    fc.dtype.qkv = c.dtype.qkv;
    fc.dtype.out = c.dtype.out;
    fc.head_dim.qk = fc.head_dim.v = kDepth;
    ProblemShape s;
    s.batch = 1;
    s.heads_q = s.heads_k = 1;
    s.seqlen_q = s.seqlen_k = static_cast<int>((elements + kDepth - 1) / kDepth);
    f.problem = std::make_unique<DeviceProblem>(fc, s, seed_ + flat_.size() * 7919 + elements);
    f.elements = size_t(s.seqlen_q) * kDepth;
  }
  return *f.problem;
}

InputSets InputPool::prepare(const Config& c, const ProblemShape& shape) {
  exact_.clear();
  InputSets out;
  const int qkb = dtype_bytes(c.dtype.qkv), ob = dtype_bytes(c.dtype.out);
  if (poolable(c)) {
    const size_t b = size_t(shape.batch), sq = size_t(shape.seqlen_q), sk = size_t(shape.seqlen_k);
    const size_t hq = size_t(shape.heads_q), hk = size_t(shape.heads_k);
    const size_t dqk = size_t(c.head_dim.qk), dv = size_t(c.head_dim.v);
    const size_t nq = b * sq * hq * dqk, nk = b * sk * hk * dqk, nv = b * sk * hk * dv,
                 no = b * sq * hq * dv;
    out.bytes_per_set = double(qkb * (nq + nk + nv) + ob * no);
    // Memory per set in the pool: four tensors of `stride` elements plus the pool's fp32 extras.
    const size_t stride = round_up(std::max({nq, nk, nv, no, size_t(1)}), kAlign);
    const size_t sets = sets_for(out.bytes_per_set, 4096);
    DeviceProblem& p = flat(c, stride * sets);
    const AttentionArgs base = p.args();
    for (size_t i = 0; i < sets; ++i) {
      const size_t off_in = i * stride * qkb, off_out = i * stride * ob;
      auto view = [&](const void* ptr, size_t off, int64_t seqlen, int64_t heads, int64_t dim) {
        const void* q = byte_ptr_add(ptr, off);
        return shape.layout == Layout::bhsd ? Tensor::bhsd(q, seqlen, heads, dim)
                                            : Tensor::bshd(q, seqlen, heads, dim);
      };
      AttentionArgs a;
      a.q = view(base.q.data, off_in, shape.seqlen_q, shape.heads_q, c.head_dim.qk);
      a.k = view(base.k.data, off_in, shape.seqlen_k, shape.heads_k, c.head_dim.qk);
      a.v = view(base.v.data, off_in, shape.seqlen_k, shape.heads_k, c.head_dim.v);
      a.o = view(base.o.data, off_out, shape.seqlen_q, shape.heads_q, c.head_dim.v);
      shape.apply_to(a);
      out.args.push_back(a);
    }
    out.pooled = true;
    return out;
  }
  // Exact problems: the harness lays out ragged batches, rope columns, LSE and the rest.
  double rows_q = double(shape.batch) * shape.seqlen_q, rows_k = double(shape.batch) * shape.seqlen_k;
  if (c.varlen) {
    rows_q = rows_k = 0;
    for (int x : shape.seqlens_q) rows_q += x;
    for (int x : shape.seqlens_k) rows_k += x;
  }
  out.bytes_per_set = rows_q * shape.heads_q * c.head_dim.qk * qkb +
                      rows_k * shape.heads_k * (c.head_dim.qk + c.head_dim.v) * qkb +
                      rows_q * shape.heads_q * c.head_dim.v * ob;
  const size_t sets = sets_for(out.bytes_per_set, 16);
  for (size_t i = 0; i < sets; ++i) exact_.push_back(std::make_unique<DeviceProblem>(c, shape, seed_ + 1 + i));
  for (const auto& p : exact_) out.args.push_back(p->args());
  return out;
}

}  // namespace flashjit::bench
