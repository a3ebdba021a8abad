// DLPack's numeric vocabulary (device types, dtype codes) mapped to attnjit's
// and to readable names for error messages. One place, so from_dlpack and the
// C API's attnjit_dltensor_view_as agree on how fp8 is spelled.
#pragma once

#include <dlpack/dlpack.h>

#include <optional>
#include <string>

#include "attnjit/types.hpp"

namespace attnjit::dlpack {

// attnjit's dtype for a scalar (lanes == 1) DLPack dtype; nullopt if unsupported.
// fp8 uses DLPack 1.1's codes (attnjit_fp8.h), which DLPack 0.6 lacks.
std::optional<DType> to_dtype(DLDataType t) noexcept;
DLDataType to_dlpack(DType d) noexcept;

// True for kDLInt/kDLUInt of `bits` bits and one lane: raw bytes that a dtype
// override may re-label.
bool is_raw_integer(DLDataType t, int bits) noexcept;

// "kDLCPU", "kDLCUDA", ...; "unknown" for values DLPack does not define.
const char* device_type_name(int device_type) noexcept;
// "(code=0 kDLInt, bits=8, lanes=1)"
std::string describe(DLDataType t);

}  // namespace attnjit::dlpack
