#include "generator/wgmma_emitter.hpp"

#include "generator/element_types.hpp"

#include <set>
#include <stdexcept>

namespace flashjit::wgmma {

namespace {

std::string operand_list(int first, int count) {
  std::string s = "{";
  for (int i = 0; i < count; ++i) s += (i ? ", %" : "%") + std::to_string(first + i);
  return s + "}";
}

std::string accumulator_constraints(int count) {
  std::string s;
  for (int i = 0; i < count; ++i) s += (i ? ", \"+f\"(d[" : "\"+f\"(d[") + std::to_string(i) + "])";
  return s;
}

// 16-bit types name both operands' majorness (imm-trans-a/b); 8-bit types have no such
// immediates: both operands are K-major, so fp8 kernels transpose V in shared memory.
std::string one_width(const ElementType& e, int n) {
  const bool transposable = e.bytes == 2;
  const std::string type = e.device_type, ptx = e.ptx;
  int regs = n / 2;
  std::string shape = "m64n" + std::to_string(n) + "k" + std::to_string(e.mma_k) + ".f32." + ptx + "." + ptx;
  std::string acc = accumulator_constraints(regs);
  std::string s;
  s += "template <> struct Wgmma<" + type + ", " + std::to_string(n) + "> {\n";
  // SS: A (Q) and B (K) K-major in shared memory.
  s += "  __device__ __forceinline__ static void ss(float (&d)[" + std::to_string(regs) +
       "], u64 desc_a, u64 desc_b, int accumulate) {\n";
  s += "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(regs + 2) +
       ", 0;\\nwgmma.mma_async.sync.aligned." + shape + " " + operand_list(0, regs) + ", %" +
       std::to_string(regs) + ", %" + std::to_string(regs + 1) + (transposable ? ", p, 1, 1, 0, 0" : ", p, 1, 1") +
       ";\\n}\\n\"\n";
  s += "        : " + acc + "\n        : \"l\"(desc_a), \"l\"(desc_b), \"r\"(accumulate));\n  }\n";
  // RS: A (P) from registers; B (V) MN-major in shared memory for 16-bit types, K-major for fp8.
  s += "  __device__ __forceinline__ static void rs(float (&d)[" + std::to_string(regs) +
       "], const u32 (&a)[4], u64 desc_b, int accumulate) {\n";
  s += "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(regs + 5) +
       ", 0;\\nwgmma.mma_async.sync.aligned." + shape + " " + operand_list(0, regs) + ", " +
       operand_list(regs, 4) + ", %" + std::to_string(regs + 4) + (transposable ? ", p, 1, 1, 1" : ", p, 1, 1") +
       ";\\n}\\n\"\n";
  s += "        : " + acc +
       "\n        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b), "
       "\"r\"(accumulate));\n  }\n";
  s += "};\n";
  return s;
}

}  // namespace

std::string specialisations(DType element, const std::vector<int>& widths) {
  const ElementType& e = element_type(element);
  if (e.bytes != 2 && !is_float8(element))
    throw std::logic_error(std::string("no wgmma wrappers for ") + e.name);
  std::set<int> distinct(widths.begin(), widths.end());
  std::string s = "namespace flashjit::sm90 {\n";
  for (int n : distinct) {
    if (n < 8 || n > 256 || n % 8) throw std::logic_error("wgmma N must be a multiple of 8 up to 256");
    s += one_width(e, n);
  }
  return s + "}  // namespace flashjit::sm90\n";
}

}  // namespace flashjit::wgmma
