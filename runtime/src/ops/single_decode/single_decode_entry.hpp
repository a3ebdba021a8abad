// single_decode's face in the operator registry (ops/registry.cpp).
#pragma once
#include "ops/operator.hpp"

namespace attnjit::ops {

OperatorEntry single_decode_entry();

// The registry entry's bench (single_decode_bench.cpp).
std::vector<nlohmann::json> single_decode_bench_problems();
BenchFigures single_decode_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

}  // namespace attnjit::ops
