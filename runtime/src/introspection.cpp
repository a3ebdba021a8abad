// The tools' view of the runtime (attnjit/introspection.hpp): thin wrappers
// over the Engine, NVRTC, the driver and the disk cache, so the CLI needs none
// of those private headers.
#include "attnjit/introspection.hpp"

#include "arch.hpp"
#include "attnjit/runtime.hpp"
#include "bench/bench_support.hpp"
#include "cache/write_probe.hpp"
#include "codegen.hpp"
#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "engine.hpp"
#include "enum_names.hpp"

namespace attnjit::introspect {

const std::vector<std::string>& known_archs() { return attnjit::known_archs(); }
void check_arch(std::string_view arch, std::string_view argument) { attnjit::check_arch(arch, argument); }

const char* to_string(Origin origin) noexcept {
  static constexpr EnumName<Origin> kNames[] = {
      {Origin::Memory, "memory"}, {Origin::Disk, "disk"}, {Origin::Compiled, "compiled"}};
  return name_in(kNames, origin);
}

PreparedKernel prepare(const Runtime& rt, const KernelSpec& spec, const std::string& arch) {
  const detail::Prepared p = rt.engine().prepare(spec, arch);
  PreparedKernel out;
  out.key = p.kernel->key;
  out.origin = p.origin == detail::Origin::Compiled ? Origin::Compiled
               : p.origin == detail::Origin::Disk   ? Origin::Disk
                                                    : Origin::Memory;
  return out;
}

std::string cache_key(const Runtime& rt, const KernelSpec& spec, const std::string& arch) {
  return rt.engine().key_for(spec, arch);
}

std::string cache_entry_path(const Runtime& rt, const std::string& arch, const std::string& key) {
  return rt.engine().disk_cache().entry_path(arch, key).string();
}

GeneratedSource generated_source(const KernelSpec& spec) {
  TranslationUnit tu = generate(spec);
  return {std::move(tu.name), std::move(tu.source)};
}

bool gpu_present() noexcept {
  if (!cuda::driver_available()) return false;
  int n = 0;
  return cuda::driver().DeviceGetCount(&n) == CUDA_SUCCESS && n > 0;
}

DeviceLimits device_limits(const Runtime& rt, int device) {
  return {rt.engine().sm_count(device), rt.engine().smem_per_block(device)};
}

NvrtcFacts nvrtc_facts(const Runtime& rt) {
  const auto& nv = cuda::nvrtc_info(rt.config().nvrtc_library);
  return {nv.version(), nv.path};
}

std::vector<std::string> nvrtc_archs(const Runtime& rt) { return cuda::supported_archs(rt.config().nvrtc_library); }

CacheStats cache_stats(const Runtime& rt) {
  const cache::Stats s = rt.engine().disk_cache().stats();
  return {s.entries, s.bytes, s.max_bytes};
}

std::string cache_not_writable_reason(const Runtime& rt) { return rt.engine().disk_cache().not_writable_reason(); }

std::string describe_write_probe(const std::string& dir) { return cache::describe(cache::probe_writable(dir)); }

struct TimingStream::Impl {
  cuda::ScopedDevice scope;
  CUstream stream = nullptr;
  explicit Impl(int device) : scope(device) {
    ATTNJIT_CU(cuda::driver().StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  }
  ~Impl() { cuda::driver().StreamDestroy(stream); }
};

TimingStream::TimingStream(int device) : impl_(std::make_unique<Impl>(device)) {}
TimingStream::~TimingStream() = default;
void* TimingStream::get() const { return impl_->stream; }
double TimingStream::copy_bandwidth() const { return bench::copy_bandwidth(impl_->stream); }

}  // namespace attnjit::introspect
