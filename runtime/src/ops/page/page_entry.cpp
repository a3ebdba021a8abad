#include "ops/operator_entries.hpp"

#include "ops/page/page_planner.hpp"
#include "ops/page/page_problem.hpp"

namespace attnjit::ops {

namespace {

nlohmann::json explain(const nlohmann::json& problem, const DeviceFigures& device) {
  const PageProblem p = page_problem_from_json(problem);
  return std::visit(
      [&](const auto& q) {
        nlohmann::json j;
        if constexpr (std::is_same_v<std::decay_t<decltype(q)>, PageAppendProblem>)
          j = plan_page_append(q, device).to_json();
        else
          j = plan_batch_positions(q, device).to_json();
        j["problem"] = to_json(q);
        return j;
      },
      p);
}

nlohmann::json append_problem(const char* dtype, int heads, int head_dim, const char* layout) {
  return {{"op", "page"}, {"function", "append_paged_kv_cache"}, {"nnz", 64},       {"batch_size", 4},
          {"num_kv_heads", heads}, {"head_dim", head_dim},        {"page_size", 16}, {"kv_dtype", dtype},
          {"kv_layout", layout}};
}

nlohmann::json positions_problem(int batch, int64_t nnz) {
  return {{"op", "page"}, {"function", "get_batch_indices_positions"}, {"batch_size", batch}, {"nnz", nnz}};
}

// Every element width (the append's only code parameter) through each of its
// dtypes and both layouts, and the positions kernel.
std::vector<nlohmann::json> variant_grid() {
  std::vector<nlohmann::json> out;
  for (const char* dtype : {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})
    for (const char* layout : {"NHD", "HND"}) out.push_back(append_problem(dtype, 8, 128, layout));
  out.push_back(positions_problem(4, 64));
  return out;
}

// A deployment appends in 16-bit or fp8 and makes the positions.
std::vector<nlohmann::json> model_problems(const ModelShape& m) {
  std::vector<nlohmann::json> out;
  for (const char* dtype : {"bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"})
    out.push_back(append_problem(dtype, m.num_kv_heads, m.head_dim, "NHD"));
  out.push_back(positions_problem(1, 1));
  return out;
}

}  // namespace

OperatorEntry page_entry() {
  return {"page",
          "FlashInfer's page helpers: append_paged_kv_cache writes K/V rows into a paged cache, "
          "get_batch_indices_positions maps a ragged append to requests and positions (flashinfer.page)",
          kernels_from_json<page_problem_from_json, page_kernels>,
          explain,
          variant_grid,
          model_problems,
          page_bench_problems,
          page_bench};
}

}  // namespace attnjit::ops
