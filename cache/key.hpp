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

// Incremental SHA-256, for data that arrives in pieces (a file read in chunks).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256& update(std::string_view data);
  std::string finish_raw();  // the 32 digest bytes
  std::string finish_hex();  // 64 lowercase hex digits

 private:
  void* ctx_;  // EVP_MD_CTX
};

class KeyBuilder {
 public:
  KeyBuilder& add(std::string_view field, std::string_view value);
  Key finish();

 private:
  Sha256 sha_;
};

std::string sha256_hex(std::string_view data);

}  // namespace flashjit::cache
