// attnjit's C API (attnjit.h, attnjit_fp8.h): thin wrappers that check the C
// caller's pointers, convert to the C++ API's types and run the C++ call in
// guard(), so no exception crosses the boundary.
//
// Conventions kept by every function here:
//  * A NULL handle or out pointer is ATTNJIT_ERROR_INVALID_ARGUMENT naming the
//    parameter; an out pointer is set to NULL first, so it is NULL on failure.
//  * *_destroy(NULL) is a no-op returning ATTNJIT_OK, like free(NULL).
//  * A NULL options pointer means attnjit_decode_options_init's defaults.
//  * attnjit_last_error() is errno-like: kept until this thread's next failure.

#include "attnjit/attnjit.h"
#include "attnjit/attnjit_fp8.h"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <optional>

#include "api/c_api_convert.hpp"
#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "api/sized_init.hpp"
#include "api/dlpack_codes.hpp"
#include "ops/single_decode/single_decode_problem.hpp"
#include "attnjit/error.hpp"
#include "attnjit/runtime.hpp"
#include "attnjit/prefill.hpp"
#include "attnjit/single_decode.hpp"
#include "attnjit/tensor.hpp"
#include "attnjit/version.h"

#ifndef ATTNJIT_VERSION_STRING
#error "ATTNJIT_VERSION_STRING must come from CMake (the project version)"
#endif

namespace {

using attnjit::Status;
using attnjit::capi::guard;
using attnjit::capi::require_non_null;

// The C and C++ status numbering is one contract (error.hpp says so).
#define ATTNJIT_SAME_CODE(c, cpp) static_assert(static_cast<int>(c) == static_cast<int>(Status::cpp), #c)
ATTNJIT_SAME_CODE(ATTNJIT_OK, Ok);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_INVALID_ARGUMENT, InvalidArgument);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_UNSUPPORTED, Unsupported);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_NO_DEVICE, NoDevice);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_CUDA, CudaError);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_COMPILE, CompileError);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_CACHE, CacheError);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_CACHE_MISS, CacheMiss);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_NOT_PLANNED, NotPlanned);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_WORKSPACE_TOO_SMALL, WorkspaceTooSmall);
ATTNJIT_SAME_CODE(ATTNJIT_ERROR_INTERNAL, Internal);
#undef ATTNJIT_SAME_CODE

using attnjit::capi::as_stream;
using attnjit::capi::kPlanHandle;
using attnjit::capi::kRuntimeHandle;
using attnjit::capi::plan_as;
using attnjit::capi::require_flag;
using attnjit::capi::wrap_plan;

}  // namespace

namespace {
// Only stateful plans (the wrappers) keep plan memory; the others say so.
void require_memory_hook(bool has, const attnjit_plan_t* plan, const char* fn) {
  if (!has)
    throw attnjit::Error(attnjit::Status::InvalidArgument,
                         fmt::format("{}: a {} plan keeps no plan memory and takes its workspace at run(); allowed: "
                                     "a batch_decode or batch_prefill wrapper",
                                     fn, plan->op));
}

// A caller's buffer through one of the plan memory's hooks (`use`): a wrapper's int or float workspace.
void hand_buffer(attnjit_plan_t* plan, void* buffer, size_t bytes, const char* fn, const char* buffer_is,
                 std::function<void(void*, size_t)> attnjit_plan_t::Memory::*use) {
  require_non_null(plan, fn, "plan", kPlanHandle);
  require_non_null(buffer, fn, "buffer", buffer_is);
  require_memory_hook(bool(plan->memory.*use), plan, fn);
  (plan->memory.*use)(buffer, bytes);
}

// The one-call entry points' tensors as views, converted in argument order (lse: none when NULL).
struct CallViews {
  attnjit::TensorView q, k, v, o;
  std::optional<attnjit::TensorView> lse;
  const attnjit::TensorView* lse_or_null() const { return lse ? &*lse : nullptr; }
};
CallViews call_views(const DLTensor* q, const DLTensor* k, const DLTensor* v, const DLTensor* o, const DLTensor* lse) {
  CallViews views{attnjit::from_dlpack(q, "q"), attnjit::from_dlpack(k, "k"), attnjit::from_dlpack(v, "v"),
                  attnjit::from_dlpack(o, "o"), std::nullopt};
  if (lse) views.lse = attnjit::from_dlpack(lse, "lse");
  return views;
}
}  // namespace

