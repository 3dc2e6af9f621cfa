// Random problems on the GPU, checks against the reference kernel, and timing: the machinery
// behind `flashjit run --check`, the GPU tests and the benchmarks. Inputs are fresh random
// values (never zeros); outputs are poisoned (NaN) before every launch so unwritten elements fail.
#pragma once

#include "runtime/flashjit.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace flashjit {

struct ElementType;  // generator/element_types.hpp

enum class Layout { bshd, bhsd };

struct ProblemShape {
  int batch = 1;
  int seqlen_q = 128;  // ragged: ignored (taken from seqlens_q)
  int seqlen_k = 128;
  int heads_q = 8;
  int heads_k = 8;
  std::vector<int> seqlens_q;  // ragged batches: one length per batch entry
  std::vector<int> seqlens_k;
  Layout layout = Layout::bshd;  // ragged tensors are always packed [total, H, D]
  int window_left = -1;
  int window_right = -1;
  float softmax_scale = 0.f;
  // Keys each batch entry has (seqused_k), each at most seqlen_k; empty: every entry has
  // seqlen_k (ragged: seqlens_k). Paged configs always pass them to the kernel.
  std::vector<int> cache_lens;
  // Paged configs: pages are handed out in a random order (else in order, entry by entry), or
  // as `page_table` ([batch][max_pages], row-major) says, in a cache of `num_pages` pages (0: one
  // more than the largest entry). Entries an entry's keys need must be distinct pages.
  bool shuffle_pages = true;
  std::vector<int> page_table;
  int num_pages = 0;
  int num_splits = 0;  // decode kernels: 0 chooses per launch
  std::string describe() const;
  int max_seqlen_k() const;  // the longest key sequence (ragged: over the batch)
  // Keys batch entry b sees under `config`: ragged seqlens_k, else cache_lens, else seqlen_k.
  int keys_of(const Config& config, int b) const;
  // Copies the sizes, window and scale into `a` (tensors, LSE and ragged offsets are left alone).
  void apply_to(AttentionArgs& a) const;
};

// Device buffers of one problem for one resolved config.
class DeviceProblem {
 public:
  DeviceProblem(const Config& config, const ProblemShape& shape, uint64_t seed);
  ~DeviceProblem();
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  AttentionArgs args() const;            // for the fast kernel (o in the config's out dtype)
  AttentionArgs reference_args() const;  // for the reference kernel (fp32 o, lse)
  void poison_outputs(CUstream stream = nullptr) const;
  std::vector<float> output() const;            // O as floats, [rows][heads][dv] order
  std::vector<float> reference_output() const;
  std::vector<float> lse() const;               // [heads][rows] (ragged) or [b][h][s]
  std::vector<float> reference_lse() const;
  size_t output_elements() const;
  // Writes fresh random inputs (a new seed) into the same buffers.
  void refill(uint64_t seed);

  // Host copies of inputs as floats (for the CPU fp64 reference): [rows][heads][dim] order.
  std::vector<float> host_q() const { return hq_; }
  std::vector<float> host_k() const { return hk_; }
  std::vector<float> host_v() const { return hv_; }
  const ProblemShape& shape() const { return shape_; }
  int rows_q() const { return rows_q_; }
  int rows_k() const { return rows_k_; }  // key rows of the host copies (paged: the cache's keys)
  // Paged configs: the page table [batch][max_pages] (-1 where an entry has no page).
  const std::vector<int>& page_table() const { return page_table_; }
  int num_pages() const { return num_pages_; }
  int max_pages() const { return max_pages_; }

  // Replaces input `which` ('q', 'k' or 'v') with `values`, host order [rows][heads][dim] over
  // the whole head (rope columns last): quantised as the config scales it (amax over each group
  // over the element type's largest value, rounded to dtype.scale), the rope columns stored in
  // dtype.rope. Returns the scale of each (row, head) (and block, with scales.k_block), empty
  // when the input is not scaled.
  std::vector<float> set_input(char which, const std::vector<float>& values);
  // Where value (row r, head h, column d) of input `which` sits in the input's device layout
  // with the whole head (rope columns included): the layout of npy files of that input.
  size_t input_index(char which, int r, int h, int d) const;
  // The shape of input `which`'s scale tensor as the kernels read it: [1] per tensor, [heads]
  // per head, per token [batch, heads, seqlen] ([heads, total rows] where the rows are packed),
  // or like the cache's rows (scales.token_layout "cache", a last dimension of blocks with
  // scales.k_block); empty when the config does not scale the input.
  std::vector<int64_t> scale_shape(char which) const;
  ScaleGranularity granularity(char which) const;  // the config's scales of input 'q', 'k' or 'v'
  // Replaces that tensor with `values` (scale_shape's layout), stored in dtype.scale per token,
  // fp32 otherwise.
  void set_scales(char which, const std::vector<float>& values);

