// TMA descriptors are memoised per thread: a memoised encoding must be the driver's own, and a
// change in any field (here the address and a stride) must give a new one.
#include "gpu_test_support.hpp"
#include "runtime/device.hpp"
#include "runtime/tensor_map.hpp"

#include <cstring>
#include <thread>

namespace flashjit {
namespace {

TmaTensor sample(uintptr_t address) {
  return TmaTensor{reinterpret_cast<const void*>(address), DType::bf16, 1024, 128, 8, 2, 8 * 128, 128,
                   1024 * 8 * 128};
}

bool same(const TmaDescriptor& a, const TmaDescriptor& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(TensorMap, MemoisedEncodingIsTheDriversOwn) {
  FLASHJIT_REQUIRE_GPU();
  current_device();  // the encoder needs a current context
  const TmaTensor t = sample(0x7f0000000000);
  const TmaDescriptor first = encode_tma(t, 128, 2);
  const TmaDescriptor again = encode_tma(t, 128, 2);
  TmaDescriptor fresh;  // a new thread starts with nothing memoised: the driver encodes it
  std::thread([&] {
    current_device();
    fresh = encode_tma(t, 128, 2);
  }).join();
  EXPECT_TRUE(same(first, again));
  EXPECT_TRUE(same(first, fresh));
}

TEST(TensorMap, EveryFieldTakesPartInTheMemo) {
  FLASHJIT_REQUIRE_GPU();
  current_device();
  const TmaTensor t = sample(0x7f0000000000);
  const TmaDescriptor base = encode_tma(t, 128, 2);
  TmaTensor moved = sample(0x7f0000100000);
  TmaTensor restrided = t;
  restrided.row_stride = 16 * 128;
  EXPECT_FALSE(same(base, encode_tma(moved, 128, 2)));
  EXPECT_FALSE(same(base, encode_tma(restrided, 128, 2)));
  EXPECT_FALSE(same(base, encode_tma(t, 64, 2)));
  EXPECT_TRUE(same(base, encode_tma(t, 128, 2)));  // still the first encoding after the others
}

}  // namespace
}  // namespace flashjit