extern "C" {

const char* attnjit_version(void) { return ATTNJIT_VERSION_STRING; }

int attnjit_version_number(void) { return ATTNJIT_VERSION_NUMBER; }

const char* attnjit_status_string(attnjit_status_t status) {
  // status_name covers every Status; other integers read "unknown status".
  return attnjit::status_name(static_cast<Status>(status));
}

const char* attnjit_last_error(void) { return attnjit::capi::last_error(); }

attnjit_status_t attnjit_check_version(int header_abi_version) {
  return guard([&] {
    if (header_abi_version != ATTNJIT_ABI_VERSION)
      throw attnjit::Error(Status::Unsupported,
                           fmt::format("attnjit_check_version: the caller was compiled against C ABI {} but the loaded "
                                       "libattnjit.so {} serves C ABI {}; rebuild against this library's attnjit.h",
                                       header_abi_version, ATTNJIT_VERSION_STRING, ATTNJIT_ABI_VERSION));
  });
}

attnjit_status_t attnjit_runtime_create(attnjit_runtime_t** out) {
  return guard([&] {
    require_non_null(out, "attnjit_runtime_create", "out", "a place for the runtime handle");
    *out = nullptr;
    *out = new attnjit_runtime_t{attnjit::Runtime()};
  });
}

attnjit_status_t attnjit_runtime_destroy(attnjit_runtime_t* rt) {
  return guard([&] { delete rt; });
}

void attnjit_decode_options_init_sized(attnjit_decode_options_t* options, uint32_t struct_size) {
  attnjit_decode_options_t defaults{};
  defaults.kv_layout = ATTNJIT_KV_LAYOUT_NHD;
  defaults.pos_encoding_mode = ATTNJIT_POS_ENCODING_NONE;
  defaults.use_tensor_cores = 0;
  defaults.window_left = -1;
  // Floats stay 0: "not provided", i.e. FlashInfer's defaults.
  attnjit::capi::init_sized(options, defaults, struct_size);
}

// The symbol callers compiled before user variants call: their layout ends at rope_theta.
void(attnjit_decode_options_init)(attnjit_decode_options_t* options) {
  attnjit_decode_options_init_sized(options, offsetof(attnjit_decode_options_t, rope_theta) + sizeof(float));
}

attnjit_status_t attnjit_single_decode_plan(attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k,
                                            const DLTensor* v, const attnjit_decode_options_t* options,
                                            int return_lse, attnjit_plan_t** out) {
  if (out) *out = nullptr;
  return guard([&] {
    constexpr const char* fn = "attnjit_single_decode_plan";
    require_non_null(rt, fn, "rt", kRuntimeHandle);
    require_non_null(out, fn, "out", "a place for the plan handle");
    require_flag(return_lse, fn, "return_lse");
    const attnjit::SingleDecodeOptions opts = attnjit::capi::to_options(options, return_lse == 1);
    const attnjit::SingleDecodeProblem problem = attnjit::ops::single_decode_problem_from_tensors(
        attnjit::from_dlpack(q, "q"), attnjit::from_dlpack(k, "k"), attnjit::from_dlpack(v, "v"), opts);
    *out = wrap_plan("single_decode", attnjit::SingleDecodePlan(rt->runtime, problem));
  });
}

attnjit_status_t attnjit_single_decode_plan_workspace_bytes(const attnjit_plan_t* plan, size_t* out) {
  return attnjit_plan_workspace_bytes(plan, out);
}

attnjit_status_t attnjit_single_decode_run(const attnjit_plan_t* plan, const DLTensor* q, const DLTensor* k,
                                           const DLTensor* v, DLTensor* o, DLTensor* lse, void* workspace,
                                           size_t workspace_bytes, void* stream) {
  return guard([&] {
    const auto& p = plan_as<attnjit::SingleDecodePlan>(plan, "single_decode", "attnjit_single_decode_run");
    const attnjit::TensorView qv = attnjit::from_dlpack(q, "q"), kv = attnjit::from_dlpack(k, "k"),
                              vv = attnjit::from_dlpack(v, "v"), ov = attnjit::from_dlpack(o, "o");
    std::optional<attnjit::TensorView> lv;
    if (lse) lv = attnjit::from_dlpack(lse, "lse");
    p.run(qv, kv, vv, ov, lv ? &*lv : nullptr, workspace, workspace_bytes, as_stream(stream));
  });
}

attnjit_status_t attnjit_single_decode_plan_destroy(attnjit_plan_t* plan) { return attnjit_plan_destroy(plan); }

attnjit_status_t attnjit_plan_workspace_bytes(const attnjit_plan_t* plan, size_t* out) {
  return guard([&] {
    constexpr const char* fn = "attnjit_plan_workspace_bytes";
    require_non_null(plan, fn, "plan", kPlanHandle);
    require_non_null(out, fn, "out", "a place for the byte count");
    *out = plan->workspace_bytes;
  });
}

attnjit_status_t attnjit_plan_int_workspace_bytes(const attnjit_plan_t* plan, size_t* out) {
  return guard([&] {
    constexpr const char* fn = "attnjit_plan_int_workspace_bytes";
    require_non_null(plan, fn, "plan", kPlanHandle);
    require_non_null(out, fn, "out", "a place for the byte count");
    *out = plan->memory.int_workspace_bytes ? plan->memory.int_workspace_bytes() : 0;
  });
}

attnjit_status_t attnjit_plan_set_int_workspace(attnjit_plan_t* plan, void* buffer, size_t bytes) {
  return guard([&] {
    hand_buffer(plan, buffer, bytes, "attnjit_plan_set_int_workspace",
                "device memory for the plan (int_workspace_buffer)", &attnjit_plan_t::Memory::use_int_workspace);
  });
}

attnjit_status_t attnjit_plan_set_float_workspace(attnjit_plan_t* plan, void* buffer, size_t bytes) {
  return guard([&] {
    hand_buffer(plan, buffer, bytes, "attnjit_plan_set_float_workspace",
                "device memory for the workspace (float_workspace_buffer)",
                &attnjit_plan_t::Memory::use_float_workspace);
  });
}

attnjit_status_t attnjit_plan_check(const attnjit_plan_t* plan) {
  return guard([&] {
    require_non_null(plan, "attnjit_plan_check", "plan", kPlanHandle);
    if (plan->memory.check_tables) plan->memory.check_tables();
  });
}

attnjit_status_t attnjit_runtime_check(attnjit_runtime_t* rt, int device) {
  return guard([&] {
    require_non_null(rt, "attnjit_runtime_check", "rt", kRuntimeHandle);
    rt->runtime.check(device);
  });
}

const char* attnjit_plan_operator(const attnjit_plan_t* plan) { return plan ? plan->op : nullptr; }

attnjit_status_t attnjit_plan_describe(const attnjit_plan_t* plan, char* buf, size_t capacity, size_t* needed) {
  return guard([&] {
    constexpr const char* fn = "attnjit_plan_describe";
    require_non_null(plan, fn, "plan", kPlanHandle);
    const std::string& d = plan->description;
    if (needed) *needed = d.size() + 1;
    if (buf && capacity > 0) {
      const size_t n = std::min(capacity - 1, d.size());
      std::memcpy(buf, d.data(), n);
      buf[n] = '\0';
    }
  });
}

attnjit_status_t attnjit_plan_destroy(attnjit_plan_t* plan) {
  return guard([&] { delete plan; });
}

attnjit_status_t attnjit_single_decode_with_kv_cache(attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k,
                                                     const DLTensor* v, DLTensor* o, DLTensor* lse,
                                                     const attnjit_decode_options_t* options, void* workspace,
                                                     size_t workspace_bytes, void* stream) {
  return guard([&] {
    require_non_null(rt, "attnjit_single_decode_with_kv_cache", "rt", kRuntimeHandle);
    const attnjit::SingleDecodeOptions opts = attnjit::capi::to_options(options, lse != nullptr);
    const CallViews t = call_views(q, k, v, o, lse);
    attnjit::single_decode_with_kv_cache(rt->runtime, t.q, t.k, t.v, t.o, t.lse_or_null(), opts, as_stream(stream),
                                         workspace, workspace_bytes);
  });
}

void attnjit_prefill_options_init_sized(attnjit_prefill_options_t* options, uint32_t struct_size) {
  attnjit_prefill_options_t defaults{};
  defaults.kv_layout = ATTNJIT_KV_LAYOUT_NHD;
  defaults.pos_encoding_mode = ATTNJIT_POS_ENCODING_NONE;
  defaults.window_left = -1;
  attnjit::capi::init_sized(options, defaults, struct_size);
}

// The symbol callers compiled before user variants call: their layout ends at backend.
void(attnjit_prefill_options_init)(attnjit_prefill_options_t* options) {
  attnjit_prefill_options_init_sized(options, offsetof(attnjit_prefill_options_t, backend) + sizeof(int32_t));
}

attnjit_status_t attnjit_single_prefill_with_kv_cache(attnjit_runtime_t* rt, const DLTensor* q, const DLTensor* k,
                                                      const DLTensor* v, DLTensor* o, DLTensor* lse,
                                                      const attnjit_prefill_options_t* options,
                                                      const void* packed_custom_mask, size_t packed_custom_mask_bytes,
                                                      void* workspace, size_t workspace_bytes, void* stream) {
  return guard([&] {
    require_non_null(rt, "attnjit_single_prefill_with_kv_cache", "rt", kRuntimeHandle);
    const attnjit::PrefillOptions opts = attnjit::capi::to_prefill_options(options, lse != nullptr);
    const CallViews t = call_views(q, k, v, o, lse);
    // The output's dtype is o's; an options->o_dtype that says otherwise is a contradiction.
    if (opts.o_dtype && *opts.o_dtype != t.o.dtype)
      throw attnjit::Error(Status::InvalidArgument,
                           fmt::format("options->o_dtype={} differs from o's dtype {}; allowed: bits 0 or o's dtype",
                                       attnjit::to_string(*opts.o_dtype), attnjit::to_string(t.o.dtype)));
    const attnjit::capi::PrefillScaleViews scale_views = attnjit::capi::prefill_scales(options);
    const attnjit::PrefillScales scales = scale_views.scales();
    const attnjit::PackedMask mask{packed_custom_mask, packed_custom_mask_bytes};
    attnjit::single_prefill_with_kv_cache(rt->runtime, t.q, t.k, t.v, t.o, t.lse_or_null(), opts, as_stream(stream),
                                          packed_custom_mask ? &mask : nullptr, workspace, workspace_bytes,
                                          scale_views.any() ? &scales : nullptr);
  });
}

attnjit_status_t attnjit_single_prefill_workspace_bytes(attnjit_runtime_t* rt, const DLTensor* q,
                                                       const DLTensor* k, const DLTensor* v,
                                                       const attnjit_prefill_options_t* options, int return_lse,
                                                       int has_custom_mask, size_t* out) {
  return guard([&] {
    constexpr const char* fn = "attnjit_single_prefill_workspace_bytes";
    require_non_null(rt, fn, "rt", kRuntimeHandle);
    require_non_null(out, fn, "out", "a size_t to write");
    const attnjit::PrefillOptions opts = attnjit::capi::to_prefill_options(options, return_lse != 0);
    *out = attnjit::single_prefill_workspace_bytes(rt->runtime, attnjit::from_dlpack(q, "q"),
                                                   attnjit::from_dlpack(k, "k"), attnjit::from_dlpack(v, "v"), opts,
                                                   return_lse != 0, has_custom_mask != 0);
  });
}

attnjit_status_t attnjit_dltensor_view_as(const DLTensor* src, const char* dtype, DLTensor* out) {
  return guard([&] {
    constexpr const char* fn = "attnjit_dltensor_view_as";
    require_non_null(src, fn, "src", "a DLTensor*");
    require_non_null(dtype, fn, "dtype", "a dtype name such as \"float8_e4m3fn\"");
    require_non_null(out, fn, "out", "a DLTensor to write");
    const attnjit::DType want = attnjit::parse_dtype(dtype, "dtype");
    const DLDataType have = src->dtype;
    const int bits = static_cast<int>(attnjit::dtype_size(want) * 8);
    if (attnjit::dlpack::to_dtype(have) != want && !attnjit::dlpack::is_raw_integer(have, bits))
      throw attnjit::Error(Status::InvalidArgument,
                           fmt::format("{}: src dtype {} cannot be viewed as {}; allowed: a {}-bit integer tensor "
                                       "(raw bytes) or a {} tensor",
                                       fn, attnjit::dlpack::describe(have), attnjit::to_string(want), bits,
                                       attnjit::to_string(want)));
    DLTensor copy = *src;
    copy.dtype = attnjit::dlpack::to_dlpack(want);
    *out = copy;
  });
}

}  // extern "C"
