// The options structs grew a trailing field (the user variant): an init
// function must never write past the struct of a caller compiled against an
// older header. The header's init macros pass the caller's sizeof; the
// unsized symbols (what older binaries call) write the older layout only.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_batch_decode.h"
#include "support/c_runtime.hpp"

namespace {

constexpr unsigned char kCanary = 0xAB;

// Runs init over a canary-filled buffer of `room` bytes; returns the buffer.
template <class Init>
std::vector<unsigned char> init_into(size_t room, Init init) {
  std::vector<unsigned char> bytes(room + 64, kCanary);
  init(bytes.data());
  return bytes;
}

// The first byte at or after `from` that is not the canary, or bytes.size().
size_t first_written_after(const std::vector<unsigned char>& bytes, size_t from) {
  for (size_t i = from; i < bytes.size(); ++i)
    if (bytes[i] != kCanary) return i;
  return bytes.size();
}

uint32_t struct_size_of(const std::vector<unsigned char>& bytes) {
  uint32_t size;
  std::memcpy(&size, bytes.data(), sizeof size);
  return size;
}

// The three structs that grew, each with its legacy layout's end, init symbols and one default to check.
template <class T>
struct Grown {
  const char* name;
  size_t legacy_bytes;
  void (*legacy)(T*);
  void (*sized)(T*, uint32_t);
};

template <class T>
void check_grown(const Grown<T>& g) {
  SECTION(std::string(g.name) + ": the unsized symbol writes the layout before variants, no further") {
    auto bytes = init_into(g.legacy_bytes, [&](unsigned char* p) { g.legacy(reinterpret_cast<T*>(p)); });
    CHECK(struct_size_of(bytes) == g.legacy_bytes);
    CHECK(first_written_after(bytes, g.legacy_bytes) == bytes.size());
  }
  SECTION(std::string(g.name) + ": the sized init writes the caller's size, at most this library's") {
    for (uint32_t size : {uint32_t(g.legacy_bytes), uint32_t(sizeof(T)), uint32_t(sizeof(T) + 32)}) {
      auto bytes = init_into(size, [&](unsigned char* p) { g.sized(reinterpret_cast<T*>(p), size); });
      const size_t written = size < sizeof(T) ? size : sizeof(T);
      CHECK(struct_size_of(bytes) == written);
      CHECK(first_written_after(bytes, written) == bytes.size());
    }
  }
  SECTION(std::string(g.name) + ": a size that cannot hold struct_size writes nothing") {
    auto bytes = init_into(2, [&](unsigned char* p) { g.sized(reinterpret_cast<T*>(p), 2); });
    CHECK(first_written_after(bytes, 0) == bytes.size());
  }
}

}  // namespace

TEST_CASE("options init functions write only the caller's struct", "[capi][abi]") {
  check_grown(Grown<attnjit_decode_options_t>{"decode", offsetof(attnjit_decode_options_t, rope_theta) + sizeof(float),
                                              &(attnjit_decode_options_init), &attnjit_decode_options_init_sized});
  check_grown(Grown<attnjit_prefill_options_t>{"prefill", offsetof(attnjit_prefill_options_t, backend) + sizeof(int32_t),
                                               &(attnjit_prefill_options_init), &attnjit_prefill_options_init_sized});
  check_grown(Grown<attnjit_batch_decode_plan_options_t>{
      "batch decode plan", offsetof(attnjit_batch_decode_plan_options_t, rope_theta) + sizeof(float),
      &(attnjit_batch_decode_plan_options_init), &attnjit_batch_decode_plan_options_init_sized});
}

// The macro's whole layout over a struct full of garbage: struct_size, a default and a null variant.
template <class T, class Init>
void check_macro_init(Init init) {
  const T o = attnjit::test::initialized<T>(init, 0x5A);
  CHECK(o.window_left == -1);
  CHECK(o.variant == nullptr);
}

TEST_CASE("the init macros set this header's whole layout and its defaults", "[capi][abi]") {
  check_macro_init<attnjit_decode_options_t>([](auto* o) { attnjit_decode_options_init(o); });
  check_macro_init<attnjit_prefill_options_t>([](auto* o) {
    attnjit_prefill_options_init(o);
    CHECK(o->backend == ATTNJIT_PREFILL_BACKEND_AUTO);
  });
  check_macro_init<attnjit_batch_decode_plan_options_t>([](auto* o) {
    attnjit_batch_decode_plan_options_init(o);
    CHECK(o->q_data_type.bits == 16);
  });
}
