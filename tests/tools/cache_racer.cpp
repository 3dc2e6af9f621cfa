// Races other processes on one cache key (tests/cpu/cache_lock_test.cpp spawns 16 of these).
// Usage: cache_racer <cache dir> <key text> <marker dir>
// Calls get_or_create with a produce() that sleeps ~200 ms and leaves the marker file
// "produced-by-<pid>", then prints "<sha256 of the binary> <producer pid from the manifest>".
#include "cache/key.hpp"
#include "cache/store.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  using namespace flashjit::cache;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <cache dir> <key text> <marker dir>\n", argv[0]);
    return 2;
  }
  try {
    StoreOptions o;
    o.dir = argv[1];
    o.lock_timeout_s = 60;
    DiskStore store(o);
    const std::string key_text = argv[2];
    const Key key = KeyBuilder().add("racer", key_text).finish();
    const Entry e = store.get_or_create(key, "racer", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const std::string marker = std::string(argv[3]) + "/produced-by-" + std::to_string(::getpid());
      std::ofstream(marker) << "1";
      Entry made;
      made.manifest = {{"producer", ::getpid()}};
      for (int i = 0; i < 4096; ++i) made.binary += sha256_hex(key_text + std::to_string(i));  // 256 KiB
      return made;
    });
    std::printf("%s %d\n", sha256_hex(e.binary).c_str(), e.manifest.at("producer").get<int>());
    return 0;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "cache_racer: %s\n", ex.what());
    return 1;
  }
}
