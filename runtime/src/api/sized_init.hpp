// The options structs' init functions write only the bytes the caller's
// struct has: each header's init macro passes the caller's sizeof, so a
// library whose struct grew at the end never writes past an older caller's.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace attnjit::capi {

// Copies the first `size` bytes (at most sizeof(T)) of `defaults` to *out,
// with struct_size set to the bytes written. A size too small to hold
// struct_size writes nothing (the init functions are void; the entry points
// then refuse the struct by its struct_size).
template <class T>
void init_sized(T* out, T defaults, uint32_t size) {
  if (out == nullptr || size < sizeof(defaults.struct_size)) return;
  const uint32_t bytes = std::min<uint32_t>(size, uint32_t(sizeof(T)));
  defaults.struct_size = bytes;
  std::memcpy(out, &defaults, bytes);
}

}  // namespace attnjit::capi
