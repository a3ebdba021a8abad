#include "api/dlpack_codes.hpp"

#include <fmt/format.h>

#include "attnjit/attnjit_fp8.h"

namespace attnjit::dlpack {

namespace {
const char* code_name(int code) noexcept {
  switch (code) {
    case kDLInt: return "kDLInt";
    case kDLUInt: return "kDLUInt";
    case kDLFloat: return "kDLFloat";
    case kDLOpaqueHandle: return "kDLOpaqueHandle";
    case kDLBfloat: return "kDLBfloat";
    case kDLComplex: return "kDLComplex";
    case 6: return "kDLBool";  // DLPack >= 1.0
    case ATTNJIT_DLPACK_FLOAT8_E4M3FN: return "kDLFloat8_e4m3fn";
    case ATTNJIT_DLPACK_FLOAT8_E5M2: return "kDLFloat8_e5m2";
  }
  return "unknown";
}
}  // namespace

std::optional<DType> to_dtype(DLDataType t) noexcept {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 16) return DType::F16;
  if (t.code == kDLBfloat && t.bits == 16) return DType::BF16;
  if (t.code == kDLFloat && t.bits == 32) return DType::F32;
  if (t.code == ATTNJIT_DLPACK_FLOAT8_E4M3FN && t.bits == 8) return DType::E4M3;
  if (t.code == ATTNJIT_DLPACK_FLOAT8_E5M2 && t.bits == 8) return DType::E5M2;
  return std::nullopt;
}

DLDataType to_dlpack(DType d) noexcept {
  switch (d) {
    case DType::F16: return {kDLFloat, 16, 1};
    case DType::BF16: return {kDLBfloat, 16, 1};
    case DType::F32: return {kDLFloat, 32, 1};
    case DType::E4M3: return {ATTNJIT_DLPACK_FLOAT8_E4M3FN, 8, 1};
    case DType::E5M2: return {ATTNJIT_DLPACK_FLOAT8_E5M2, 8, 1};
  }
  return {kDLOpaqueHandle, 0, 0};
}

bool is_raw_integer(DLDataType t, int bits) noexcept {
  return (t.code == kDLInt || t.code == kDLUInt) && t.bits == bits && t.lanes == 1;
}

const char* device_type_name(int device_type) noexcept {
  switch (device_type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
  }
  return "unknown";
}

std::string describe(DLDataType t) {
  return fmt::format("(code={} {}, bits={}, lanes={})", t.code, code_name(t.code), t.bits, t.lanes);
}

}  // namespace attnjit::dlpack
