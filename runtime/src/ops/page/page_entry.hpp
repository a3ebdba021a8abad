// The page helpers' face in the operator registry (ops/registry.cpp): one
// operator, "page", whose problems name the function, "append_paged_kv_cache"
// (the default) or "get_batch_indices_positions".
#pragma once
#include "ops/operator.hpp"

namespace attnjit::ops {

OperatorEntry page_entry();

// The registry entry's bench (page_bench.cpp).
std::vector<nlohmann::json> page_bench_problems();
BenchFigures page_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

}  // namespace attnjit::ops
