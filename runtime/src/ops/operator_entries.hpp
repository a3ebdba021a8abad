// Each operator's face in the registry (ops/registry.cpp lists them): its
// OperatorEntry, defined in ops/<op>/<op>_entry.cpp, and the entry's bench,
// in ops/<op>/<op>_bench.cpp.
#pragma once
#include "ops/operator.hpp"

namespace attnjit::ops {

OperatorEntry single_decode_entry();
std::vector<nlohmann::json> single_decode_bench_problems();
BenchFigures single_decode_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

OperatorEntry batch_decode_entry();
std::vector<nlohmann::json> batch_decode_bench_problems();
BenchFigures batch_decode_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

OperatorEntry single_prefill_entry();
std::vector<nlohmann::json> single_prefill_bench_problems();
BenchFigures single_prefill_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

OperatorEntry batch_prefill_entry();
std::vector<nlohmann::json> batch_prefill_bench_problems();
BenchFigures batch_prefill_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

// One operator, "page", whose problems name the function: "append_paged_kv_cache"
// (the default) or "get_batch_indices_positions".
OperatorEntry page_entry();
std::vector<nlohmann::json> page_bench_problems();
BenchFigures page_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

OperatorEntry merge_state_entry();
std::vector<nlohmann::json> merge_state_bench_problems();
BenchFigures merge_state_bench(const Runtime& rt, const nlohmann::json& problem, int device, void* stream);

}  // namespace attnjit::ops
