// The reduced decode grid (ATTNJIT_TEST_GRID=reduced, used under
// compute-sanitizer) must still cover every value of every axis, or the
// sanitizer run would silently skip a kernel variant.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "ops/single_decode/single_decode_planner.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "reference/decode_grid.hpp"

namespace attnjit::test {

TEST_CASE("the reduced decode grid covers every axis value and every kernel variant of the full grid", "[grid]") {
  const auto full = decode_grid(), reduced = decode_grid_reduced();
  CHECK(reduced.size() <= 32);
  auto axes = [](const std::vector<DecodeCase>& cases) {
    std::set<std::string> seen;
    for (const auto& c : cases) {
      const auto& p = c.p;
      const auto& o = p.options;
      seen.insert("d" + std::to_string(p.head_dim));
      seen.insert(std::string("dtype ") + to_string(p.q_dtype) + "/" + to_string(p.kv_dtype));
      seen.insert("group " + std::to_string(p.num_qo_heads / p.num_kv_heads));
      seen.insert(std::string("layout ") + to_string(o.kv_layout));
      seen.insert(std::string("pos ") + to_string(o.pos_encoding_mode));
      seen.insert(std::string("window ") + (o.window_left >= 0 ? "yes" : "no"));
      seen.insert(std::string("cap ") + (o.logits_soft_cap ? "yes" : "no"));
      seen.insert(std::string("sm_scale ") + (o.sm_scale ? "yes" : "no"));
      seen.insert(std::string("lse ") + (c.with_lse ? "yes" : "no"));
      seen.insert(std::string("tc ") + (o.use_tensor_cores ? "yes" : "no"));
      // The kernel skeleton the planner picks, and whether the KV is split (merge kernel).
      const auto L = ops::plan_single_decode(p, ops::DeviceFigures{});
      const DecodeKernel& k = *L.decode.spec.as<DecodeKernel>();
      seen.insert(std::string("skeleton ") + (k.tensor_cores ? "mma" : "cuda cores") + " d" + std::to_string(p.head_dim));
      seen.insert("heads_per_cta " + std::to_string(k.heads_per_cta) + (k.tensor_cores ? " mma" : ""));
      seen.insert(std::string("merge ") + (L.merge ? "yes" : "no"));
    }
    return seen;
  };
  const auto want = axes(full), got = axes(reduced);
  for (const auto& v : want) {
    INFO("axis value of the full grid missing from the reduced one: " << v);
    CHECK(got.count(v) == 1);
  }
  for (const auto& c : reduced) {
    INFO(c.label());
    CHECK(c.p.kv_len % 16 != 0);  // never a whole number of tiles
    CHECK_NOTHROW(ops::validate(c.p));
  }
}

}  // namespace attnjit::test
