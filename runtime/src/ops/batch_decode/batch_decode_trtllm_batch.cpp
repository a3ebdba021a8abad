#include "ops/batch_decode/batch_decode_trtllm_batch.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "invalid_argument.hpp"

namespace attnjit::ops {

int trtllm_batch_size(const TrtllmDecodeArgs& a, const TensorView& query) {
  if ((a.cum_seq_lens_q != nullptr) != (a.max_q_len > 0))
    invalid(a.cum_seq_lens_q
                ? fmt::format("max_q_len={} is not allowed with cum_seq_lens_q; they go together (max_q_len: the most "
                              "query tokens any request has, >= 1)",
                              a.max_q_len)
                : fmt::format("max_q_len={} is not allowed without cum_seq_lens_q; they go together "
                              "(cum_seq_lens_q: int32 [batch_size + 1] on the device)",
                              a.max_q_len));
  if (a.q_len_per_req < 1)
    invalid(fmt::format("q_len_per_req={} is not allowed; allowed: >= 1 query tokens per request", a.q_len_per_req));
  const int64_t tokens = query.shape[0];
  if (a.cum_seq_lens_q) {
    if (a.batch_size < 1)
      invalid(fmt::format("batch_size={} is not allowed with cum_seq_lens_q; allowed: the number of requests "
                          "(seq_lens' length), >= 1",
                          a.batch_size));
    return a.batch_size;
  }
  if (tokens % a.q_len_per_req != 0)
    invalid(fmt::format("query: {} token rows is not allowed with q_len_per_req={}; allowed: a multiple of it "
                        "(batch_size * q_len_per_req) (got {})",
                        tokens, a.q_len_per_req, query.describe()));
  const int64_t batch = tokens / a.q_len_per_req;
  if (a.batch_size != 0 && a.batch_size != batch)
    invalid(fmt::format("batch_size={} is not allowed; the query's {} rows hold {} requests of q_len_per_req={}",
                        a.batch_size, tokens, batch, a.q_len_per_req));
  return static_cast<int>(batch);
}

}  // namespace attnjit::ops
