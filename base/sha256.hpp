// SHA-256 through OpenSSL's libcrypto (EVP), hex-encoded.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace attnjit {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Length-prefixed field, so that ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view s);
  std::string hex();  // finalizes; the object must not be updated afterwards

 private:
  void* ctx_;
};

std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(std::string_view s) { return sha256_hex(s.data(), s.size()); }

}  // namespace attnjit
