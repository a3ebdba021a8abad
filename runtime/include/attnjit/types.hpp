// Vocabulary shared by the public API, the planner and the kernel specs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attnjit/export.h"

namespace attnjit {

enum class DType : uint8_t { F16, BF16, F32, E4M3, E5M2 };
enum class KVLayout : uint8_t { NHD, HND };
enum class PosEncoding : uint8_t { None, RopeLlama, Alibi };

// What a wrapper's plan() with given arguments needs (FlashInfer's
// workspace_size()): float_bytes of the caller's float workspace (scratch,
// the partial states of a KV split) and int_bytes of plan memory (the index
// arrays plan() uploads; what a buffer given to set_int_workspace must hold).
struct WorkspaceSizes {
  size_t float_bytes = 0;
  size_t int_bytes = 0;
};

ATTNJIT_API size_t dtype_size(DType t) noexcept;
// Lower-case names as FlashInfer/torch spell them: "float16", "bfloat16",
// "float32", "float8_e4m3fn", "float8_e5m2". Short aliases are accepted by parse.
ATTNJIT_API const char* to_string(DType t) noexcept;
ATTNJIT_API const char* to_string(KVLayout l) noexcept;     // "NHD" / "HND"
ATTNJIT_API const char* to_string(PosEncoding p) noexcept;  // "NONE" / "ROPE_LLAMA" / "ALIBI"

// Parsers throw attnjit::Error(InvalidArgument) naming `arg`, the value and the allowed set.
ATTNJIT_API DType parse_dtype(std::string_view s, std::string_view arg);
ATTNJIT_API KVLayout parse_kv_layout(std::string_view s, std::string_view arg);
ATTNJIT_API PosEncoding parse_pos_encoding(std::string_view s, std::string_view arg);

}  // namespace attnjit
