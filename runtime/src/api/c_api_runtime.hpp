// The C API's runtime handle, shared by the files that implement the C API.
#pragma once
#include "attnjit/runtime.hpp"

struct attnjit_runtime {
  attnjit::Runtime runtime;
};
