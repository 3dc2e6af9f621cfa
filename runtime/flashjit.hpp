// flashjit's public C++ API.
//
//   auto kernel = flashjit::get_kernel(flashjit::load_config_file("attn.json"));
//   flashjit::AttentionArgs args;
//   args.q = flashjit::Tensor::bshd(q, seqlen_q, heads_q, 128);  ... k, v, o
//   args.batch = B; args.seqlen_q = Sq; args.seqlen_k = Sk; args.heads_q = Hq; args.heads_k = Hk;
//   kernel->launch(args, stream);
//
// get_kernel generates, compiles (or loads from the disk cache) and loads the kernel for the
// current CUDA context, once per process; later calls cost a hash-map lookup. Holding the
// returned pointer and calling launch() is the fastest path.
#pragma once

#include "cache/log.hpp"
#include "generator/config.hpp"
#include "generator/kernel_source.hpp"
#include "runtime/artifact.hpp"
#include "runtime/driver.hpp"  // gpu_available(), DriverError, NoDeviceError
#include "runtime/ptxas_report.hpp"

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace flashjit {

// A bad launch argument; the message names the argument and the rule.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// One tensor argument: a device pointer and the element strides of its batch, row (sequence)
// and head axes. The head-dim axis is contiguous. Ragged tensors ignore batch_stride.
struct Tensor {
  const void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t head_stride = 0;

  static Tensor bshd(const void* data, int64_t seqlen, int64_t heads, int64_t dim);  // [B, S, H, D]
  static Tensor bhsd(const void* data, int64_t seqlen, int64_t heads, int64_t dim);  // [B, H, S, D]
  static Tensor packed(const void* data, int64_t heads, int64_t dim);  // ragged [total, H, D]
  // A paged cache [num_pages, page_size, H, D]: batch_stride steps over pages.
  static Tensor paged(const void* data, int64_t page_size, int64_t heads, int64_t dim);
};

struct AttentionArgs {
  Tensor q, k, v, o;
  Tensor q_rope, k_rope;  // the rope columns, when head_dim.rope > 0
  // LSE (fp32, natural log), required iff outputs.lse: element (b, h, s) at
  // lse[b*lse_batch_stride + h*lse_head_stride + s]; ragged: lse[h*lse_head_stride + row].
  // Negative strides select the contiguous default ([B, Hq, Sq], ragged [Hq, total_q]).
  float* lse = nullptr;
  int64_t lse_batch_stride = -1;
  int64_t lse_head_stride = -1;

  int batch = 1;
  int seqlen_q = 0;  // ragged: the longest sequence
  int seqlen_k = 0;
  int heads_q = 0;
  int heads_k = 0;

  // Ragged batches (config varlen): device arrays of batch + 1 row offsets, and the total rows.
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int total_q = 0;
  int total_k = 0;

  float softmax_scale = 0.f;  // 0: 1/sqrt(head_dim.qk)
  int window_left = -1;       // sliding_window: keys i'-left .. i'+right; -1 = unbounded
  int window_right = -1;

  // Kernels with the dynamic scheduler (launch_info().tile_counter) draw tiles from a device int.
  // Left null, flashjit uses its own per (context, stream); set it to run one kernel concurrently
  // with itself in ways streams do not tell apart (e.g. one CUDA graph replayed on two streams at
  // once): a 4-byte-aligned int that is zero before the launch (the kernel leaves it zero).
  int* tile_counter = nullptr;

  // Paged KV caches (kv_layout.paged): k and v are [num_pages, page_size, heads_k, d]
  // (Tensor::paged, or any strides), and key j of batch entry b is row j % page_size of page
  // page_table[b * page_table_stride + j / page_size]: int32 on the device, max_pages entries
  // per row. seqlen_k is the longest cache length. A page index outside [0, num_pages) is never
  // read; the rows it would feed come out NaN (it cannot be checked on the host).
  const int* page_table = nullptr;
  int num_pages = 0;
  int max_pages = 0;
  int64_t page_table_stride = -1;  // negative: max_pages
  // Keys of each batch entry (int32 [batch] on the device; a cache's current lengths, each at
  // most seqlen_k). Null: seqlen_k for every entry (ragged contiguous keys: cu_seqlens_k).
  const int* seqused_k = nullptr;

  // Decode family: how many CTAs split each sequence's keys (0: chosen from the shape and the
  // SM count, or the config's tuning.splitk_partitions), and the device scratch for their
  // partial outputs: Kernel::workspace_bytes(args) bytes, 16-byte aligned. Left null, flashjit
  // keeps one per (context, stream), grown outside CUDA-graph capture (launch once before
  // capturing, or pass one).
  int num_splits = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  // Quantisation scales (the config's scales.q/k/v): the stored values times the scale are the
  // inputs. per_tensor: one fp32; per_head: fp32 [heads of that tensor]; per_token (Q, K, V):
  // dtype.scale [batch, heads, seqlen] with element strides (negative: that contiguous layout;
  // ragged: [heads, total_rows], batch_stride ignored). Per-token K and V scales with
  // scales.token_layout "cache" lie like the cache's rows instead: [num_pages, page_size,
  // heads_k] (paged; batch_stride is the page stride), [batch, seqlen_k, heads_k] or ragged
  // [total_k, heads_k] (contiguous), with row_stride too. Scales apply to the nope columns; rope
  // columns are not quantised. Per-block K scales (scales.k_block) add a last dimension, the
  // row's blocks: [num_pages, page_size, heads_k, blocks] with block_stride (FlashMLA's fp8
  // latent rows hold them in the row: docs/decode.md).
  struct Scale {
    const void* data = nullptr;
    int64_t batch_stride = -1;
    int64_t head_stride = -1;
    int64_t row_stride = -1;    // per-token K and V scales laid out like the cache
    int64_t block_stride = -1;  // per-block K scales (scales.k_block)
  };
  Scale q_scale, k_scale, v_scale;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual const Config& config() const = 0;  // resolved
  virtual const Artifact& artifact() const = 0;
  const std::string& name() const { return artifact().name; }
  const LaunchInfo& launch_info() const { return artifact().launch; }
  const PtxasReport& ptxas() const { return artifact().ptxas; }
  // Validates `args` against the config (throws ArgumentError) and launches every kernel of the
  // operation on `stream`; never synchronises with the host.
  virtual void launch(const AttentionArgs& args, CUstream stream = nullptr) const = 0;
  // Device scratch a launch with `args` needs (0 for most kernels; split-K decode launches).
  virtual size_t workspace_bytes(const AttentionArgs& args) const = 0;
};

// The fast kernel for `config` on the current device ("arch": "native" is resolved there).
std::shared_ptr<const Kernel> get_kernel(const Config& config);
// The same, with tiles chosen for key length `seqlen_k` (the config's tuning.seqlen_hint
// unless it sets one). Lengths are rounded up to a power of two, so nearby lengths share a
// kernel; configs that resolve to the same tiles share one in any case.
std::shared_ptr<const Kernel> get_kernel(const Config& config, int64_t seqlen_k);
// The fp32 reference kernel for the same problem: writes fp32 O (args.o) and the LSE.
std::shared_ptr<const Kernel> get_reference_kernel(const Config& config);

// Builds (or finds in the cache) the kernel for `config` without a GPU. arch "native" is an
// error here; name the target.
Artifact build(const Config& config);

}  // namespace flashjit
