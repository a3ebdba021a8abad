// What the engine hands NVRTC for a unit, which is also what its cache key
// hashes: the engine's options, "--no-cache" where NVRTC (12.9 on) keeps a
// compile cache of its own (so attnjit's disk cache is the only one and a
// cold compile is one), then the unit's own options (a user variant's).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "codegen.hpp"
#include "cuda/nvrtc.hpp"
#include "spec/kernel_spec.hpp"
#include "support/temp_cache_engine.hpp"

namespace attnjit::test {

namespace {

bool has(const std::vector<std::string>& v, const std::string& o) { return std::find(v.begin(), v.end(), o) != v.end(); }

PrefillKernel prefill_kernel(bool user) {
  PrefillKernel k;
  k.head_dim = 128;
  k.variant.q_dtype = k.variant.kv_dtype = k.variant.o_dtype = DType::BF16;
  if (user) {
    VariantSource s;
    s.score_mod = "return s * p.t;";
    s.params = {{"t", VariantParamType::F32, 0}};
    k.variant.user = std::make_shared<const VariantSource>(s);
  }
  return k;
}

}  // namespace

TEST_CASE("the engine turns NVRTC's own cache off and appends a unit's options; the key hashes the same list",
          "[engine][nvrtc_options]") {
  ATTNJIT_REQUIRE_NVRTC();
  TempCacheEngine t;
  const auto& nvrtc = cuda::nvrtc_info("");
  const bool nvrtc_caches = nvrtc.major > 12 || (nvrtc.major == 12 && nvrtc.minor >= 9);
  INFO("NVRTC " << nvrtc.version());

  const TranslationUnit plain = generate(prefill_kernel(false)), user = generate(prefill_kernel(true));
  const std::vector<std::string> plain_options = t.engine.unit_options(plain);
  CHECK(plain_options.front() == "-std=c++17");
  CHECK(has(plain_options, "--no-cache") == nvrtc_caches);
  CHECK_FALSE(has(plain_options, "--prec-div=false"));

  const std::vector<std::string> user_options = t.engine.unit_options(user);
  CHECK(has(user_options, "--no-cache") == nvrtc_caches);
  REQUIRE_FALSE(user_options.empty());
  CHECK(user_options.back() == "--prec-div=false");  // the unit's own, last

  // The key's option list is exactly what NVRTC gets, less the arch.
  const KeyInputs in = t.engine.key_inputs(user, "sm_90a");
  CHECK(has(in.options, "--frandom-seed=1"));
  for (const auto& o : user_options) CHECK(has(in.options, o));
  CHECK(std::none_of(in.options.begin(), in.options.end(),
                     [](const std::string& o) { return o.rfind("--gpu-architecture=", 0) == 0; }));
}

}  // namespace attnjit::test
