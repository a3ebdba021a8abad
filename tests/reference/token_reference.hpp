// The float64 check of batch decode's output with one or several query
// tokens per request (speculative decoding): single decode's reference per
// request and token, at the token's position kv_len - q_len + t, on the
// request's gathered rows (paged_kv_batch.hpp). Shared by the speculative and
// the TensorRT-LLM C API (_v3) GPU tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/grid_tally.hpp"
#include "support/paged_kv_batch.hpp"
#include "reference/decode_reference.hpp"
#include "reference/sample_values.hpp"

namespace attnjit::test {

// What the reference needs besides the batch's values.
struct TokenReference {
  std::vector<int32_t> kv_lens, q_lens;  // per request; the q_lens[r] tokens of request r are consecutive rows
  int hq = 8, hkv = 2, d = 128;
  DType q = DType::BF16, kv = DType::BF16;
  int window_left = -1;
  float soft_cap = 0.f;
  PosEncoding pos_encoding = PosEncoding::None;  // RoPE: theta 1e4, scale 1 (the defaults)
  std::optional<float> sm_scale, v_scale;  // default 1/sqrt(d) and 1
  const std::vector<double>* sinks = nullptr;
};

// A test case's heads and dtypes (hq, hkv, d, q, kv, named as here) with the
// given lengths; the rest as the defaults above until the caller sets it.
template <class Case>
TokenReference token_reference_of(const Case& c, std::vector<int32_t> kv_lens, std::vector<int32_t> q_lens) {
  return TokenReference{std::move(kv_lens), std::move(q_lens), c.hq, c.hkv, c.d, c.q, c.kv};
}

struct TokenErrors {
  double o_rel = 0, lse_abs = 0;
};

// The batch decode GPU tests' tolerances for TokenErrors by q dtype: o's
// relative L2 error and lse's absolute error (base 2).
inline double o_tol(DType q) { return q == DType::BF16 ? 1e-2 : 2e-3; }
inline double lse_tol(DType q) { return q == DType::BF16 ? 2e-2 : 4e-3; }

// A batch decode grid test: each case of `cases` (INFOed by its label()) run
// by `run(c, seed)` to its TokenErrors, seeds counting up from `seed`, and
// tallied under `group(c)` against the tolerances of its q dtype; then the
// tally's summary `title` (groups `width` wide) WARNed.
template <class Case, class Run, class Group>
void check_token_grid(const std::vector<Case>& cases, uint32_t seed, const std::string& title, int width,
                      const Run& run, const Group& group) {
  GridTally tally;
  for (const auto& c : cases) {
    INFO(c.label());
    const TokenErrors e = run(c, seed++);
    tally.check(group(c), e.o_rel, o_tol(c.q), e.lse_abs, lse_tol(c.q));
  }
  WARN(tally.summary(title, width));
}

// Max over (request, token) of the rel. L2 error of o over its heads, and of
// the abs. error of lse (base 2). out [tokens, hq, d], lse [tokens, hq] (null:
// not checked); a non-finite output (a row left unwritten in poisoned memory)
// is an infinite error.
inline TokenErrors compare_tokens(const TokenReference& c, const PagedBatch& b, const std::vector<double>& out,
                                  const std::vector<double>* lse) {
  TokenErrors e;
  const int H = c.hq, D = c.d;
  int64_t row = 0;
  for (size_t r = 0; r < c.kv_lens.size(); ++r) {
    const int L = c.kv_lens[r], Q = c.q_lens[r];
    SingleDecodeProblem sp;
    sp.num_qo_heads = H;
    sp.num_kv_heads = c.hkv;
    sp.head_dim = D;
    sp.kv_len = L;
    sp.q_dtype = c.q;
    sp.kv_dtype = c.kv;
    sp.options.window_left = c.window_left;
    if (c.soft_cap > 0) sp.options.logits_soft_cap = c.soft_cap;
    sp.options.pos_encoding_mode = c.pos_encoding;
    sp.options.sm_scale = c.sm_scale;
    sp.options.v_scale = c.v_scale;
    for (int t = 0; t < Q; ++t, ++row) {
      const std::vector<double> q(b.q.begin() + row * H * D, b.q.begin() + (row + 1) * H * D);
      const auto ref = reference_single_decode(sp, q, b.k_dense[r], b.v_dense[r], c.sinks, int64_t(L - Q + t));
      const std::vector<double> o(out.begin() + row * H * D, out.begin() + (row + 1) * H * D);
      e.o_rel = std::max(e.o_rel, relative_l2(o, ref.o));
      if (lse)
        for (int h = 0; h < H; ++h) e.lse_abs = std::max(e.lse_abs, std::fabs((*lse)[row * H + h] - ref.lse[h]));
    }
  }
  return e;
}
inline TokenErrors compare_tokens(const TokenReference& c, const PagedBatch& b, const std::vector<double>& out,
                                  const std::vector<double>& lse) {
  return compare_tokens(c, b, out, &lse);
}

}  // namespace attnjit::test
