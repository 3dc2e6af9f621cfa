// Content-addressed cache keys: SHA-256 (OpenSSL) over named, length-prefixed fields, so that
// no two different field lists can produce the same byte stream.
#pragma once

#include <string>
#include <string_view>

namespace flashjit::cache {

struct Key {
  std::string hex;  // 64 lowercase hex digits
  bool operator==(const Key& o) const { return hex == o.hex; }
};

class KeyBuilder {
 public:
  KeyBuilder();
  ~KeyBuilder();
  KeyBuilder(const KeyBuilder&) = delete;
  KeyBuilder& operator=(const KeyBuilder&) = delete;
  KeyBuilder& add(std::string_view field, std::string_view value);
  Key finish();

 private:
  void* ctx_;  // EVP_MD_CTX
};

std::string sha256_hex(std::string_view data);

}  // namespace flashjit::cache