 private:
  struct Buffer;
  Config config_;
  ProblemShape shape_;
  int rows_q_ = 0, rows_k_ = 0;  // total rows over the batch
  int device_rows_k_ = 0;        // key rows of the device K/V (paged: num_pages x page_size)
  std::vector<int> key_start_;   // each entry's first row in the host key copies
  std::vector<int> query_start_; // ... and query rows
  std::vector<int> page_table_;
  int num_pages_ = 0, max_pages_ = 0;
  std::vector<float> hq_, hk_, hv_;
  std::vector<Buffer*> buffers_;
  CUdeviceptr q_ = 0, k_ = 0, v_ = 0, o_ = 0, o_ref_ = 0, lse_ = 0, lse_ref_ = 0, cu_q_ = 0, cu_k_ = 0,
              q_rope_ = 0, k_rope_ = 0, pages_ = 0, seqused_ = 0, q_scale_ = 0, k_scale_ = 0, v_scale_ = 0;
  CUdeviceptr alloc(size_t bytes);
  void plan_pages(uint64_t seed);
  void use_page_table(const std::vector<int>& need);
  void upload_inputs(uint64_t seed);
  bool shared_kv() const;
  void share_v();
  std::vector<float> set_split_input(char which, const std::vector<float>& values);
  // One device tensor of an input: its element type, host-order extent, and the columns of the
  // host copy it fills; `which` names the scales it takes ('q', 'k', 'v'; 0: none).
  struct TensorSlot {
    CUdeviceptr dst = 0;
    const ElementType* type = nullptr;
    int rows = 0, heads = 0, dim = 0, host_dim = 0, host_offset = 0;
    std::vector<float>* host = nullptr;
    bool is_q = false;
    char which = 0;
  };
  std::pair<TensorSlot, TensorSlot> slots(char which);  // the nope (or whole) part and the rope part
  std::vector<float> write_input(const TensorSlot& t, std::vector<float> values);
  // Quantised inputs (scales.q/k/v): the scale of each group of `host` and the device tensor
  // of scales; `host` then holds the dequantised values.
  void upload_scales(char which, const std::vector<float>& scales);
  bool packed_scales(char which) const;            // per-token scales as [heads, total rows]
  int scale_blocks(char which) const;              // per-token scales of a row (scales.k_block)
  std::vector<float> quantise(char which, std::vector<float>& host_values, int rows, int heads, int dim) const;
  // (batch entry, position in it) of host row r of the queries or keys.
  std::pair<int, int> row_position(bool is_q, int r) const;
  // Element index in the device tensor of host row r (a query or key row), head h, column d.
  size_t device_index(bool is_q, int r, int heads, int dim, int h, int d) const;
  Tensor tensor(CUdeviceptr p, bool is_q, int dim) const;
};

struct CheckResult {
  double rel_error = 0;      // ||out - ref|| / ||ref|| over all outputs
  double max_abs_error = 0;
  double lse_max_error = 0;  // max |lse - lse_ref| over finite rows; inf when -inf/finite disagree
  size_t nonfinite = 0;      // NaN/Inf outputs (poisoned or unwritten elements included)
  double tolerance = 0;
  bool passed = false;
  std::string summary() const;
};

// The tolerance for ||out - ref|| / ||ref|| of kernels on inputs of this dtype (its row of
// generator/element_types.cpp: bf16 1e-2, fp16 3e-3, e4m3 3e-2, e5m2 6e-2).
double tolerance_for(DType qkv);

// Runs the reference and `kernel` on `problem` and compares: passed when every output is finite,
// the relative error is within tolerance_for(qkv), and the LSE within max(1e-2, tolerance / 3)
// of the reference's.
CheckResult check_against_reference(const Kernel& kernel, const Config& config,
                                    DeviceProblem& problem, CUstream stream = nullptr);
// The comparison alone, for outputs both kernels have already written (streams synchronised).
CheckResult compare_with_reference(const Config& config, const DeviceProblem& problem);

// fp64 CPU attention for small shapes: O as [rows][heads][dv]; LSE in the device's default
// layout ([b][h][s], ragged [h][total]).
void cpu_reference(const Config& config, const ProblemShape& shape, const std::vector<float>& q,
                   const std::vector<float>& k, const std::vector<float>& v,
                   std::vector<double>& o, std::vector<double>& lse);

// Median time in ms of `iters` launches after `warmup`, timed with CUDA events one launch each.
// With several problems, launches rotate through them so small shapes are not served from L2.
struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  std::vector<double> samples_ms;
};
Timing time_kernel(const Kernel& kernel, const std::vector<DeviceProblem*>& problems, int warmup,
                   int iters, CUstream stream = nullptr);

// 4 * B * H * Sq * Sk * D (D = (dqk + dv) / 2), halved for causal masks when Sq == Sk; ragged
// batches sum per sequence; the visible (query, key) pairs are counted for masks.
double attention_flops(const Config& config, const ProblemShape& shape);

// Bytes a launch must move at least: Q, every cached key's K and V (each entry's keys_of), O.
// Decode is judged by these per second against the HBM limit.
double attention_bytes(const Config& config, const ProblemShape& shape);

}  // namespace flashjit
