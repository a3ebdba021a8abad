// The batch of a TensorRT-LLM call, which both its C++ entry point
// (batch_decode_block_tables.cpp) and its C face (api/c_api_batch_decode.cpp,
// which must know it before checking block_tables and seq_lens against it)
// derive the same way.
#pragma once
#include "attnjit/batch_decode.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit::ops {

// The query's rows per q_len_per_req tokens, or, with per-request query
// lengths (max_q_len + cum_seq_lens_q, which must come together),
// args.batch_size -- the query's rows then say only how many tokens there
// are in all. `query` must be 3-D. Error(InvalidArgument) naming the
// argument: the pair given alone, q_len_per_req < 1, rows not a multiple of
// it, a batch_size that disagrees.
int trtllm_batch_size(const TrtllmDecodeArgs& args, const TensorView& query);

}  // namespace attnjit::ops
