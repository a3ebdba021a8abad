#include "ops/merge_state/merge_state_problem.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <set>
#include <string>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"
#include "spec/json_fields.hpp"

namespace attnjit::ops {

namespace {

MergeFunction parse_function(const std::string& s) {
  for (auto f : {MergeFunction::MergeState, MergeFunction::MergeStateInPlace, MergeFunction::MergeStates})
    if (s == to_string(f)) return f;
  invalid(
      fmt::format("problem.function='{}' is not allowed; allowed: 'merge_state', 'merge_state_in_place', "
                  "'merge_states'",
                  s));
}

}  // namespace

const char* to_string(MergeFunction f) noexcept {
  switch (f) {
    case MergeFunction::MergeState:
      return "merge_state";
    case MergeFunction::MergeStateInPlace:
      return "merge_state_in_place";
    case MergeFunction::MergeStates:
      return "merge_states";
  }
  return "?";
}

MergeStateProblem merge_state_problem_from_json(const nlohmann::json& j) {
  problem_json::require_keys(
      j, {"op", "function", "head_dim", "dtype", "num_heads", "seq_len", "num_states", "device"}, "merge_state");
  MergeStateProblem p;
  p.function = parse_function(problem_json::string_field(j, "function", "merge_state"));
  p.head_dim = problem_json::int_field(j, "head_dim");
  p.dtype = parse_dtype(problem_json::string_field(j, "dtype", "bfloat16"), "problem.dtype");
  if (j.contains("num_heads")) {
    p.num_heads = problem_json::int_field(j, "num_heads");
    if (p.num_heads < 1) invalid(fmt::format("problem.num_heads={} is not allowed; it must be >= 1", p.num_heads));
  }
  if (j.contains("seq_len")) {
    p.seq_len = problem_json::int64_field(j, "seq_len");
    if (p.seq_len < 0) invalid(fmt::format("problem.seq_len={} is not allowed; it must be >= 0", p.seq_len));
  }
  p.num_states = problem_json::int_field(j, "num_states", p.num_states);
  p.device = problem_json::int_field(j, "device", 0);
  validate(p);
  return p;
}

nlohmann::json to_json(const MergeStateProblem& p) {
  nlohmann::json j = {{"op", "merge_state"},
                      {"function", to_string(p.function)},
                      {"head_dim", p.head_dim},
                      {"dtype", to_string(p.dtype)}};
  if (p.num_heads > 0) j["num_heads"] = p.num_heads;
  if (p.seq_len >= 0) j["seq_len"] = p.seq_len;
  if (p.function == MergeFunction::MergeStates) j["num_states"] = p.num_states;
  if (p.device != 0) j["device"] = p.device;
  return j;
}

void validate(const MergeStateProblem& p) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16)
    invalid(fmt::format("dtype={} is not supported; allowed: float16, bfloat16", to_string(p.dtype)));
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    throw Error(Status::Unsupported, fmt::format("head_dim={} is not supported; supported: 64, 128, 256", p.head_dim));
  if (p.function == MergeFunction::MergeStates && p.num_states < 1)
    invalid(fmt::format("num_states={} is not allowed; merge_states needs >= 1", p.num_states));
  if (p.function != MergeFunction::MergeStates && p.num_states != 2)
    invalid(
        fmt::format("num_states={} is not allowed with function='{}', which merges 2 states; give "
                    "function='merge_states' for another count",
                    p.num_states, to_string(p.function)));
  if (p.has_sizes() && p.seq_len > INT32_MAX / p.num_heads)
    invalid(fmt::format("seq_len * num_heads={} is not allowed; it must be <= {}", p.seq_len * p.num_heads, INT32_MAX));
  if (p.device < 0) invalid(fmt::format("device={} is not allowed; it must be >= 0", p.device));
}

MergeKernel merge_state_kernel(int head_dim, DType dtype) {
  MergeKernel k;
  k.head_dim = head_dim;
  k.o_dtype = dtype;
  k.in_dtype = dtype;
  return k;
}

LaunchShape merge_state_shape(const MergeKernel& k, int64_t rows) {
  LaunchShape s;
  s.threads = static_cast<uint32_t>(k.threads());
  s.grid[0] = static_cast<uint32_t>(rows);
  return s;
}

}  // namespace attnjit::ops
