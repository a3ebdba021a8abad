// Block sparsity in the batch prefill wrappers' plans (issue 31 item 2)
// without a GPU: the classification's rows are every request's query tiles
// in request order (request b's from block_mask_row_indptr[b]), each with its
// request, tile and lengths; slots by heads_vary; the stride from the longest
// KV; the scratch and plan-memory regions; the launch first in the JSON; the
// refusal of CUDA-graph mode by name; every backend, fa3_ws too (auto's
// Hopper skeleton at head_dim 128); the prewarm list.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "attnjit/error.hpp"
#include "attnjit/variant.hpp"
#include "block_mask_params.h"
#include "ops/batch_prefill/batch_prefill_kernels.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "ops/batch_prefill/batch_prefill_problem.hpp"
#include "spec/block_mask_kernel.hpp"
#include "spec/kernel_spec.hpp"
#include "support/error_capture.hpp"
#include "support/prefill_problems.hpp"

namespace attnjit::test {

namespace {

std::shared_ptr<const Variant> documents(bool heads_vary = true) {
  VariantSource s;
  s.mask_mod = "return p.doc_at(b, q) == p.doc_at(b, kv) && kv <= q + p.offset_at(b);";
  s.params = {{"doc", VariantParamType::I32, 2}, {"offset", VariantParamType::I32, 1}};
  s.block_sparse = true;
  s.heads_vary = heads_vary;
  return std::make_shared<const Variant>(s);
}

// Ragged lengths no multiple of a tile, a request of one token and one without KV; GQA group 3.
ops::BatchPrefillShape ragged(const std::string& backend, bool heads_vary = true) {
  ops::BatchPrefillShape s = batch_prefill_shape({5, 295, 1, 130}, {5, 700, 1, 0}, 12, 4, 128);
  s.options.causal = false;  // the mask_mod decides every pair
  s.options.backend = backend;
  s.options.variant = documents(heads_vary);
  return s;
}

}  // namespace

TEST_CASE("batch prefill plans the classification over every request's query tiles",
          "[block_sparse][planner][batch_prefill]") {
  for (const std::string backend : {"fa2", "fa3", "fa3_ws", "auto"})
    for (bool heads_vary : {true, false}) {
      INFO("backend=" << backend << " heads_vary=" << heads_vary);
      const ops::BatchPrefillShape s = ragged(backend, heads_vary);
      const auto L = ops::plan_batch_prefill(s, {});
      REQUIRE(L.block_mask);
      const PrefillKernel& k = prefill_of(L.prefill);
      CHECK(k.warp_specialized == (backend == "fa3_ws" || backend == "auto"));  // auto on sm_90a, d 128: fa3_ws
      CHECK(k.variant.user->block_sparse);
      CHECK(L.block_mask->spec.as<BlockMaskKernel>()->user == k.variant.user);
      const int tq = k.tile_q(), tkv = k.tile_kv(), group = 3;
      std::vector<int32_t> indptr = {0}, rows;
      for (size_t b = 0; b + 1 < s.qo_indptr.size(); ++b) {
        const int32_t qo = s.qo_indptr[b + 1] - s.qo_indptr[b], tiles = (qo * group + tq - 1) / tq;
        for (int32_t t = 0; t < tiles; ++t) rows.insert(rows.end(), {int32_t(b), t, qo, s.kv_lens[b]});
        indptr.push_back(indptr.back() + tiles);
      }
      CHECK(L.block_mask_row_indptr == indptr);
      CHECK(L.block_mask_rows == rows);
      CHECK(L.block_mask->shape.grid[0] == uint32_t(indptr.back()));
      CHECK(L.block_mask_slots == (heads_vary ? 4 : 1));
      CHECK(L.block_mask->shape.grid[1] == uint32_t(L.block_mask_slots));
      CHECK(L.block_mask->shape.threads == kernels::kBlockMaskThreads);
      CHECK(L.block_mask_stride == (700 + tkv - 1) / tkv);
      REQUIRE(L.workspace.has("block_mask"));
      CHECK(L.workspace.region("block_mask").bytes ==
            size_t(kernels::block_mask_entries(indptr.back(), L.block_mask_slots, L.block_mask_stride)) * 4);
      CHECK(L.workspace.region("block_mask_rows").bytes == rows.size() * 4);
      CHECK(L.workspace.region("block_mask_row_indptr").bytes == indptr.size() * 4);
      CHECK(L.to_json().at("kernels").at(0).at("role") == "block_mask");
    }
}

TEST_CASE("paged batch prefill plans the classification over the requests' KV lengths",
          "[block_sparse][planner][batch_prefill]") {
  // Page size 16, last pages partial: the KV lengths the wrapper computes from them.
  ops::BatchPrefillShape s = batch_prefill_shape({17, 1}, {16 * 3 + 5, 16 * 0 + 9}, 12, 4, 128);
  s.options.causal = false;
  s.options.backend = "fa2";
  s.options.variant = documents();
  s.source = KVSource::Paged;
  s.num_page_indices = 5;
  const auto L = ops::plan_batch_prefill(s, {});
  REQUIRE(L.block_mask);
  const PrefillKernel& k = prefill_of(L.prefill);
  CHECK(k.kv_source == KVSource::Paged);
  CHECK(L.block_mask_rows.at(2) == 17);
  CHECK(L.block_mask_rows.at(3) == 53);
  CHECK(L.block_mask_rows.at(L.block_mask_rows.size() - 1) == 9);
  CHECK(L.block_mask_stride == (53 + k.tile_kv() - 1) / k.tile_kv());
}

TEST_CASE("batch prefill refuses a block-sparse variant in CUDA-graph mode, by name",
          "[block_sparse][planner][batch_prefill]") {
  ops::BatchPrefillShape graph = ragged("auto");
  graph.graph_max_batch = 8;
  CHECK_THAT(error_of([&] { ops::plan_batch_prefill(graph, {}); }, Status::Unsupported),
             Catch::Contains("use_cuda_graph=true") && Catch::Contains("block_sparse=true"));
  // Without block sparsity nothing is planned for it.
  ops::BatchPrefillShape plain = ragged("fa2");
  VariantSource dense = plain.options.variant->source();
  dense.block_sparse = false;
  plain.options.variant = std::make_shared<const Variant>(dense);
  const auto L = ops::plan_batch_prefill(plain, {});
  CHECK_FALSE(L.block_mask);
  CHECK_FALSE(L.workspace.has("block_mask"));
  CHECK_FALSE(L.workspace.has("block_mask_rows"));
}

TEST_CASE("batch prefill's prewarm list carries the classification kernel", "[block_sparse][batch_prefill]") {
  ops::BatchPrefillProblem p;
  p.num_qo_heads = 12;
  p.num_kv_heads = 4;
  p.head_dim = 128;
  p.options.variant = documents();
  bool listed = false, ws = false;
  for (const KernelSpec& k : ops::batch_prefill_kernels(p)) {
    listed = listed || k.as<BlockMaskKernel>();
    if (const auto* pk = k.as<PrefillKernel>()) ws = ws || pk->warp_specialized;
  }
  CHECK(listed);
  CHECK(ws);  // auto's Hopper skeleton
  p.use_cuda_graph = true;
  p.max_batch_size = 4;
  CHECK_THAT(error_of([&] { ops::batch_prefill_kernels(p); }, Status::Unsupported),
             Catch::Contains("use_cuda_graph=true"));
}

}  // namespace attnjit::test
