// .npy inputs and outputs of `flashjit run`: which shape each tensor has in the problem's layout,
// converting file contents to the config's element type, and copying to/from the GPU buffers of
// a DeviceProblem (through the pointers its AttentionArgs expose).
//
// Shapes: Q [B, Sq, Hq, Dqk], K [B, Sk, Hk, Dqk], V [B, Sk, Hk, Dv], O [B, Sq, Hq, Dv] for bshd
// ([B, H, S, D] for bhsd; ragged batches [total, H, D]; paged caches K and V [num_pages,
// page_size, Hk, D], laid out as the page table says); LSE [B, Hq, Sq] (ragged [Hq, total_q]).
// Element types as generator/element_types.cpp lists them: fp16 '<f2', bf16 '<u2' (raw bits;
// '<V2' accepted), fp8 '|u1' (raw bits; '|V1' accepted), LSE '<f4'. Inputs may also be float32
// '<f4', rounded to the config's dtype. Rope configs take Q and K with all Dqk columns
// (the rope part last) and split them.
#pragma once

#include "cli/npy.hpp"
#include "generator/config.hpp"
#include "runtime/harness.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace flashjit::cli {

enum class TensorRole { q, k, v, o, lse };
const char* role_name(TensorRole r);

// rows_q / rows_k: total rows over the batch (ragged) -- DeviceProblem::rows_q()/rows_k().
// Paged configs store K and V as the cache itself: [num_pages, page_size, Hk, D].
std::vector<int64_t> npy_shape(TensorRole role, const Config& c, const ProblemShape& shape, int rows_q,
                               int rows_k, int num_pages = 0);

// Checks `a` against the expected shape and converts it to elements of `dtype`, as the GPU stores
// them (little-endian bits). Throws NpyError naming `file`.
std::vector<unsigned char> to_elements(const NpyArray& a, DType dtype, const std::vector<int64_t>& expected,
                                       const std::string& file, TensorRole role);

// Reads `file` into Q, K or V of `problem`. float32 values are stored in the config's types,
// quantised when the config scales the input (returns a line naming the scales used); elements
// already in dtype.qkv take their scales from `scale_file` (float32, DeviceProblem::scale_shape),
// which a scaled input needs and an unscaled one refuses.
std::string load_input(const std::string& file, const std::string& scale_file, TensorRole role, const Config& c,
                       DeviceProblem& problem);
// Writes O or the LSE of `problem` to `file`.
void save_output(const std::string& file, TensorRole role, const Config& c, const DeviceProblem& problem);

}  // namespace flashjit::cli
