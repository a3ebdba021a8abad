// The prefill problems the CPU planner tests start from, built from what
// varies between them: lengths, heads, head_dim and one dtype for q and K/V.
// A test sets its own options (mask, RoPE, backend, source) on top, and reads
// the prefill kernel a plan chose with prefill_of.
#pragma once
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "attnjit/prefill.hpp"
#include "ops/batch_prefill/batch_prefill_planner.hpp"
#include "spec/prefill_kernel.hpp"

namespace attnjit::test {

inline SinglePrefillProblem single_prefill_problem(int64_t qo_len, int64_t kv_len, int hq, int hk, int d,
                                                   DType dt = DType::BF16) {
  SinglePrefillProblem p;
  p.qo_len = qo_len;
  p.kv_len = kv_len;
  p.num_qo_heads = hq;
  p.num_kv_heads = hk;
  p.head_dim = d;
  p.q_dtype = p.kv_dtype = dt;
  return p;
}

// qo_indptr from the query lengths; causal, the rest as BatchPrefillShape's defaults.
inline ops::BatchPrefillShape batch_prefill_shape(const std::vector<int32_t>& qo_lens, std::vector<int32_t> kv_lens,
                                                  int hq, int hk, int d, DType dt = DType::BF16) {
  ops::BatchPrefillShape s;
  s.qo_indptr = {0};
  for (int32_t q : qo_lens) s.qo_indptr.push_back(s.qo_indptr.back() + q);
  s.kv_lens = std::move(kv_lens);
  s.num_qo_heads = hq;
  s.num_kv_heads = hk;
  s.head_dim = d;
  s.q_dtype = s.kv_dtype = dt;
  s.options.causal = true;
  return s;
}

// The kernel spec of a plan's prefill launch, REQUIREd to be a prefill kernel.
inline const PrefillKernel& prefill_of(const ops::KernelLaunch& launch) {
  const auto* p = launch.spec.as<PrefillKernel>();
  REQUIRE(p);
  return *p;
}

}  // namespace attnjit::test
