#include "ops/operator_entries.hpp"

#include "ops/batch_decode/batch_decode_planner.hpp"
#include "ops/batch_decode/batch_decode_problem.hpp"

namespace attnjit::ops {

namespace {

nlohmann::json explain(const nlohmann::json& problem, const DeviceFigures& device) {
  const BatchDecodeProblem p = batch_decode_problem_from_json(problem);
  const BatchDecodeLayout L = plan_batch_decode(p, device);
  nlohmann::json j = L.to_json();
  if (p.host_lengths) {
    const auto lens = kv_lens_from_json(problem, p);
    const BatchDecodePartition part = partition_batch_decode(p, L, lens.data(), p.batch_size);
    j["chunk_size"] = part.chunk_size;
    j["work_items"] = part.num_items;
    j["split_requests_slots"] = part.num_slots;
  }
  j["problem"] = to_json(p);
  return j;
}

// Batch decode's kernels differ from single decode's only in the KV source
// (the skeletons and variant hooks are shared and compiled in full by
// single_decode's grid), so this grid covers each source with each skeleton,
// each head dim and dtype pair once, and the choices that depend on the group
// (heads per CTA 1, 4, 5, 7, 8 and 16 on tensor cores) -- 28 specs, not the
// ~1000 of a cross product: CI compiles each for two archs. Speculative
// decoding (several query tokens per request: mask causal, heads x tokens
// per CTA) adds 6: token tiles of 1 to 4, each positional mode, the soft
// cap, fp8 and both KV sources.
std::vector<nlohmann::json> variant_grid() {
  std::vector<nlohmann::json> out;
  auto problem = [](const char* table, int d, const char* q, const char* kv, int group, bool tc, const char* pos) {
    return nlohmann::json{{"op", "batch_decode"},       {"batch_size", 4},     {"num_qo_heads", 2 * group},
                          {"num_kv_heads", 2},          {"head_dim", d},       {"q_dtype", q},
                          {"kv_dtype", kv},             {"page_table", table}, {"use_tensor_cores", tc},
                          {"pos_encoding_mode", pos},   {"host_lengths", std::string(table) == "indptr"},
                          {"max_seq_len", 4096}};
  };
  auto speculative = [&](const char* table, int d, const char* q, const char* kv, int group, const char* pos,
                         const char* q_len_key, int q_len) {
    nlohmann::json j = problem(table, d, q, kv, group, false, pos);
    j[q_len_key] = q_len;
    return j;
  };
  out.push_back(speculative("block_table", 128, "bfloat16", "bfloat16", 4, "NONE", "q_len_per_req", 2));  // 4 x 2
  out.push_back(speculative("block_table", 64, "bfloat16", "float8_e4m3fn", 8, "NONE", "q_len_per_req", 4));  // 8 x 2
  out.push_back(speculative("block_table", 128, "float16", "float8_e5m2", 5, "ALIBI", "q_len_per_req", 3));  // 5 x 3
  out.push_back(speculative("indptr", 128, "bfloat16", "bfloat16", 1, "ROPE_LLAMA", "q_len_per_req", 4));  // 1 x 4
  out.push_back(speculative("block_table", 64, "float16", "float16", 16, "NONE", "max_q_len", 3));  // 16 x 1
  {
    nlohmann::json j = speculative("block_table", 128, "bfloat16", "float8_e4m3fn", 7, "NONE", "q_len_per_req", 2);
    j["logits_soft_cap"] = 30.0;  // 7 x 2
    out.push_back(j);
  }
  for (const char* table : {"indptr", "block_table"}) {
    out.push_back(problem(table, 128, "bfloat16", "bfloat16", 1, false, "NONE"));
    out.push_back(problem(table, 64, "float16", "float8_e4m3fn", 4, false, "ROPE_LLAMA"));
    out.push_back(problem(table, 256, "bfloat16", "float8_e5m2", 5, false, "ALIBI"));
    out.push_back(problem(table, 128, "float16", "float16", 8, false, "NONE"));
    out.push_back(problem(table, 128, "bfloat16", "bfloat16", 4, true, "NONE"));
    out.push_back(problem(table, 64, "bfloat16", "float8_e4m3fn", 7, true, "NONE"));
    out.push_back(problem(table, 128, "float16", "float8_e5m2", 16, true, "ROPE_LLAMA"));
  }
  return out;
}

// Per model: q bfloat16 / float16, KV in q's dtype or fp8 e4m3, both page
// table conventions; kernels do not depend on batch or lengths.
std::vector<nlohmann::json> model_problems(const ModelShape& m) {
  std::vector<nlohmann::json> out;
  for (const char* q : {"bfloat16", "float16"})
    for (const char* kv : {q, "float8_e4m3fn"})
      for (const char* table : {"indptr", "block_table"})
        out.push_back(m.problem({{"op", "batch_decode"},
                                 {"q_dtype", q},
                                 {"kv_dtype", kv},
                                 {"page_table", table},
                                 {"host_lengths", std::string(table) == "indptr"},
                                 {"max_seq_len", 4096}}));
  return out;
}

}  // namespace

OperatorEntry batch_decode_entry() {
  return {"batch_decode",
          "one query token per head (or several: speculative decoding) for a batch of requests over a paged KV cache "
          "(flashinfer BatchDecodeWithPagedKVCacheWrapper, trtllm / cudnn batch decode)",
          kernels_from_json<batch_decode_problem_from_json, batch_decode_kernels>,
          explain,
          variant_grid,
          model_problems,
          batch_decode_bench_problems,
          batch_decode_bench};
}

}  // namespace attnjit::ops
