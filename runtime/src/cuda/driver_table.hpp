// Fills DriverApi from an opened libcuda.so.1 through cuGetProcAddress at a
// fixed CUDA version (kDriverApiVersion), so every pointer has the ABI of the
// prototype in the cuda.h we were built with, whatever driver is installed.
#pragma once
#include <string>

#include "cuda/driver.hpp"

namespace attnjit::cuda {

// Returns "" on success, else a sentence naming what is missing (the entry
// point, or a driver too old for CUDA 12.0).
std::string resolve_driver_api(void* libcuda, DriverApi& api);

}  // namespace attnjit::cuda
