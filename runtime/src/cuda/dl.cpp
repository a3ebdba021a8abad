#include "cuda/dl.hpp"

#include <dlfcn.h>
#include <link.h>

namespace attnjit::cuda::dl {

namespace {
// glibc keeps dlerror() per thread, so reading it right after the failing call is race-free.
std::string last_error(const char* fallback) {
  const char* e = dlerror();
  return e ? std::string(e) : std::string(fallback);
}
}  // namespace

void* open(const std::string& name, std::string* error) {
  dlerror();  // clear a stale message from an unrelated earlier call
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h && error) *error = last_error("dlopen failed without a message");
  return h;
}

void close(void* handle) { dlclose(handle); }

void* symbol(void* handle, const char* name, std::string* error) {
  dlerror();
  void* p = dlsym(handle, name);
  if (!p && error) *error = last_error("the symbol resolved to null");
  return p;
}

std::string path_of(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return {};
  return map->l_name;
}

}  // namespace attnjit::cuda::dl
