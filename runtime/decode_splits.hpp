// How many CTAs split each sequence's keys in a decode launch, from the shape and the device.
// Pure arithmetic, so the CPU tests pin its choices.
#pragma once

#include <cstdint>

namespace flashjit {

struct SplitShape {
  int64_t ctas = 1;       // CTAs without splitting: batch x KV heads x row blocks
  int64_t key_tiles = 1;  // key tiles of the longest visible range (a window's, not seqlen_k's)
  int64_t slots = 132;    // CTAs of the kernel resident at once: SMs x CTAs per SM
};

inline constexpr int kMaxDecodeSplits = 128;
// A split keeps at least this many key tiles: its fixed costs (Q, the ring's fill, the merge)
// stay small beside its loads.
inline constexpr int kMinTilesPerSplit = 4;

// 1 when the CTAs already fill most of one wave, or the keys are too few to split; otherwise
// the smallest split count whose last wave is within 10 % of the best fill any count reaches.
int choose_decode_splits(const SplitShape& shape);

}  // namespace flashjit
