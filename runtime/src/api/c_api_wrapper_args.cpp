#include "api/c_api_wrapper_args.hpp"

#include <fmt/format.h>

#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "attnjit/error.hpp"

namespace attnjit::capi {

void require_create_args(const char* fn, const attnjit_runtime_t* rt, attnjit_plan_t* const* out) {
  require_non_null(rt, fn, "rt", kRuntimeHandle);
  require_non_null(out, fn, "out", "a place for the wrapper handle");
}

void refuse_graph_buffers(std::initializer_list<std::pair<const DLTensor*, const char*>> buffers,
                          const char* graph_flag) {
  for (const auto& [buffer, name] : buffers)
    if (buffer)
      throw Error(Status::InvalidArgument,
                  fmt::format("{}: is given but {}=0; allowed: NULL (the fixed buffers serve CUDA-graph mode only)",
                              name, graph_flag));
}

void require_workspace_outputs(const char* fn, const size_t* float_workspace_bytes, const size_t* int_workspace_bytes) {
  require_non_null(float_workspace_bytes, fn, "float_workspace_bytes", "a place for the float workspace's bytes");
  require_non_null(int_workspace_bytes, fn, "int_workspace_bytes", "a place for the int workspace's bytes");
}

}  // namespace attnjit::capi
