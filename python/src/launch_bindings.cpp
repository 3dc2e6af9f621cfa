// The warm attention path: a LaunchPlan holds a loaded kernel and every size and stride of one
// call signature (built once by the torch layer); launch() then takes only the pointers and the
// stream, as plain integers, and holds the GIL for the few microseconds it runs.
#include "kernel_bindings.hpp"

#include "device_context.hpp"

#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>

#include <array>
#include <cstdint>
#include <optional>

namespace flashjit::python {

namespace {

using Strides = std::array<int64_t, 3>;  // batch, row (sequence), head; elements

Tensor strided(const Strides& s) { return Tensor{nullptr, s[0], s[1], s[2]}; }

const void* ptr(uintptr_t p) { return reinterpret_cast<const void*>(p); }

struct LaunchPlan {
  LoadedKernel kernel;
  AttentionArgs args;  // pointers left null

  AttentionArgs with(uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, uintptr_t q_rope, uintptr_t k_rope,
                     uintptr_t lse, uintptr_t cu_seqlens_q, uintptr_t cu_seqlens_k, uintptr_t tile_counter,
                     uintptr_t page_table, uintptr_t seqused_k, uintptr_t workspace, size_t workspace_bytes,
                     uintptr_t q_scale = 0, uintptr_t k_scale = 0, uintptr_t v_scale = 0) const {
    AttentionArgs a = args;
    a.q_scale.data = ptr(q_scale);
    a.k_scale.data = ptr(k_scale);
    a.v_scale.data = ptr(v_scale);
    a.q.data = ptr(q);
    a.k.data = ptr(k);
    a.v.data = ptr(v);
    a.o.data = ptr(o);
    a.q_rope.data = ptr(q_rope);
    a.k_rope.data = ptr(k_rope);
    a.lse = reinterpret_cast<float*>(lse);
    a.cu_seqlens_q = reinterpret_cast<const int*>(cu_seqlens_q);
    a.cu_seqlens_k = reinterpret_cast<const int*>(cu_seqlens_k);
    a.tile_counter = reinterpret_cast<int*>(tile_counter);
    a.page_table = reinterpret_cast<const int*>(page_table);
    a.seqused_k = reinterpret_cast<const int*>(seqused_k);
    a.workspace = reinterpret_cast<void*>(workspace);
    a.workspace_bytes = workspace_bytes;
    return a;
  }

  void launch(uintptr_t stream, uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, uintptr_t q_rope,
              uintptr_t k_rope, uintptr_t lse, uintptr_t cu_seqlens_q, uintptr_t cu_seqlens_k,
              uintptr_t tile_counter, uintptr_t page_table, uintptr_t seqused_k, uintptr_t workspace,
              size_t workspace_bytes, uintptr_t q_scale, uintptr_t k_scale, uintptr_t v_scale) const {
    const AttentionArgs a = with(q, k, v, o, q_rope, k_rope, lse, cu_seqlens_q, cu_seqlens_k, tile_counter,
                                 page_table, seqused_k, workspace, workspace_bytes, q_scale, k_scale, v_scale);
    DeviceContext scope(kernel.device);
    kernel.kernel->launch(a, reinterpret_cast<CUstream>(stream));
  }

  // The common call: q, k, v and o alone (no rope parts, LSE, ragged offsets, paging or scales),
  // with fewer arguments to convert.
  void launch_dense(uintptr_t stream, uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o,
                    uintptr_t tile_counter) const {
    launch(stream, q, k, v, o, 0, 0, 0, 0, 0, tile_counter, 0, 0, 0, 0, 0, 0, 0);
  }

