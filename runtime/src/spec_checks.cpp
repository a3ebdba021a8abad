#include "spec_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "attnjit/error.hpp"

namespace attnjit {

namespace {

bool one_of(int v, std::initializer_list<int> allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

[[noreturn]] void bad(std::string_view where, const char* field, const std::string& value, const std::string& allowed) {
  throw Error(Status::InvalidArgument,
              fmt::format("{}.{}={} is not allowed; allowed: {}", where, field, value, allowed));
}

bool is16(DType t) { return t == DType::F16 || t == DType::BF16; }
bool is8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

}  // namespace

void check_kernel_spec(const KernelSpec& s, std::string_view where) {
  if (s.op != KernelOp::SingleDecode && s.op != KernelOp::MergeStates)
    bad(where, "op", std::to_string(static_cast<int>(s.op)), "single_decode, merge_states");
  // kernels/decode.cuh and merge.cuh static_assert these; decode_mma.cuh only 64 and 128.
  const bool tc = s.op == KernelOp::SingleDecode && s.tensor_cores;
  if (tc ? !one_of(s.head_dim, {64, 128}) : !one_of(s.head_dim, {64, 128, 256}))
    bad(where, "head_dim", std::to_string(s.head_dim), tc ? "64, 128 (tensor_cores)" : "64, 128, 256");
  if (!is16(s.o_dtype)) bad(where, "o_dtype", to_string(s.o_dtype), "float16, bfloat16");
  // Warps: 32 to 256 threads per CTA; the planner uses 4.
  if (!one_of(s.warps, {1, 2, 4, 8})) bad(where, "warps", std::to_string(s.warps), "1, 2, 4, 8");
  if (s.op == KernelOp::MergeStates) return;

  if (!is16(s.q_dtype)) bad(where, "q_dtype", to_string(s.q_dtype), "float16, bfloat16");
  if (!is16(s.kv_dtype) && !is8(s.kv_dtype))
    bad(where, "kv_dtype", to_string(s.kv_dtype), "float16, bfloat16, float8_e4m3fn, float8_e5m2");
  if (is16(s.kv_dtype) && s.kv_dtype != s.q_dtype)
    bad(where, "kv_dtype", to_string(s.kv_dtype),
        fmt::format("{} (16-bit KV must equal q_dtype), float8_e4m3fn, float8_e5m2", to_string(s.q_dtype)));
  if (s.o_dtype != s.q_dtype) bad(where, "o_dtype", to_string(s.o_dtype), fmt::format("{} (q_dtype)", to_string(s.q_dtype)));
  if (s.pos_encoding != PosEncoding::None && s.pos_encoding != PosEncoding::RopeLlama &&
      s.pos_encoding != PosEncoding::Alibi)
    bad(where, "pos_encoding", std::to_string(static_cast<int>(s.pos_encoding)), "NONE, ROPE_LLAMA, ALIBI");
  // The tensor-core skeleton takes the group as its 16-row M dimension; the
  // CUDA-core one keeps each head's fragments in registers, up to 8 heads.
  const int max_heads = tc ? 16 : 8;
  if (s.heads_per_cta < 1 || s.heads_per_cta > max_heads)
    bad(where, "heads_per_cta", std::to_string(s.heads_per_cta),
        fmt::format("1 to {}{}", max_heads, tc ? " (tensor_cores)" : ""));
  if (!tc && !one_of(s.unroll, {1, 2, 4, 8})) bad(where, "unroll", std::to_string(s.unroll), "1, 2, 4, 8");
  if (s.dynamic_smem_bytes() > kMaxDynamicSmemBytes)
    bad(where, "warps", std::to_string(s.warps),
        fmt::format("a value whose shared memory ({} B here) fits in {} B", s.dynamic_smem_bytes(),
                    kMaxDynamicSmemBytes));
}

}  // namespace attnjit
