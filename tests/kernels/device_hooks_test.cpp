// Host checks of device helpers that compile as plain C++ (platform.cuh
// makes ATTNJIT_DEVICE `inline` off the device): the page-size division of
// the paged KV sources and the variant's mask hook.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "fast_divmod.h"
#include "mask.cuh"

using namespace attnjit;

TEST_CASE("FastDivmod matches / and % over the row-position range", "[kernels]") {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (uint32_t s = 9; s < 31; ++s) divisors.insert(divisors.end(), {(1u << s) - 1, 1u << s, (1u << s) + 1});
  divisors.insert(divisors.end(), {1000003u, 0x7fffffffu});
  uint32_t x = 12345;  // a fixed xorshift stream of numerators
  for (uint32_t d : divisors) {
    const FastDivmod f(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, 0x7fffffffu, 0x7ffffffeu};
    for (int i = 0; i < 200; ++i) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      ns.push_back(x & 0x7fffffffu);
      ns.push_back(x % (64 * d + 1));
    }
    for (uint32_t n : ns) {
      if (n > 0x7fffffffu) continue;
      uint32_t q, r;
      f.divmod(n, q, r);
      INFO("n=" << n << " d=" << d);
      REQUIRE(q == n / d);
      REQUIRE(r == n % d);
    }
  }
}

namespace {

kernels::VariantParams params_with(int window_left, const uint8_t* bits = nullptr, const int32_t* indptr = nullptr) {
  kernels::VariantParams p{};
  p.window_left = window_left;
  p.custom_mask = bits;
  p.custom_mask_indptr = indptr;
  return p;
}

}  // namespace

TEST_CASE("mask hook: causal and sliding window align the queries to the end of the keys", "[kernels]") {
  const int qo_len = 3, kv_len = 10;  // queries at positions 7, 8, 9
  const Mask<kernels::kMaskCausal, true> causal_window(params_with(2), 0, qo_len, kv_len);
  const Mask<kernels::kMaskCausal, true> causal_no_window(params_with(-1), 0, qo_len, kv_len);
  const Mask<kernels::kMaskNone, true> window_only(params_with(2), 0, qo_len, kv_len);
  const Mask<kernels::kMaskNone, false> none(params_with(2), 0, qo_len, kv_len);
  for (int q = kv_len - qo_len; q < kv_len; ++q)
    for (int k = 0; k < kv_len; ++k) {
      INFO("q_pos=" << q << " k_pos=" << k);
      CHECK(causal_window.keep(q, k) == (k <= q && k >= q - 2));
      CHECK(causal_no_window.keep(q, k) == (k <= q));
      CHECK(window_only.keep(q, k) == (k >= q - 2));
      CHECK(none.keep(q, k));
    }
}

// The run of kept keys (mask.cuh's KeyRun) that the tensor-core skeletons
// test instead of keep(): the same pairs, for every window (none, 0, inside,
// past the start) and key end (the request's, a chunk's, a query's own).
template <int Mode, bool Window>
void check_key_run(int window_left) {
  const int qo_len = 6, kv_len = 20;
  const Mask<Mode, Window> m(params_with(window_left), 0, qo_len, kv_len);
  for (int q = kv_len - qo_len; q < kv_len; ++q)
    for (int kv_end : {1, 7, q, q + 1, kv_len}) {
      const KeyRun run = m.keys_kept(q, kv_end);
      CHECK(run.count >= 0);
      for (int k = 0; k < kv_len + 3; ++k) {
        INFO("mode=" << Mode << " window_left=" << window_left << " q_pos=" << q << " kv_end=" << kv_end
                     << " k_pos=" << k);
        CHECK(run.has(k) == (k < kv_end && m.keep(q, k)));
      }
    }
}

TEST_CASE("mask hook: causal and window masks as one run of keys a row", "[kernels]") {
  for (int w : {-1, 0, 1, 3, 13, 19, 40}) {
    check_key_run<kernels::kMaskCausal, true>(w);
    check_key_run<kernels::kMaskNone, true>(w);
  }
  check_key_run<kernels::kMaskCausal, false>(-1);
  check_key_run<kernels::kMaskNone, false>(-1);
}

TEST_CASE("mask hook: custom masks read FlashInfer's packed bit order", "[kernels]") {
  // Two requests: [2 x 5] at byte 0 and [1 x 9] at byte 2 (blocks start on
  // bytes, bits little-endian within a byte, rows back to back).
  const bool want0[2][5] = {{1, 0, 1, 1, 0}, {0, 1, 1, 0, 1}};
  const bool want1[9] = {1, 1, 0, 0, 1, 0, 1, 1, 1};
  std::vector<uint8_t> bits(4, 0);
  auto set = [&](int byte0, int bit) {
    if (bit >= 0) bits[byte0 + bit / 8] |= uint8_t(1u << (bit % 8));
  };
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) set(0, want0[i][j] ? i * 5 + j : -1);
  for (int j = 0; j < 9; ++j) set(2, want1[j] ? j : -1);
  const int32_t indptr[] = {0, 2, 4};
  const kernels::VariantParams p = params_with(-1, bits.data(), indptr);

  const Mask<kernels::kMaskCustom, false> m0(p, 0, 2, 5);  // queries at positions 3, 4
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) CHECK(m0.keep(3 + i, j) == want0[i][j]);
  const Mask<kernels::kMaskCustom, false> m1(p, 1, 1, 9);  // the decode query at 8
  for (int j = 0; j < 9; ++j) CHECK(m1.keep(8, j) == want1[j]);
  // With the window as well, a key must pass both.
  const kernels::VariantParams pw = params_with(3, bits.data(), indptr);
  const Mask<kernels::kMaskCustom, true> m1w(pw, 1, 1, 9);
  for (int j = 0; j < 9; ++j) CHECK(m1w.keep(8, j) == (want1[j] && j >= 5));
}
