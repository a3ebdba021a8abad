#include "reference/decode_grid.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <random>
#include <stdexcept>
#include <tuple>
#include <string>

namespace attnjit::test {

std::string DecodeCase::label() const {
  const auto& o = p.options;
  return fmt::format("D={} Hqo={} Hkv={} kv_len={} q={} kv={} {} {} window={} cap={} lse={} tc={}", p.head_dim,
                     p.num_qo_heads, p.num_kv_heads, p.kv_len, to_string(p.q_dtype), to_string(p.kv_dtype),
                     to_string(o.kv_layout), to_string(o.pos_encoding_mode), o.window_left,
                     o.logits_soft_cap.value_or(0.f), with_lse, o.use_tensor_cores);
}

SingleDecodeProblem d128_decode_problem(int num_qo_heads, int num_kv_heads, int64_t kv_len, DType kv_dtype) {
  SingleDecodeProblem p;
  p.num_qo_heads = num_qo_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = 128;
  p.kv_len = kv_len;
  p.q_dtype = DType::BF16;
  p.kv_dtype = kv_dtype;
  return p;
}

std::vector<DecodeCase> decode_grid() {
  std::vector<DecodeCase> cases;
  std::mt19937 rng(1234);
  const std::vector<std::pair<DType, DType>> dtypes = {
      {DType::F16, DType::F16}, {DType::BF16, DType::BF16}, {DType::BF16, DType::E4M3}, {DType::F16, DType::E5M2}};
  for (int d : {64, 128, 256})
    for (auto [qt, kt] : dtypes)
      for (int group : {1, 3, 4, 8, 16})
        for (int64_t n : {1, 7, 16, 1000, 32768}) {
          DecodeCase c;
          auto& p = c.p;
          p.head_dim = d;
          p.q_dtype = qt;
          p.kv_dtype = kt;
          p.num_kv_heads = 2;
          p.num_qo_heads = 2 * group;
          p.kv_len = n;
          auto& o = p.options;
          o.kv_layout = rng() % 2 ? KVLayout::HND : KVLayout::NHD;
          o.pos_encoding_mode = static_cast<PosEncoding>(rng() % 3);
          if (rng() % 3 == 0) o.window_left = static_cast<int>(rng() % (n + 1));
          if (rng() % 3 == 0) o.logits_soft_cap = 5.f + float(rng() % 30);
          if (rng() % 4 == 0) o.sm_scale = 0.05f + 0.01f * float(rng() % 10);
          if (kt == DType::E4M3 || kt == DType::E5M2) {
            o.k_scale = 0.5f + 0.25f * float(rng() % 6);
            o.v_scale = 0.5f + 0.25f * float(rng() % 6);
          }
          if (o.pos_encoding_mode == PosEncoding::RopeLlama && rng() % 2) {
            o.rope_scale = 2.f;
            o.rope_theta = 5e5f;
          }
          c.with_lse = rng() % 4 != 0;
          o.use_tensor_cores = rng() % 2 == 0;
          cases.push_back(c);
        }
  return cases;
}

std::vector<DecodeCase> decode_grid_reduced() {
  std::vector<DecodeCase> cases;
  const std::pair<DType, DType> dtypes[] = {
      {DType::F16, DType::F16}, {DType::BF16, DType::BF16}, {DType::BF16, DType::E4M3}, {DType::F16, DType::E5M2}};
  const int dims[] = {64, 128, 256}, groups[] = {1, 3, 4, 8, 16};
  const int64_t lengths[] = {1, 7, 1000, 20011};
  // Each axis cycles with its own period, so the 24 cases cover every
  // head dim x dtype pair twice and every other value at least once.
  for (int i = 0; i < 24; ++i) {
    DecodeCase c;
    auto& p = c.p;
    p.head_dim = dims[i % 3];
    std::tie(p.q_dtype, p.kv_dtype) = dtypes[(i / 3) % 4];
    p.num_kv_heads = 2;
    p.num_qo_heads = 2 * groups[i % 5];
    p.kv_len = lengths[i % 4];
    auto& o = p.options;
    o.kv_layout = (i / 2) % 2 ? KVLayout::HND : KVLayout::NHD;
    o.pos_encoding_mode = static_cast<PosEncoding>((i / 4) % 3);
    if (i % 6 == 5) o.window_left = static_cast<int>(p.kv_len / 3);
    if (i % 4 == 1 || i % 7 == 3) o.logits_soft_cap = 30.f;
    if (i % 5 == 2) o.sm_scale = 0.07f;
    if (p.kv_dtype == DType::E4M3 || p.kv_dtype == DType::E5M2) {
      o.k_scale = 0.75f;
      o.v_scale = 1.25f;
    }
    if (o.pos_encoding_mode == PosEncoding::RopeLlama && i % 2) {
      o.rope_scale = 2.f;
      o.rope_theta = 5e5f;
    }
    c.with_lse = i % 5 != 4;
    o.use_tensor_cores = (i / 2) % 3 != 0;
    cases.push_back(c);
  }
  return cases;
}

std::vector<DecodeCase> decode_grid_from_env() {
  const char* v = std::getenv("ATTNJIT_TEST_GRID");
  const std::string grid = v ? v : "";
  if (grid.empty() || grid == "full") return decode_grid();
  if (grid == "reduced") return decode_grid_reduced();
  throw std::invalid_argument("ATTNJIT_TEST_GRID='" + grid + "' is not a grid; allowed: full, reduced");
}

}  // namespace attnjit::test
