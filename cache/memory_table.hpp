// A thread-safe in-memory table in front of the disk cache: the first caller for a key builds
// the value, concurrent callers for the same key wait for it, later callers get it at the cost
// of one hash-map lookup. Keys are any hashable, equality-comparable type.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace flashjit::cache {

template <class V, class Key = std::string, class Hash = std::hash<Key>>
class MemoryTable {
 public:
  std::shared_ptr<V> get_or_create(const Key& key, const std::function<std::shared_ptr<V>()>& make) {
    {
      std::shared_lock<std::shared_mutex> read(mutex_);
      auto it = slots_.find(key);
      if (it != slots_.end() && it->second->ready) return it->second->value;
    }
    std::shared_ptr<Slot> slot;
    {
      std::unique_lock<std::shared_mutex> write(mutex_);
      auto& s = slots_[key];
      if (!s) s = std::make_shared<Slot>();
      slot = s;
    }
    std::lock_guard<std::mutex> build(slot->build);  // one builder per key
    if (!slot->ready) {
      slot->value = make();  // on exception the slot stays empty and the next caller retries
      std::unique_lock<std::shared_mutex> write(mutex_);
      slot->ready = true;
    }
    return slot->value;
  }

  std::size_t size() const {
    std::shared_lock<std::shared_mutex> read(mutex_);
    return slots_.size();
  }

  void clear() {
    std::unique_lock<std::shared_mutex> write(mutex_);
    slots_.clear();
  }

 private:
  struct Slot {
    std::mutex build;
    bool ready = false;  // written under the table's write lock, read under its read lock
    std::shared_ptr<V> value;
  };
  mutable std::shared_mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<Slot>, Hash> slots_;
};

}  // namespace flashjit::cache