  // The scratch a launch of this signature needs (split-K decode), checked like a launch.
  size_t workspace_bytes(uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, uintptr_t lse, uintptr_t cu_seqlens_q,
                         uintptr_t page_table, uintptr_t seqused_k, uintptr_t q_scale, uintptr_t k_scale,
                         uintptr_t v_scale, uintptr_t q_rope, uintptr_t k_rope) const {
    return kernel.kernel->workspace_bytes(with(q, k, v, o, q_rope, k_rope, lse, cu_seqlens_q, 0, 0, page_table,
                                               seqused_k, 0, 0, q_scale, k_scale, v_scale));
  }
};

}  // namespace

void register_launch(nb::module_& m) {
  nb::class_<LaunchPlan>(m, "LaunchPlan", "One call signature of a loaded kernel: sizes and element strides")
      .def(
          "__init__",
          [](LaunchPlan* self, const LoadedKernel& kernel, const Strides& q, const Strides& k, const Strides& v,
             const Strides& o, std::optional<Strides> q_rope, std::optional<Strides> k_rope,
             std::optional<std::array<int64_t, 2>> lse, int batch, int seqlen_q, int seqlen_k, int heads_q,
             int heads_k, int total_q, int total_k, float softmax_scale, int window_left, int window_right,
             int num_pages, int max_pages, int64_t page_table_stride, int num_splits,
             std::optional<std::array<int64_t, 2>> q_scale_strides, std::optional<std::array<int64_t, 2>> k_scale_strides,
             std::optional<int64_t> k_scale_row_stride, std::optional<std::array<int64_t, 2>> v_scale_strides,
             std::optional<int64_t> v_scale_row_stride, std::optional<int64_t> k_scale_block_stride) {
            AttentionArgs a;
            a.q = strided(q);
            a.k = strided(k);
            a.v = strided(v);
            a.o = strided(o);
            if (q_rope) a.q_rope = strided(*q_rope);
            if (k_rope) a.k_rope = strided(*k_rope);
            if (lse) {
              a.lse_batch_stride = (*lse)[0];
              a.lse_head_stride = (*lse)[1];
            }
            a.batch = batch;
            a.seqlen_q = seqlen_q;
            a.seqlen_k = seqlen_k;
            a.heads_q = heads_q;
            a.heads_k = heads_k;
            a.total_q = total_q;
            a.total_k = total_k;
            a.softmax_scale = softmax_scale;
            a.window_left = window_left;
            a.window_right = window_right;
            a.num_pages = num_pages;
            a.max_pages = max_pages;
            a.page_table_stride = page_table_stride;
            a.num_splits = num_splits;
            if (q_scale_strides) {
              a.q_scale.batch_stride = (*q_scale_strides)[0];
              a.q_scale.head_stride = (*q_scale_strides)[1];
            }
            if (k_scale_strides) {
              a.k_scale.batch_stride = (*k_scale_strides)[0];
              a.k_scale.head_stride = (*k_scale_strides)[1];
            }
            if (k_scale_row_stride) a.k_scale.row_stride = *k_scale_row_stride;
            if (v_scale_strides) {
              a.v_scale.batch_stride = (*v_scale_strides)[0];
              a.v_scale.head_stride = (*v_scale_strides)[1];
            }
            if (v_scale_row_stride) a.v_scale.row_stride = *v_scale_row_stride;
            if (k_scale_block_stride) a.k_scale.block_stride = *k_scale_block_stride;
            new (self) LaunchPlan{kernel, a};
          },
          nb::arg("kernel"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("q_rope").none(),
          nb::arg("k_rope").none(), nb::arg("lse").none(), nb::arg("batch"), nb::arg("seqlen_q"),
          nb::arg("seqlen_k"), nb::arg("heads_q"), nb::arg("heads_k"), nb::arg("total_q") = 0,
          nb::arg("total_k") = 0, nb::arg("softmax_scale") = 0.f, nb::arg("window_left") = -1,
          nb::arg("window_right") = -1, nb::arg("num_pages") = 0, nb::arg("max_pages") = 0,
          nb::arg("page_table_stride") = -1, nb::arg("num_splits") = 0, nb::arg("q_scale_strides").none() = nb::none(),
          nb::arg("k_scale_strides").none() = nb::none(), nb::arg("k_scale_row_stride").none() = nb::none(),
          nb::arg("v_scale_strides").none() = nb::none(), nb::arg("v_scale_row_stride").none() = nb::none(),
          nb::arg("k_scale_block_stride").none() = nb::none(),
          "Tensors are (batch, row, head) element strides (ragged tensors: batch ignored; paged caches: "
          "(page, row, head)); lse is (batch, head) strides or None; softmax_scale 0 selects "
          "1/sqrt(head_dim.qk); num_splits 0 lets a decode kernel choose; *_scale_strides are per-token "
          "scales' (batch, head) strides; *_scale_row_stride the row stride of per-token K and V scales laid "
          "out like the cache (scales.token_layout \"cache\": (page, row, head) strides); "
          "k_scale_block_stride the stride between a key row's per-block K scales (scales.k_block).")
      .def_prop_ro("kernel", [](const LaunchPlan& p) { return p.kernel; })
      .def("launch", &LaunchPlan::launch, nb::arg("stream"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
           nb::arg("o"), nb::arg("q_rope"), nb::arg("k_rope"), nb::arg("lse"), nb::arg("cu_seqlens_q"),
           nb::arg("cu_seqlens_k"), nb::arg("tile_counter"), nb::arg("page_table") = 0, nb::arg("seqused_k") = 0,
           nb::arg("workspace") = 0, nb::arg("workspace_bytes") = 0, nb::arg("q_scale") = 0, nb::arg("k_scale") = 0,
           nb::arg("v_scale") = 0,
           "Launches on `stream` (a CUstream as an integer; 0 is the legacy default stream) with "
           "device pointers as integers (0: none). Checks every argument first (ArgumentError).")
      .def("launch_dense", &LaunchPlan::launch_dense, nb::arg("stream"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
           nb::arg("o"), nb::arg("tile_counter"),
           "launch() with only q, k, v, o and the tile counter (every other pointer 0).")
      .def("workspace_bytes", &LaunchPlan::workspace_bytes, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"),
           nb::arg("lse"), nb::arg("cu_seqlens_q"), nb::arg("page_table"), nb::arg("seqused_k"),
           nb::arg("q_scale") = 0, nb::arg("k_scale") = 0, nb::arg("v_scale") = 0, nb::arg("q_rope") = 0,
           nb::arg("k_rope") = 0,
           "Bytes of device scratch a launch of this signature needs (split-K decode; 0 otherwise).");
}

}  // namespace flashjit::python
