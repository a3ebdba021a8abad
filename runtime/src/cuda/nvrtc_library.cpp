// Finding and opening NVRTC, once per requested library.
#include "cuda/nvrtc_library.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <memory>
#include <mutex>

#include "attnjit/error.hpp"
#include "cuda/dl.hpp"
#include "log.hpp"

namespace attnjit::cuda {

namespace {

// Newest first: the newest NVRTC knows the newest archs. The unversioned name
// is a last resort (usually only present with a full toolkit install).
constexpr const char* kDefaultNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

struct Loaded {
  NvrtcLibrary lib;
  std::string error;  // "" when lib is usable
};

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& slot, std::string* error) {
  std::string why;
  slot = reinterpret_cast<Fn>(dl::symbol(handle, name, &why));
  if (!slot) *error = fmt::format("it has no {} ({})", name, why);
  return slot != nullptr;
}

// "" on success, else why this (already opened) library is unusable.
std::string bind(void* handle, NvrtcLibrary& lib) {
  NvrtcApi& a = lib.api;
  std::string error;
  const bool ok = resolve(handle, "nvrtcVersion", a.Version, &error) &&
                  resolve(handle, "nvrtcGetNumSupportedArchs", a.GetNumSupportedArchs, &error) &&
                  resolve(handle, "nvrtcGetSupportedArchs", a.GetSupportedArchs, &error) &&
                  resolve(handle, "nvrtcCreateProgram", a.CreateProgram, &error) &&
                  resolve(handle, "nvrtcCompileProgram", a.CompileProgram, &error) &&
                  resolve(handle, "nvrtcGetProgramLogSize", a.GetProgramLogSize, &error) &&
                  resolve(handle, "nvrtcGetProgramLog", a.GetProgramLog, &error) &&
                  resolve(handle, "nvrtcGetCUBINSize", a.GetCUBINSize, &error) &&
                  resolve(handle, "nvrtcGetCUBIN", a.GetCUBIN, &error) &&
                  resolve(handle, "nvrtcDestroyProgram", a.DestroyProgram, &error) &&
                  resolve(handle, "nvrtcGetErrorString", a.GetErrorString, &error);
  if (!ok) return error + "; NVRTC 12.0 or newer is needed";

  if (a.Version(&lib.info.major, &lib.info.minor) != NVRTC_SUCCESS) return "nvrtcVersion failed";
  if (lib.info.major < 12)
    return fmt::format("it is NVRTC {}, and attnjit needs NVRTC 12.0 or newer", lib.info.version());
  int n = 0;
  if (a.GetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return "nvrtcGetNumSupportedArchs failed";
  lib.archs.resize(static_cast<size_t>(n));
  if (a.GetSupportedArchs(lib.archs.data()) != NVRTC_SUCCESS) return "nvrtcGetSupportedArchs failed";
  lib.info.path = dl::path_of(handle);
  return {};
}

// Tries one name; on failure appends "name (why)" to `tried`.
bool try_open(const std::string& name, Loaded& out, std::vector<std::string>& tried) {
  std::string why;
  void* h = dl::open(name, &why);
  if (h) {
    why = bind(h, out.lib);
    if (!why.empty()) dl::close(h);  // wrong or too old: do not keep it mapped
  }
  if (!h || !why.empty()) {
    tried.push_back(fmt::format("{} ({})", name, why));
    out.lib = NvrtcLibrary{};
    return false;
  }
  out.lib.info.library = name;
  return true;
}

Loaded load(const std::string& explicit_library) {
  Loaded out;
  std::vector<std::string> tried;
  if (!explicit_library.empty()) {
    // An explicit choice is never second-guessed by falling back to a default.
    if (!try_open(explicit_library, out, tried))
      out.error = fmt::format("ATTNJIT_NVRTC_LIBRARY='{}' could not be used: {}", explicit_library, tried[0]);
  } else {
    for (const char* name : kDefaultNames)
      if (try_open(name, out, tried)) break;
    if (tried.size() == std::size(kDefaultNames))
      out.error = fmt::format(
          "no usable NVRTC library; tried {}. Install the CUDA NVRTC runtime (12.0 or newer) or set "
          "ATTNJIT_NVRTC_LIBRARY to the path of libnvrtc.so",
          fmt::join(tried, ", "));
  }
  if (out.error.empty())
    log::debug("NVRTC {} loaded: {} ({})", out.lib.info.version(), out.lib.info.library, out.lib.info.path);
  return out;
}

}  // namespace

const NvrtcLibrary& nvrtc_library(const std::string& explicit_library) {
  // Leaked on purpose: compiles on other threads may still run while static
  // destructors do at exit. Map nodes never move, so references stay valid.
  static auto* mutex = new std::mutex;
  static auto* loaded = new std::map<std::string, Loaded>;
  const Loaded* entry = nullptr;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    auto it = loaded->find(explicit_library);
    if (it == loaded->end()) it = loaded->emplace(explicit_library, load(explicit_library)).first;
    entry = &it->second;
  }
  if (!entry->error.empty()) throw Error(Status::Unsupported, entry->error);
  return entry->lib;
}

const NvrtcInfo& nvrtc_info(const std::string& explicit_library) { return nvrtc_library(explicit_library).info; }

bool nvrtc_available(const std::string& explicit_library) noexcept {
  try {
    nvrtc_library(explicit_library);
    return true;
  } catch (...) {
    return false;
  }
}

std::vector<std::string> supported_archs(const std::string& explicit_library) {
  std::vector<std::string> out;
  for (int a : nvrtc_library(explicit_library).archs) out.push_back(fmt::format("sm_{}", a));
  return out;
}

}  // namespace attnjit::cuda
