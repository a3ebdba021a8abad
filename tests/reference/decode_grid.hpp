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

// Every head dim x dtype pair x group size x length, with layout, positional
// encoding, window, soft cap, scales and lse drawn per case (fixed seed), so
// each value of each axis appears many times.
std::vector<DecodeCase> decode_grid();

}  // namespace attnjit::test
