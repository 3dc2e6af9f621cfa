#include "cache/key.hpp"

#include <openssl/evp.h>

#include <cstdint>
#include <stdexcept>

namespace flashjit::cache {

namespace {
std::string to_hex(const unsigned char* d, unsigned n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (unsigned i = 0; i < n; ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}
void update_length(EVP_MD_CTX* ctx, uint64_t n) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(n >> (8 * i));
  EVP_DigestUpdate(ctx, b, 8);
}
}  // namespace

KeyBuilder::KeyBuilder() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || !EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr))
    throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
}

KeyBuilder::~KeyBuilder() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

KeyBuilder& KeyBuilder::add(std::string_view field, std::string_view value) {
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  update_length(ctx, field.size());
  EVP_DigestUpdate(ctx, field.data(), field.size());
  update_length(ctx, value.size());
  EVP_DigestUpdate(ctx, value.data(), value.size());
  return *this;
}

Key KeyBuilder::finish() {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d, &n);
  return Key{to_hex(d, n)};
}

std::string sha256_hex(std::string_view data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (!EVP_Digest(data.data(), data.size(), d, &n, EVP_sha256(), nullptr))
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  return to_hex(d, n);
}

}  // namespace flashjit::cache
