// batch_prefill's face in the operator registry (ops/registry.cpp).
#pragma once
#include "ops/operator.hpp"

namespace attnjit::ops {

OperatorEntry batch_prefill_entry();

// The registry entry's bench (batch_prefill_bench.cpp).
std::vector<nlohmann::json> batch_prefill_bench_problems();
BenchFigures batch_prefill_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

}  // namespace attnjit::ops
