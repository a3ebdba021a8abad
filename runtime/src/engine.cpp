#include "engine.hpp"

#include <fmt/format.h>

#include <chrono>

#include "arch.hpp"
#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "enum_names.hpp"
#include "spec/user_variant.hpp"
#include "log.hpp"
#include "telemetry.hpp"

namespace attnjit::detail {

const char* to_string(Origin o) noexcept {
  static constexpr EnumName<Origin> kNames[] = {
      {Origin::Memory, "memory"}, {Origin::Disk, "disk"}, {Origin::Compiled, "compiled"}};
  return name_in(kNames, o);
}

Engine::Engine(Config config)
    : config_(std::move(config)),
      disk_(config_.cache),
      // -std=c++17 for the headers; no include path is ever given, so every
      // #include must resolve to an embedded header.
      options_{"-std=c++17"} {
  log::set_level(config_.log_level);
}

Engine::~Engine() = default;  // pools free their buffers; libraries stay loaded until exit
                              // (unloading under live graphs that reference them would be worse)

std::string Engine::key_for(const KernelSpec& spec, const std::string& arch) const {
  const TranslationUnit tu = generate(spec);
  return make_cache_key(key_inputs(tu, arch));
}

std::vector<std::string> Engine::unit_options(const TranslationUnit& tu) const {
  std::vector<std::string> options = options_;
  const auto& nvrtc = cuda::nvrtc_info(config_.nvrtc_library);
  if (nvrtc.major > 12 || (nvrtc.major == 12 && nvrtc.minor >= 9)) options.push_back("--no-cache");
  options.insert(options.end(), tu.options.begin(), tu.options.end());
  return options;
}

KeyInputs Engine::key_inputs(const TranslationUnit& tu, const std::string& arch) const {
  KeyInputs in;
  in.source = &tu.source;
  in.headers = &tu.headers;
  in.nvrtc_version = cuda::nvrtc_info(config_.nvrtc_library).version();
  // The exact option list NVRTC receives, minus the arch (its own field).
  cuda::CompileRequest req;
  req.options = unit_options(tu);
  req.arch = arch;
  for (auto& o : cuda::compile_options(req))
    if (o.rfind("--gpu-architecture=", 0) != 0) in.options.push_back(o);
  in.arch = arch;
  in.library_version = ATTNJIT_VERSION_STRING;
  return in;
}

Prepared Engine::prepare(const KernelSpec& spec, const std::string& arch) {
  // Before any file or compile: a spec the templates cannot take, or an arch
  // that is not one, must not reach the cache folder or NVRTC.
  spec.validate();
  check_arch(arch, "arch");
  if (!spec.supports_arch(arch))
    throw Error(Status::Unsupported,
                fmt::format("{} does not run on arch='{}' (its backend needs sm_90a); plan for this device picks "
                            "another kernel",
                            spec.name(), arch));
  const std::string memo = spec.identity() + "@" + arch;
  std::shared_ptr<std::mutex> flight;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = registry_.find(memo); it != registry_.end()) return {it->second, Origin::Memory};
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& f = in_flight_[memo];
    if (!f) f = std::make_shared<std::mutex>();
    flight = f;
  }
  // Single flight in this process: one thread builds, the others wait here and
  // then find it in the registry.
  std::lock_guard<std::mutex> building(*flight);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = registry_.find(memo); it != registry_.end()) return {it->second, Origin::Memory};
  }

  const TranslationUnit tu = generate(spec);
  const auto& nvrtc = cuda::nvrtc_info(config_.nvrtc_library);
  const KeyInputs inputs = key_inputs(tu, arch);
  const std::string key = make_cache_key(inputs);

  double seconds = 0;
  auto produce = [&]() {
    cuda::CompileRequest req;
    req.source = tu.source;
    req.name = tu.name;
    req.headers = tu.headers;
    req.options = unit_options(tu);
    req.arch = arch;
    cuda::CompileResult res;
    try {
      res = cuda::compile(config_.nvrtc_library, req);
    } catch (const Error& e) {  // a user variant's snippet: INVALID_ARGUMENT at its own lines
      std::string mapped;
      if (e.status() == Status::CompileError && snippet_compile_error(e.what(), &mapped))
        throw Error(Status::InvalidArgument, mapped);
      throw;
    }
    seconds = res.seconds;
    if (!res.log.empty()) log::debug("NVRTC log for {}:\n{}", tu.name, res.log);
    cache::Entry e;
    e.key = key;
    e.arch = arch;
    e.kernel_names = {spec.entry_name()};
    e.shared_mem_bytes = static_cast<uint32_t>(spec.dynamic_smem_bytes());
    e.metadata = {{"name", spec.name()},
                  {"spec", spec.to_json()},
                  {"nvrtc_version", nvrtc.version()},
                  {"nvrtc_options", inputs.options},  // exactly what NVRTC got, as hashed
                  {"arch", arch},
                  {"attnjit_version", ATTNJIT_VERSION_STRING},
                  {"compile_seconds", res.seconds},
                  {"created", telemetry::iso_now()}};
    e.cubin = std::move(res.cubin);
    log::info("compiled {} for {} in {:.2f} s", spec.name(), arch, res.seconds);
    telemetry::emit(config_.telemetry, {{"event", "compile"}, {"spec", spec.name()}, {"key", key}, {"arch", arch},
                                        {"seconds", res.seconds}, {"nvrtc", nvrtc.version()}});
    return e;
  };
  // Telemetry: one "miss" line per kernel this process did not have in memory,
  // also when the lookup fails (mode require, a compile error): fleets watch for those.
  const auto lookup_start = std::chrono::steady_clock::now();
  auto miss = [&](const char* from, const char* error) {
    nlohmann::json ev = {{"event", "miss"}, {"spec", spec.name()}, {"key", key}, {"arch", arch}, {"from", from},
                         {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - lookup_start).count()}};
    if (error) ev["error"] = error;
    telemetry::emit(config_.telemetry, std::move(ev));
  };
  std::pair<cache::Entry, cache::DiskCache::Source> found;
  try {
    found = disk_.get_or_produce(arch, key, spec.name() + " for " + arch, produce);
  } catch (const std::exception& e) {
    miss("error", e.what());
    throw;
  }
  auto& [entry, source] = found;
  miss(source == cache::DiskCache::Source::Disk ? "disk" : "compiled", nullptr);

  auto kernel = std::make_shared<Kernel>();
  kernel->spec = spec;
  kernel->arch = arch;
  kernel->key = key;
  kernel->entry = std::make_shared<const cache::Entry>(std::move(entry));
  kernel->compile_seconds = seconds;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    registry_[memo] = kernel;
    in_flight_.erase(memo);
  }
  return {kernel, source == cache::DiskCache::Source::Disk ? Origin::Disk : Origin::Compiled};
}

