// merge_state's face in the operator registry (ops/registry.cpp).
#pragma once
#include "ops/operator.hpp"

namespace attnjit::ops {

OperatorEntry merge_state_entry();

// The registry entry's bench (merge_state_bench.cpp).
std::vector<nlohmann::json> merge_state_bench_problems();
BenchFigures merge_state_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

}  // namespace attnjit::ops
