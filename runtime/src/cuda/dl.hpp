// dlopen/dlsym with the loader's error text kept, shared by the driver and
// NVRTC loaders. Handles are never closed: libcuda and NVRTC must outlive every
// static destructor that might still touch a context, kernel or program.
#pragma once
#include <string>

namespace attnjit::cuda::dl {

// dlopen(name, RTLD_NOW | RTLD_LOCAL). RTLD_LOCAL keeps the library's symbols
// out of the global namespace, so a host engine that loads a different libnvrtc
// never binds to ours by accident. On failure: nullptr and *error = dlerror().
void* open(const std::string& name, std::string* error);

// dlclose, only for a library we opened and then found unusable.
void close(void* handle);

// dlsym; on failure nullptr and *error = dlerror() (or a note that it was null).
void* symbol(void* handle, const char* name, std::string* error);

// The file a handle was loaded from (for logs and `attnjit info`); "" if unknown.
std::string path_of(void* handle);

}  // namespace attnjit::cuda::dl
