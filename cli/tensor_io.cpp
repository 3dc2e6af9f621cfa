#include "cli/tensor_io.hpp"

#include "cli/errors.hpp"
#include "generator/element_types.hpp"
#include "runtime/driver.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace flashjit::cli {

const char* role_name(TensorRole r) {
  switch (r) {
    case TensorRole::q: return "Q";
    case TensorRole::k: return "K";
    case TensorRole::v: return "V";
    case TensorRole::o: return "O";
    case TensorRole::lse: return "LSE";
  }
  return "?";
}

std::vector<int64_t> npy_shape(TensorRole role, const Config& c, const ProblemShape& s, int rows_q, int rows_k,
                               int num_pages) {
  const bool is_q = role == TensorRole::q || role == TensorRole::o || role == TensorRole::lse;
  if (!is_q && c.kv_layout.paged)
    return {num_pages, c.kv_layout.page_size, s.heads_k, role == TensorRole::k ? c.head_dim.qk : c.head_dim.v};
  const int64_t heads = is_q ? s.heads_q : s.heads_k;
  const int64_t seqlen = is_q ? s.seqlen_q : s.seqlen_k;
  const int64_t rows = is_q ? rows_q : rows_k;
  if (role == TensorRole::lse) {
    if (c.varlen) return {heads, rows};
    return {s.batch, heads, seqlen};
  }
  const int64_t dim = (role == TensorRole::q || role == TensorRole::k) ? c.head_dim.qk : c.head_dim.v;
  if (c.varlen) return {rows, heads, dim};
  if (s.layout == Layout::bhsd) return {s.batch, heads, seqlen, dim};
  return {s.batch, seqlen, heads, dim};
}

std::vector<unsigned char> to_elements(const NpyArray& a, DType dtype, const std::vector<int64_t>& expected,
                                       const std::string& file, TensorRole role) {
  const std::string what = std::string(role_name(role));
  if (a.shape != expected)
    throw NpyError(file + ": " + what + " has shape " + a.shape_string() + "; the problem needs " +
                   shape_string(expected));
  const ElementType& type = element_type(dtype);
  const std::string kind = a.descr.substr(1), own = std::string(type.npy_descr).substr(1);
  const size_t n = static_cast<size_t>(a.elements());
  std::vector<unsigned char> out(n * type.bytes);
  if (kind == "f4") {
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, a.data.data() + 4 * i, 4);
      store_element(type, f, out.data() + i * type.bytes);
    }
    return out;
  }
  // Raw bits: the type's own descr, or numpy's void type of the same size.
  const bool raw_bits = own[0] == 'u' && kind.size() == own.size() && kind[0] == 'V' &&
                        kind.compare(1, std::string::npos, own, 1, std::string::npos) == 0;
  if (kind != own && !raw_bits)
    throw NpyError(file + ": " + what + " holds '" + a.descr + "' but the config's dtype is " + to_string(dtype) +
                   ": store '" + type.npy_descr + "' (" + to_string(dtype) +
                   (own[0] == 'u' ? " bit patterns" : "") + ") or float32 '<f4'");
  std::memcpy(out.data(), a.data.data(), out.size());
  return out;
}

namespace {

CUdeviceptr ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

char which_of(TensorRole role) { return role == TensorRole::q ? 'q' : role == TensorRole::k ? 'k' : 'v'; }

std::vector<float> floats_of(const NpyArray& a) {
  std::vector<float> out(static_cast<size_t>(a.elements()));
  std::memcpy(out.data(), a.data.data(), out.size() * 4);
  return out;
}

// "per token: 4096 scales in [0.0021, 0.0099]" or "per tensor: scale 0.0087".
std::string describe_scales(ScaleGranularity g, const std::vector<float>& unique) {
  std::ostringstream s;
  s << to_string(g) << ": ";
  if (unique.size() == 1) {
    s << "scale " << unique[0];
  } else {
    const auto [lo, hi] = std::minmax_element(unique.begin(), unique.end());
    s << unique.size() << " scales in [" << *lo << ", " << *hi << "]";
  }
  return s.str();
}

}  // namespace

