#include "cache/key.hpp"

#include <openssl/evp.h>

#include <cstdint>
#include <stdexcept>

namespace flashjit::cache {

namespace {
std::string to_hex(std::string_view raw) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * raw.size(), '0');
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const auto b = static_cast<unsigned char>(raw[i]);
    s[2 * i] = digits[b >> 4];
    s[2 * i + 1] = digits[b & 15];
  }
  return s;
}
std::string length_bytes(std::uint64_t n) {
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(n >> (8 * i));
  return b;
}
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || !EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr))
    throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Sha256& Sha256::update(std::string_view data) {
  if (!EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size()))
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  return *this;
}

std::string Sha256::finish_raw() {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (!EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d, &n)) throw std::runtime_error("OpenSSL: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(d), n);
}

std::string Sha256::finish_hex() { return to_hex(finish_raw()); }

KeyBuilder& KeyBuilder::add(std::string_view field, std::string_view value) {
  sha_.update(length_bytes(field.size())).update(field).update(length_bytes(value.size())).update(value);
  return *this;
}

Key KeyBuilder::finish() { return Key{sha_.finish_hex()}; }

std::string sha256_hex(std::string_view data) { return Sha256().update(data).finish_hex(); }

}  // namespace flashjit::cache
