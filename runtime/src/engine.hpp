// The Engine behind attnjit::Runtime: turns KernelSpecs into launchable
// kernels. Memory registry first (keyed by the spec's full identity, its
// canonical JSON, plus the arch: a hit costs a hash lookup, not a SHA-256
// over the sources), then the disk cache (by content key), then NVRTC. Thread-safe; every kernel is compiled at most once per process and,
// through the disk cache's per-key lock, once across processes.
#pragma once
#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "attnjit/config.hpp"
#include "cache/disk_cache.hpp"
#include "cache/cache_key.hpp"
#include "codegen.hpp"
#include "spec/kernel_spec.hpp"
#include "table_check.hpp"
#include "workspace_pool.hpp"

namespace attnjit::detail {

enum class Origin { Memory, Disk, Compiled };
const char* to_string(Origin o) noexcept;

// A cubin for one spec and arch, loaded context-independently on first use.
struct Kernel {
  KernelSpec spec;
  std::string arch;
  std::string key;
  std::shared_ptr<const cache::Entry> entry;
  double compile_seconds = 0;  // 0 unless this process compiled it

  // Launch-side state, filled by Engine::load_on_device.
  std::mutex mutex;
  CUlibrary library = nullptr;
  CUkernel kernel = nullptr;
  std::set<int> ready_devices;  // attributes set and module loaded in the device's primary context
};

struct Prepared {
  std::shared_ptr<Kernel> kernel;
  Origin origin = Origin::Memory;
};

class Engine {
 public:
  explicit Engine(Config config);
  ~Engine();

  const Config& config() const { return config_; }
  cache::DiskCache& disk_cache() { return disk_; }

  std::string key_for(const KernelSpec& spec, const std::string& arch) const;
  KeyInputs key_inputs(const TranslationUnit& tu, const std::string& arch) const;
  // What NVRTC gets for `tu` besides the arch and seed: the engine's options,
  // "--no-cache" where NVRTC has a cache of its own (12.9 on: this engine's
  // disk cache is the only one, so `cache clear` and a cold compile are what
  // they say), then the unit's own.
  std::vector<std::string> unit_options(const TranslationUnit& tu) const;

  // Compiles or finds the cubin (no device needed: this is prewarm's path).
  Prepared prepare(const KernelSpec& spec, const std::string& arch);
  // prepare() for the device's arch, then load the library, set the dynamic
  // shared-memory limit and load the module into the device's context, once.
  std::shared_ptr<Kernel> load_on_device(const KernelSpec& spec, int device);

  // The arch to compile for on `device` (cached), and the local default.
  std::string arch_of(int device);
  int sm_count(int device);
  int smem_per_block(int device);  // opt-in dynamic shared memory limit (cached)

  // Workspaces for the one-call entry points, a pool per device (each call
  // leases its own buffer; see workspace_pool.hpp).
  WorkspacePool& workspace_pool(int device);

  // The device-table record the one-call entry points (TensorRT-LLM's and
  // cuDNN's batch decode, append_paged_kv_cache) share on `device`: each
  // raises what an earlier one recorded (table_check.hpp).
  TableCheck& table_check(int device);

  // Memoized plans of the one-call operator entry points, keyed by a problem
  // description (bounded: a serving loop sees few distinct problems).
  std::shared_ptr<const void> find_plan(const std::string& key);
  void remember_plan(const std::string& key, std::shared_ptr<const void> plan);

 private:
  Config config_;
  cache::DiskCache disk_;
  std::vector<std::string> options_;

  std::mutex mutex_;
  // spec identity + "@" + arch -> kernel.
  std::unordered_map<std::string, std::shared_ptr<Kernel>> registry_;
  std::unordered_map<std::string, std::shared_ptr<std::mutex>> in_flight_;
  std::map<int, std::string> archs_;
  std::map<int, int> sm_counts_, smem_per_block_;
  // A CUdevice_attribute of `device`, queried once and kept in `cache`.
  int device_attribute(std::map<int, int>& cache, int device, int attribute);
  std::map<int, std::unique_ptr<WorkspacePool>> pools_;
  std::map<int, std::unique_ptr<TableCheck>> table_checks_;
  std::unordered_map<std::string, std::shared_ptr<const void>> plans_;
};

}  // namespace attnjit::detail
