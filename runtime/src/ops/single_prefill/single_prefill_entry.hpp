// single_prefill's face in the operator registry (ops/registry.cpp).
#pragma once
#include "ops/operator.hpp"

namespace attnjit::ops {

OperatorEntry single_prefill_entry();

// The registry entry's bench (single_prefill_bench.cpp).
std::vector<nlohmann::json> single_prefill_bench_problems();
BenchFigures single_prefill_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

}  // namespace attnjit::ops
