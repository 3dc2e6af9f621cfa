#include "generator/wgmma_emitter.hpp"

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

std::string one_width(const std::string& type, const std::string& ptx_type, int n) {
  int regs = n / 2;
  std::string shape = "m64n" + std::to_string(n) + "k16.f32." + ptx_type + "." + ptx_type;
  std::string acc = accumulator_constraints(regs);
  std::string s;
  s += "template <> struct Wgmma<" + type + ", " + std::to_string(n) + "> {\n";
  // SS: A (Q) and B (K) K-major in shared memory.
  s += "  __device__ __forceinline__ static void ss(float (&d)[" + std::to_string(regs) +
       "], u64 desc_a, u64 desc_b, int accumulate) {\n";
  s += "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(regs + 2) +
       ", 0;\\nwgmma.mma_async.sync.aligned." + shape + " " + operand_list(0, regs) + ", %" +
       std::to_string(regs) + ", %" + std::to_string(regs + 1) + ", p, 1, 1, 0, 0;\\n}\\n\"\n";
  s += "        : " + acc + "\n        : \"l\"(desc_a), \"l\"(desc_b), \"r\"(accumulate));\n  }\n";
  // RS: A (P) from registers, B (V) MN-major in shared memory.
  s += "  __device__ __forceinline__ static void rs(float (&d)[" + std::to_string(regs) +
       "], const u32 (&a)[4], u64 desc_b, int accumulate) {\n";
  s += "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(regs + 5) +
       ", 0;\\nwgmma.mma_async.sync.aligned." + shape + " " + operand_list(0, regs) + ", " +
       operand_list(regs, 4) + ", %" + std::to_string(regs + 4) + ", p, 1, 1, 1;\\n}\\n\"\n";
  s += "        : " + acc +
       "\n        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b), "
       "\"r\"(accumulate));\n  }\n";
  s += "};\n";
  return s;
}

}  // namespace

std::string specialisations(DType element, const std::vector<int>& widths) {
  std::string type, ptx;
  switch (element) {
    case DType::bf16: type = "flashjit::bf16_t"; ptx = "bf16"; break;
    case DType::fp16: type = "flashjit::fp16_t"; ptx = "f16"; break;
    default: throw std::logic_error("wgmma wrappers exist for bf16 and fp16 only");
  }
  std::set<int> distinct(widths.begin(), widths.end());
  std::string s = "namespace flashjit::sm90 {\n";
  for (int n : distinct) {
    if (n < 8 || n > 256 || n % 8) throw std::logic_error("wgmma N must be a multiple of 8 up to 256");
    s += one_width(type, ptx, n);
  }
  return s + "}  // namespace flashjit::sm90\n";
}

}  // namespace flashjit::wgmma
