// The loaded NVRTC: its typed entry points and what it can target. Internal to
// runtime/src/cuda (compile() and the public queries in nvrtc.hpp use it).
#pragma once
#include <nvrtc.h>  // types only: nothing from NVRTC is linked

#include <string>
#include <vector>

#include "cuda/nvrtc.hpp"

namespace attnjit::cuda {

struct NvrtcApi {
  decltype(&::nvrtcVersion) Version = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) GetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) GetSupportedArchs = nullptr;
  decltype(&::nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&::nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) GetCUBIN = nullptr;
  decltype(&::nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&::nvrtcGetErrorString) GetErrorString = nullptr;
};

struct NvrtcLibrary {
  NvrtcInfo info;
  NvrtcApi api;
  std::vector<int> archs;  // nvrtcGetSupportedArchs, ascending (75, 80, ...)
};

// Loads once per distinct `explicit_library` (thread-safe) and remembers the
// outcome. Throws Error(Unsupported) naming every library tried and why.
const NvrtcLibrary& nvrtc_library(const std::string& explicit_library);

}  // namespace attnjit::cuda
