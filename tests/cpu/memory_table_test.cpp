// The in-memory table in front of the disk cache: one build per key however many callers race,
// a failed build is retried, and keys may be any hashable type (the runtime uses configs).
#include "cache/memory_table.hpp"
#include "generator/config.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace flashjit::cache {
namespace {

TEST(MemoryTable, RacingCallersBuildOnce) {
  MemoryTable<int> table;
  std::atomic<int> builds{0};
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<int>> got(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      got[i] = table.get_or_create("k", [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return std::make_shared<int>(42);
      });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(builds.load(), 1);
  for (const auto& g : got) EXPECT_EQ(g, got[0]);
}

TEST(MemoryTable, FailedBuildIsRetried) {
  MemoryTable<int> table;
  EXPECT_THROW(table.get_or_create("k", []() -> std::shared_ptr<int> { throw std::runtime_error("nvrtc"); }),
               std::runtime_error);
  EXPECT_EQ(*table.get_or_create("k", [] { return std::make_shared<int>(7); }), 7);
}

TEST(MemoryTable, ConfigKeysCompareEveryField) {
  MemoryTable<int, Config, ConfigHash> table;
  Config a;
  Config b = a;
  b.tuning.pair_cta = true;  // a field the hash does not read
  EXPECT_EQ(*table.get_or_create(a, [] { return std::make_shared<int>(1); }), 1);
  EXPECT_EQ(*table.get_or_create(b, [] { return std::make_shared<int>(2); }), 2);
  EXPECT_EQ(*table.get_or_create(a, [] { return std::make_shared<int>(3); }), 1);
  EXPECT_EQ(table.size(), 2u);
}

}  // namespace
}  // namespace flashjit::cache