std::string load_input(const std::string& file, const std::string& scale_file, TensorRole role, const Config& c,
                       DeviceProblem& problem) {
  const char which = which_of(role);
  const std::string flag = std::string("--load-") + which;
  if (role == TensorRole::v && c.kv_layout.shared_kv)
    throw UsageError(flag + " " + file + ": the config has kv_layout.shared_kv = true, so V is the first head_dim.v "
                     "columns of K: give them in --load-k");
  const ScaleGranularity g = problem.granularity(which);
  const NpyArray a = read_npy(file);
  const auto expected = npy_shape(role, c, problem.shape(), problem.rows_q(), problem.rows_k(), problem.num_pages());
  const bool floats = a.descr.substr(1) == "f4";

  if (floats) {
    // Values as they are: quantised here when the config scales them, the rope columns stored
    // in dtype.rope.
    if (!scale_file.empty())
      throw UsageError(flag + "-scale " + scale_file + ": " + file + " holds float32 values, which flashjit quantises "
                       "itself; a scale file goes with values already in " + to_string(c.dtype.qkv));
    if (a.shape != expected)
      throw NpyError(file + ": " + role_name(role) + " has shape " + a.shape_string() + "; the problem needs " +
                     shape_string(expected));
    const std::vector<float> file_values = floats_of(a);
    const bool is_q = role == TensorRole::q;
    const int rows = is_q ? problem.rows_q() : problem.rows_k();
    const int heads = is_q ? problem.shape().heads_q : problem.shape().heads_k;
    const int dim = role == TensorRole::v ? c.head_dim.v : c.head_dim.qk;
    std::vector<float> host(size_t(rows) * heads * dim);
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < dim; ++d)
          host[(size_t(r) * heads + h) * dim + d] = file_values[problem.input_index(which, r, h, d)];
    const std::vector<float> scales = problem.set_input(which, host);
    if (scales.empty()) return "";
    std::vector<float> unique = scales;
    if (g == ScaleGranularity::per_tensor) unique.resize(1);
    if (g == ScaleGranularity::per_head) unique.resize(static_cast<size_t>(heads));
    return std::string(role_name(role)) + " quantised from " + file + " to " + to_string(c.dtype.qkv) + " " +
           describe_scales(g, unique);
  }

  // Elements as stored: the config's dtype (bits; Q's is dtype.q where set), with their scales
  // from a file when scaled.
  const DType stored = role == TensorRole::q ? c.dtype.q.value_or(c.dtype.qkv) : c.dtype.qkv;
  if (c.head_dim.rope > 0 && role != TensorRole::v && c.dtype.rope && *c.dtype.rope != stored)
    throw NpyError(file + ": " + role_name(role) + "'s rope columns are " + to_string(*c.dtype.rope) + " and its other "
                   "columns " + to_string(stored) + ": store float32 '<f4' values");
  if (g != ScaleGranularity::none && scale_file.empty())
    throw UsageError(flag + " " + file + ": the config scales " + role_name(role) + " (scales." + which + " = " +
                     to_string(g) + "): give its scales with " + flag + "-scale FILE, or float32 values for flashjit "
                     "to quantise");
  if (g == ScaleGranularity::none && !scale_file.empty())
    throw UsageError(flag + "-scale " + scale_file + ": the config does not scale " + role_name(role) + " (scales." +
                     which + ")");
  const std::vector<unsigned char> bytes = to_elements(a, stored, expected, file, role);
  if (!scale_file.empty()) {
    const NpyArray sa = read_npy(scale_file);
    const std::vector<int64_t> want = problem.scale_shape(which);
    if (sa.descr.substr(1) != "f4")
      throw NpyError(scale_file + ": " + role_name(role) + "'s scales hold '" + sa.descr + "'; store float32 '<f4'");
    if (sa.shape != want)
      throw NpyError(scale_file + ": " + role_name(role) + "'s scales have shape " + sa.shape_string() +
                     "; scales." + which + " = " + to_string(g) + " needs " + shape_string(want));
    problem.set_scales(which, floats_of(sa));
  }
  const AttentionArgs args = problem.args();
  const DriverApi& d = driver();
  const bool split = c.head_dim.rope > 0 && role != TensorRole::v;
  if (!split) {
    const Tensor& t = role == TensorRole::q ? args.q : role == TensorRole::k ? args.k : args.v;
    FLASHJIT_CU(d.cuMemcpyHtoD(ptr(t.data), bytes.data(), bytes.size()));
    return "";
  }
  // The nope columns go to Q/K, the last `rope` columns to their own tensors.
  const size_t e = dtype_bytes(stored);
  const size_t qk = c.head_dim.qk * e, rope = c.head_dim.rope * e, nope = qk - rope, rows = bytes.size() / qk;
  std::vector<unsigned char> a_nope(rows * nope), a_rope(rows * rope);
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(&a_nope[r * nope], &bytes[r * qk], nope);
    std::memcpy(&a_rope[r * rope], &bytes[r * qk + nope], rope);
  }
  const bool q = role == TensorRole::q;
  FLASHJIT_CU(d.cuMemcpyHtoD(ptr(q ? args.q.data : args.k.data), a_nope.data(), a_nope.size()));
  FLASHJIT_CU(d.cuMemcpyHtoD(ptr(q ? args.q_rope.data : args.k_rope.data), a_rope.data(), a_rope.size()));
  return "";
}

void save_output(const std::string& file, TensorRole role, const Config& c, const DeviceProblem& problem) {
  const auto shape = npy_shape(role, c, problem.shape(), problem.rows_q(), problem.rows_k());
  size_t n = 1;
  for (auto v : shape) n *= static_cast<size_t>(v);
  const AttentionArgs args = problem.args();
  const DriverApi& d = driver();
  if (role == TensorRole::lse) {
    if (!args.lse) throw UsageError("--save-lse needs a config with \"outputs\": {\"lse\": true}");
    std::vector<float> lse(n);
    FLASHJIT_CU(d.cuMemcpyDtoH(lse.data(), ptr(args.lse), n * 4));
    write_npy(file, "<f4", shape, lse.data(), n * 4);
    return;
  }
  const ElementType& out = element_type(c.dtype.out);
  std::vector<unsigned char> o(n * out.bytes);
  FLASHJIT_CU(d.cuMemcpyDtoH(o.data(), ptr(args.o.data), o.size()));
  write_npy(file, out.npy_descr, shape, o.data(), o.size());
}

}  // namespace flashjit::cli