std::shared_ptr<Kernel> Engine::load_on_device(const KernelSpec& spec, int device) {
  auto kernel = prepare(spec, arch_of(device)).kernel;
  std::lock_guard<std::mutex> lock(kernel->mutex);
  if (kernel->ready_devices.count(device)) return kernel;
  const auto& cu = cuda::driver();
  cuda::ScopedDevice scope(device);
  if (!kernel->library) {
    ATTNJIT_CU(cu.LibraryLoadData(&kernel->library, kernel->entry->cubin.data(), nullptr, nullptr, 0, nullptr,
                                  nullptr, 0));
    ATTNJIT_CU(cu.LibraryGetKernel(&kernel->kernel, kernel->library, spec.entry_name()));
  }
  CUdevice dev;
  ATTNJIT_CU(cu.DeviceGet(&dev, device));
  const int smem = spec.dynamic_smem_bytes();
  if (smem > 48 * 1024) {
    int optin = 0;
    ATTNJIT_CU(cu.DeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
    if (smem > optin)
      throw Error(Status::Unsupported, fmt::format("{} needs {} bytes of shared memory; device {} allows {}",
                                                   spec.name(), smem, device, optin));
    ATTNJIT_CU(cu.KernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem, kernel->kernel, dev));
  }
  // Load the module into this context now, so run() never triggers a lazy
  // load (which would break CUDA-graph capture).
  CUfunction fn = nullptr;
  ATTNJIT_CU(cu.KernelGetFunction(&fn, kernel->kernel));
  kernel->ready_devices.insert(device);
  return kernel;
}

std::string Engine::arch_of(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = archs_.find(device);
  if (it != archs_.end()) return it->second;
  return archs_[device] = cuda::arch_of_device(device);
}

int Engine::device_attribute(std::map<int, int>& cache, int device, int attribute) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = cache.find(device); it != cache.end()) return it->second;
  const auto& cu = cuda::driver();
  CUdevice dev;
  ATTNJIT_CU(cu.DeviceGet(&dev, device));
  int n = 0;
  ATTNJIT_CU(cu.DeviceGetAttribute(&n, static_cast<CUdevice_attribute>(attribute), dev));
  return cache[device] = n;
}

int Engine::sm_count(int device) {
  return device_attribute(sm_counts_, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
}

int Engine::smem_per_block(int device) {
  return device_attribute(smem_per_block_, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
}

WorkspacePool& Engine::workspace_pool(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& pool = pools_[device];
  if (!pool) pool = std::make_unique<WorkspacePool>(device);
  return *pool;
}

TableCheck& Engine::table_check(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& check = table_checks_[device];
  if (!check) check = std::make_unique<TableCheck>(device);
  return *check;
}

std::shared_ptr<const void> Engine::find_plan(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second;
}

void Engine::remember_plan(const std::string& key, std::shared_ptr<const void> plan) {
  constexpr size_t kMaxPlans = 4096;
  std::lock_guard<std::mutex> lock(mutex_);
  if (plans_.size() >= kMaxPlans) plans_.clear();  // a runaway set of shapes; start over
  plans_[key] = std::move(plan);
}

}  // namespace attnjit::detail
