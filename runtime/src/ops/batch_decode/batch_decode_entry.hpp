// batch_decode's face in the operator registry (ops/registry.cpp).
#pragma once
#include "ops/operator.hpp"

namespace attnjit::ops {

OperatorEntry batch_decode_entry();

// The registry entry's bench (batch_decode_bench.cpp).
std::vector<nlohmann::json> batch_decode_bench_problems();
BenchFigures batch_decode_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

}  // namespace attnjit::ops
