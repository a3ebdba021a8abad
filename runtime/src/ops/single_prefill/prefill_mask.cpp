// Packing a flattened boolean mask into FlashInfer's bit order (packbits,
// bitorder "little"): mask element i is bit i % 8 of byte i / 8.
#include <cstdint>
#include <vector>

#include "attnjit/prefill.hpp"

namespace attnjit {

std::vector<uint8_t> pack_custom_mask(const uint8_t* mask, size_t n) {
  std::vector<uint8_t> out((n + 7) / 8, 0);
  for (size_t i = 0; i < n; ++i)
    if (mask[i]) out[i / 8] |= uint8_t(1u << (i % 8));
  return out;
}

std::vector<uint8_t> pack_custom_mask(const std::vector<bool>& mask) {
  std::vector<uint8_t> out((mask.size() + 7) / 8, 0);
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) out[i / 8] |= uint8_t(1u << (i % 8));
  return out;
}

}  // namespace attnjit
