// The single-decode parameter grid the operator claims, shared by the GPU
// correctness test and the CPU test that compiles every variant it generates.
#pragma once
#include <string>
#include <vector>

#include "attnjit/single_decode.hpp"

namespace attnjit::test {

struct DecodeCase {
  SingleDecodeProblem p;
  bool with_lse = true;
  std::string label() const;
};

// A single decode at d 128 with bf16 queries, the base that the planner and
// view tests change one field of at a time.
SingleDecodeProblem d128_decode_problem(int num_qo_heads, int num_kv_heads, int64_t kv_len, DType kv_dtype = DType::BF16);

// Every head dim x dtype pair x group size x length, with layout, positional
// encoding, window, soft cap, scales and lse drawn per case (fixed seed), so
// each value of each axis appears many times.
std::vector<DecodeCase> decode_grid();

// 24 cases in which every value of every axis above appears at least once
// (head dim, dtype pair, group size, layout, positional encoding, window, soft
// cap, scales, lse, tensor cores) with lengths that are not multiples of any
// tile (1, 7, 1000, 20011; the last is split and merged), for runs under
// compute-sanitizer, which is 10-100x slower than a plain run.
std::vector<DecodeCase> decode_grid_reduced();

// decode_grid_reduced() when ATTNJIT_TEST_GRID=reduced, decode_grid() when it
// is unset or "full"; any other value throws (a typo must not shrink a run).
std::vector<DecodeCase> decode_grid_from_env();

}  // namespace attnjit::test
